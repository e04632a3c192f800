// A synthetic training job over the fake libnccl.so.2 (calls complete on the host), for the
// shim's process-level tests and its footprint benchmark. Subcommands:
//   iterate <iters> <compute_us>   DDP-like loop: compute, then buckets of 1 MiB and 25 MiB;
//                                  prints "median_iteration_us <v>"
//   bcast <n>                      n ncclBcast calls (NCCL calls ncclBroadcast inside), destroy
//   missing                        calls ncclAlltoAll, absent from the fake NCCL (via dlsym)
//   libs                           creates a communicator, waits, prints the loaded libraries
//   fork                           creates a communicator, forks; the child does it again
//   idle                           never touches NCCL; prints its thread count
//   footprint                      prints VmRSS and thread count before/after a communicator
//   calls <n>                      n back-to-back ncclAllReduce calls; prints ns per call
//   nonblocking                    a nonblocking communicator (rank 2 of 4): polls it ready, then
//                                  20 ncclAllReduce; prints the polls and the calls that succeeded
//   revoke                         5 ncclAllReduce, ncclCommRevoke, 5 more (refused), destroy
//   traffic_class                  prints the trafficClass the fake NCCL received for a config
//                                  that leaves it undefined, one that sets 7, and a split
//                                  without a config
#include <dlfcn.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern "C" int FakeNcclTrafficClass(ncclComm_t comm);  // fake_nccl.cpp

namespace {

using Clock = std::chrono::steady_clock;

ncclComm_t MakeComm() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return nullptr;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return nullptr;
  return comm;
}

std::string Status(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) {
      std::string v = line.substr(std::strlen(key));
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "?";
}

int Iterate(int iters, int compute_us) {
  ncclComm_t comm = MakeComm();
  if (comm == nullptr) return 2;
  std::vector<float> small(std::size_t{256} * 1024);     // 1 MiB
  std::vector<float> big(std::size_t{25} * 256 * 1024);  // 25 MiB
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::microseconds(compute_us));
    ncclAllReduce(small.data(), small.data(), small.size(), ncclFloat, ncclSum, comm, nullptr);
    ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat, ncclSum, comm, nullptr);
    ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat, ncclSum, comm, nullptr);
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  ncclCommDestroy(comm);
  std::sort(times.begin(), times.end());
  std::printf("median_iteration_us %.1f\n", times[times.size() / 2]);
  return 0;
}

int Nonblocking() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 2;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  if (ncclCommInitRankConfig(&comm, 4, id, 2, &config) != ncclInProgress) return 3;
  int polls = 0;
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && polls < 100) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return 4;
    ++polls;
  }
  float x[4] = {};
  int ok = 0;
  for (int i = 0; i < 20; ++i) {
    ok += ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr) == ncclSuccess;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("nonblocking polls %d calls_ok %d\n", polls, ok);
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 5;
}

int Revoke() {
  ncclComm_t comm = MakeComm();
  if (comm == nullptr) return 2;
  float x[4] = {};
  for (int i = 0; i < 5; ++i) ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr);
  if (ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) != ncclSuccess) return 3;
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    refused += ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess;
  }
  std::printf("revoked refused %d\n", refused);
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 4;
}

int TrafficClass() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 2;
  ncclConfig_t undefined = NCCL_CONFIG_INITIALIZER;
  ncclConfig_t seven = NCCL_CONFIG_INITIALIZER;
  seven.trafficClass = 7;
  ncclComm_t a = nullptr;
  ncclComm_t b = nullptr;
  ncclComm_t c = nullptr;
  if (ncclCommInitRankConfig(&a, 1, id, 0, &undefined) != ncclSuccess) return 3;
  if (ncclCommInitRankConfig(&b, 1, id, 0, &seven) != ncclSuccess) return 4;
  if (ncclCommSplit(a, 0, 0, &c, nullptr) != ncclSuccess) return 5;
  std::printf("traffic_class undefined %d set %d split %d app_config %d\n", FakeNcclTrafficClass(a),
              FakeNcclTrafficClass(b), FakeNcclTrafficClass(c), undefined.trafficClass);
  ncclCommDestroy(c);
  ncclCommDestroy(b);
  ncclCommDestroy(a);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "iterate" && argc > 3) return Iterate(std::atoi(argv[2]), std::atoi(argv[3]));
  if (cmd == "nonblocking") return Nonblocking();
  if (cmd == "revoke") return Revoke();
  if (cmd == "traffic_class") return TrafficClass();
  if (cmd == "bcast" && argc > 2) {
    ncclComm_t comm = MakeComm();
    if (comm == nullptr) return 2;
    float x[4] = {};
    const int n = std::atoi(argv[2]);
    for (int i = 0; i < n; ++i) {
      if (ncclBcast(x, 4, ncclFloat, 0, comm, nullptr) != ncclSuccess) return 3;
    }
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 4;
  }
  if (cmd == "missing") {
    using Fn =
        ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "ncclAlltoAll"));
    if (fn == nullptr) {
      std::printf("ncclAlltoAll absent\n");
      return 0;
    }
    std::printf("ncclAlltoAll -> %d\n",
                static_cast<int>(fn(nullptr, nullptr, 1, ncclFloat, nullptr, nullptr)));
    return 0;
  }
  if (cmd == "libs") {
    ncclComm_t comm = MakeComm();
    if (comm == nullptr) return 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::ifstream maps("/proc/self/maps");
    std::string line;
    std::set<std::string> libs;
    while (std::getline(maps, line)) {
      const size_t slash = line.find('/');
      if (slash != std::string::npos && line.find(".so", slash) != std::string::npos) {
        libs.insert(line.substr(slash));
      }
    }
    for (const auto& l : libs) std::printf("lib %s\n", l.c_str());
    std::printf("threads %s\n", Status("Threads:").c_str());
    ncclCommDestroy(comm);
    return 0;
  }
  if (cmd == "fork") {
    ncclComm_t comm = MakeComm();
    if (comm == nullptr) return 2;
    float x[4] = {};
    ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const pid_t pid = fork();
    if (pid == 0) {
      // The child: no inherited background thread; it may use NCCL afresh.
      std::printf("child threads %s\n", Status("Threads:").c_str());
      std::fflush(stdout);
      ncclComm_t c2 = MakeComm();
      if (c2 == nullptr) _exit(5);
      for (int i = 0; i < 10; ++i) ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c2, nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let its client start
      ncclCommDestroy(c2);
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr);
    ncclCommDestroy(comm);
    std::printf("child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128);
    return 0;
  }
  if (cmd == "idle") {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::printf("threads %s\n", Status("Threads:").c_str());
    std::ifstream maps("/proc/self/maps");
    std::string line;
    bool zmq = false;
    while (std::getline(maps, line)) zmq = zmq || line.find("libzmq") != std::string::npos;
    std::printf("libzmq %s\n", zmq ? "loaded" : "not loaded");
    return 0;
  }
  if (cmd == "calls" && argc > 2) {
    ncclComm_t comm = MakeComm();
    if (comm == nullptr) return 2;
    float x[4] = {};
    const long n = std::atol(argv[2]);
    for (long i = 0; i < n / 10; ++i) ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr);
    // CPU time of this thread only: the shim's background thread does not count, nor do the
    // other processes sharing the machine.
    auto cpu_ns = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
    };
    const double t0 = cpu_ns();
    for (long i = 0; i < n; ++i) ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr);
    const double t1 = cpu_ns();
    std::printf("ns_per_call %.2f\n", (t1 - t0) / static_cast<double>(n));
    ncclCommDestroy(comm);
    return 0;
  }
  if (cmd == "footprint") {
    std::printf("start rss %s threads %s\n", Status("VmRSS:").c_str(), Status("Threads:").c_str());
    ncclComm_t comm = MakeComm();
    if (comm == nullptr) return 2;
    float x[4] = {};
    for (int i = 0; i < 2000; ++i) {
      ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, nullptr);
      if (i % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    std::printf("comm rss %s threads %s\n", Status("VmRSS:").c_str(), Status("Threads:").c_str());
    ncclCommDestroy(comm);
    return 0;
  }
  std::fprintf(stderr, "usage: fake_job iterate|bcast|missing|libs|fork|idle|footprint\n");
  return 1;
}
