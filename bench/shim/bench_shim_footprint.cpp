// What the shim adds to a real process, through the real exported symbols (LD_PRELOAD, PLT and
// all): a synthetic job over the fake NCCL, without and with LD_PRELOAD=libmetronome.so (no
// scheduler listening):
//   - CPU ns per ncclAllReduce call (10 M back-to-back calls; the fake returns at once), and
//   - resident memory and threads before and after a communicator (2000 all-reduces, then 1.2 s
//     idle so that reports are attempted).
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void Run(const char* label, const std::string& env, const char* what = "footprint") {
  const std::string cmd = env + " METRONOME_SCHEDULER=tcp://127.0.0.1:1 METRONOME_LOG=error " +
                          METRONOME_FAKE_JOB_PATH + " " + what + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return;
  char line[256];
  while (std::fgets(line, sizeof(line), p) != nullptr) std::printf("%-22s %s", label, line);
  pclose(p);
}

}  // namespace

int main() {
  const std::string shim = std::string("LD_PRELOAD=") + METRONOME_SHIM_PATH;
  std::printf("%-22s %s\n", "run", "CPU ns per ncclAllReduce call (best of 3)");
  for (int i = 0; i < 3; ++i) {
    Run("without shim", "", "calls 10000000");
    Run("with shim (off)", "METRONOME_MODE=off " + shim, "calls 10000000");
    Run("with shim (enforce)", shim, "calls 10000000");
  }
  std::printf("\n%-22s %s\n", "run", "stage, VmRSS, threads");
  Run("without shim", "");
  Run("with shim (enforce)", std::string("LD_PRELOAD=") + METRONOME_SHIM_PATH);
  Run("with shim (off)", std::string("METRONOME_MODE=off LD_PRELOAD=") + METRONOME_SHIM_PATH);
  return 0;
}
