#include "launcher.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace metronome::testbed::trainer {
namespace {

// Children to forward a termination signal to (read by the signal handler).
constexpr int kMaxChildren = 1024;
volatile sig_atomic_t g_child_count = 0;
pid_t g_children[kMaxChildren];

void ForwardSignal(int signal) {
  for (int i = 0; i < g_child_count; ++i) {
    if (g_children[i] > 0) ::kill(g_children[i], signal);
  }
}

// The command line of one rank: ours without the options the launcher sets itself.
std::vector<std::string> ChildArguments(int argc, char** argv) {
  static const std::set<std::string> kOverridden = {"--local-ranks", "--rank",    "--world-size",
                                                    "--rendezvous",  "--id-file", "--phases-out",
                                                    "--summary-out"};
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (kOverridden.count(name) != 0) {
      if (arg.find('=') == std::string::npos) ++i;  // skip the value too
      continue;
    }
    args.push_back(arg);
  }
  return args;
}

}  // namespace

int LaunchLocalRanks(const Options& options, int argc, char** argv) {
  const int n = options.local_ranks;
  if (n > kMaxChildren) {
    std::cerr << "metronome-trainer: at most " << kMaxChildren << " local ranks" << std::endl;
    return 2;
  }
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "metronome-trainer-XXXXXX").string();
  if (::mkdtemp(dir_template.data()) == nullptr) {
    std::cerr << "metronome-trainer: mkdtemp: " << std::strerror(errno) << std::endl;
    return 1;
  }
  const std::filesystem::path dir = dir_template;
  const auto base = ChildArguments(argc, argv);

  struct sigaction action {};
  action.sa_handler = ForwardSignal;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    std::vector<std::string> args = {argv[0]};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), {"--rank", std::to_string(rank), "--world-size", std::to_string(n),
                             "--rendezvous", dir.string(), "--summary-out",
                             (dir / ("summary." + std::to_string(rank) + ".json")).string()});
    if (!options.phases_out.empty()) {
      args.insert(args.end(),
                  {"--phases-out", options.phases_out + ".rank" + std::to_string(rank)});
    }
    if (rank != 0) args.push_back("--quiet");
    std::vector<char*> cargs;
    cargs.reserve(args.size() + 1);
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);

    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::cerr << "metronome-trainer: fork: " << std::strerror(errno) << std::endl;
      ForwardSignal(SIGTERM);
      break;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the launcher
      if (::getppid() != parent) ::_exit(1);
      ::execv("/proc/self/exe", cargs.data());
      std::fprintf(stderr, "metronome-trainer: exec: %s\n", std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
    g_children[g_child_count] = pid;
    g_child_count = g_child_count + 1;
  }

  int exit_code = static_cast<int>(pids.size()) == n ? 0 : 1;
  std::size_t running = pids.size();
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --running;
    for (int i = 0; i < g_child_count; ++i) {
      if (g_children[i] == pid) g_children[i] = 0;
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && exit_code == 0) {
      exit_code = code;
      std::cerr << "metronome-trainer: a rank failed (exit " << code << "): stopping the others"
                << std::endl;
      ForwardSignal(SIGTERM);
    }
  }

  // Merge the ranks' phase files (rank order) into the one asked for.
  if (!options.phases_out.empty()) {
    std::ofstream merged(options.phases_out, std::ios::trunc);
    for (int rank = 0; rank < n; ++rank) {
      const std::string part = options.phases_out + ".rank" + std::to_string(rank);
      std::ifstream in(part);
      if (in) merged << in.rdbuf();
      std::filesystem::remove(part);
    }
  }
  if (!options.summary_out.empty()) {
    std::error_code error;
    std::filesystem::copy_file(dir / "summary.0.json", options.summary_out,
                               std::filesystem::copy_options::overwrite_existing, error);
    if (error && exit_code == 0) {
      std::cerr << "metronome-trainer: no summary from rank 0: " << error.message() << std::endl;
      exit_code = 1;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return exit_code;
}

}  // namespace metronome::testbed::trainer
