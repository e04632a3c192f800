// Resident memory and threads the shim adds to a process: runs a synthetic job (fake NCCL,
// 2000 small all-reduces, then 1.2 s idle so that reports are sent) without and with
// LD_PRELOAD=libmetronome.so (no scheduler listening), and prints both.
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void Run(const char* label, const std::string& env) {
  const std::string cmd = env + " METRONOME_SCHEDULER=tcp://127.0.0.1:1 METRONOME_LOG=error " +
                          METRONOME_FAKE_JOB_PATH + " footprint 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return;
  char line[256];
  while (std::fgets(line, sizeof(line), p) != nullptr) std::printf("%-22s %s", label, line);
  pclose(p);
}

}  // namespace

int main() {
  std::printf("%-22s %s\n", "run", "stage, VmRSS, threads");
  Run("without shim", "");
  Run("with shim (enforce)", std::string("LD_PRELOAD=") + METRONOME_SHIM_PATH);
  Run("with shim (off)", std::string("METRONOME_MODE=off LD_PRELOAD=") + METRONOME_SHIM_PATH);
  return 0;
}
