#include "runner.hpp"

#include <dlfcn.h>
#include <link.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <thread>

#include "cuda_buffers.hpp"
#include "rendezvous.hpp"
#include "stats.hpp"

namespace metronome::testbed::trainer {
namespace {

using nlohmann::json;

std::int64_t NowNs(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Sleeps until `deadline` (CLOCK_MONOTONIC ns): a sleep to 200 us before it, then a spin, which
// is far more precise than a sleep alone (on the build machines a sleep wakes 70-80 us late).
void SleepUntil(std::int64_t deadline) {
  constexpr std::int64_t kSpinNs = 200000;
  const std::int64_t wake = deadline - kSpinNs;
  if (wake > NowNs(CLOCK_MONOTONIC)) {
    timespec ts{static_cast<time_t>(wake / 1000000000), static_cast<long>(wake % 1000000000)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  while (NowNs(CLOCK_MONOTONIC) < deadline) {
  }
}

// The file of the libnccl.so.2 this process loaded (the stand-in or the real one).
std::string ncclLibraryPath() {
  void* handle = ::dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_LAZY);
  if (handle == nullptr) return "unknown";
  link_map* map = nullptr;
  std::string path = "unknown";
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    path = map->l_name;
  }
  ::dlclose(handle);
  return path;
}

// --device auto: host buffers on the stand-in (it exports a marker symbol), device memory else.
std::string ResolveDevice(const std::string& device) {
  if (device != "auto") return device;
  void* handle = ::dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_LAZY);
  if (handle == nullptr) return "host";
  const bool standin = ::dlsym(handle, "metronome_nccl_standin") != nullptr;
  ::dlclose(handle);
  return standin ? "host" : "cuda";
}

class NcclError : public std::runtime_error {
 public:
  NcclError(const std::string& call, ncclResult_t rc, ncclComm_t comm)
      : std::runtime_error(call + " failed: " + ncclGetErrorString(rc) + " (" +
                           std::to_string(static_cast<int>(rc)) + "): " + ncclGetLastError(comm)) {}
};

void Check(ncclResult_t rc, const char* call, ncclComm_t comm = nullptr) {
  if (rc != ncclSuccess) throw NcclError(call, rc, comm);
}

json ToJson(const Distribution& d) {
  return {{"mean", d.mean}, {"p50", d.p50}, {"p99", d.p99}, {"min", d.min}, {"max", d.max}};
}

struct Phase {
  int iteration = 0;
  std::int64_t compute_start_ns = 0;  // CLOCK_REALTIME
  std::int64_t comm_start_ns = 0;
  std::int64_t comm_end_ns = 0;
  double compute_ms = 0;
  double comm_ms = 0;
  double iteration_ms = 0;
};

ncclComm_t InitComm(const Options& options) {
  const auto timeout =
      std::chrono::milliseconds(static_cast<long>(options.rendezvous_timeout_s * 1000));
  ncclUniqueId id;
  std::thread publisher;
  std::exception_ptr publish_error;
  IdExchange exchange;
  if (options.world_size == 1) {
    Check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  } else {
    exchange = IdExchange::Parse(options.rendezvous, options.id_file, options.job);
    if (options.rank == 0) {
      Check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      // Publishing over TCP waits for the peers: do it beside ncclCommInitRank.
      publisher = std::thread([&] {
        try {
          PublishId(exchange, id, options.world_size, timeout);
        } catch (...) {
          publish_error = std::current_exception();
        }
      });
    } else {
      id = FetchId(exchange, timeout);
    }
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = ncclCommInitRank(&comm, options.world_size, id, options.rank);
  if (publisher.joinable()) publisher.join();
  if (publish_error) std::rethrow_exception(publish_error);
  Check(rc, "ncclCommInitRank");
  if (options.rank == 0 && options.world_size > 1) RetireId(exchange);
  return comm;
}

}  // namespace

int RunRank(const Options& options, const Workload& workload) {
  const std::string tag = "[" + options.job + " rank " + std::to_string(options.rank) + "] ";
  ncclComm_t comm = nullptr;
  try {
    std::uint64_t largest = 0;
    for (auto b : workload.buckets) largest = std::max(largest, b);
    auto buffers = Buffers::Create(ResolveDevice(options.device), options.rank,
                                   static_cast<std::size_t>(largest));
    int version = 0;
    Check(ncclGetVersion(&version), "ncclGetVersion");
    const std::string library = ncclLibraryPath();
    if (!options.quiet) {
      std::cout << tag << "nccl " << version << " from " << library << ", " << options.world_size
                << " ranks, model " << workload.model << " on " << workload.gpu << ": compute "
                << workload.compute_ms << " ms, gradient " << workload.gradient_bytes
                << " bytes in " << workload.buckets.size() << " buckets, buffers "
                << buffers->Describe() << std::endl;
    }
    comm = InitComm(options);

    std::ofstream phases_file;
    if (!options.phases_out.empty()) {
      phases_file.open(options.phases_out, std::ios::trunc);
      if (!phases_file) throw std::runtime_error("cannot write " + options.phases_out);
    }
    std::mt19937 rng(options.seed * 7919u + static_cast<unsigned>(options.rank));
    std::normal_distribution<double> jitter(0.0, options.compute_jitter);

    std::vector<Phase> phases;
    // Timestamps are CLOCK_REALTIME, taken once here and advanced by CLOCK_MONOTONIC, so that
    // within a job they are exactly consistent with the measured durations.
    const std::int64_t job_start_mono = NowNs(CLOCK_MONOTONIC);
    const std::int64_t job_start_ns = NowNs(CLOCK_REALTIME);
    auto realtime = [&](std::int64_t mono) { return job_start_ns + (mono - job_start_mono); };
    for (int it = 0; it < options.iterations; ++it) {
      Phase p;
      p.iteration = it;
      const double factor = options.compute_jitter > 0 ? std::max(0.0, 1.0 + jitter(rng)) : 1.0;
      const std::int64_t start_mono = NowNs(CLOCK_MONOTONIC);
      p.compute_start_ns = realtime(start_mono);
      SleepUntil(start_mono + static_cast<std::int64_t>(workload.compute_ms * factor * 1e6));
      const std::int64_t comm_mono = NowNs(CLOCK_MONOTONIC);
      p.comm_start_ns = realtime(comm_mono);
      auto* data = buffers->Data();
      for (const auto bytes : workload.buckets) {
        Check(ncclAllReduce(data, data, static_cast<std::size_t>(bytes / 4), ncclFloat32, ncclSum,
                            comm, buffers->Stream()),
              "ncclAllReduce", comm);
      }
      buffers->Synchronize();
      const std::int64_t end_mono = NowNs(CLOCK_MONOTONIC);
      p.comm_end_ns = realtime(end_mono);
      p.compute_ms = static_cast<double>(comm_mono - start_mono) / 1e6;
      p.comm_ms = static_cast<double>(end_mono - comm_mono) / 1e6;
      p.iteration_ms = static_cast<double>(end_mono - start_mono) / 1e6;
      phases.push_back(p);
      if (!options.quiet) {
        std::printf("%siter %d/%d compute_ms=%.3f comm_start_ns=%lld comm_ms=%.3f iter_ms=%.3f\n",
                    tag.c_str(), it + 1, options.iterations, p.compute_ms,
                    static_cast<long long>(p.comm_start_ns), p.comm_ms, p.iteration_ms);
        std::fflush(stdout);
      }
      if (phases_file) {
        phases_file << json{{"job", options.job},
                            {"rank", options.rank},
                            {"iteration", it},
                            {"warmup", it < options.warmup},
                            {"compute_start_ns", p.compute_start_ns},
                            {"comm_start_ns", p.comm_start_ns},
                            {"comm_end_ns", p.comm_end_ns},
                            {"compute_ms", p.compute_ms},
                            {"comm_ms", p.comm_ms},
                            {"iteration_ms", p.iteration_ms},
                            {"bytes", workload.gradient_bytes}}
                           .dump()
                    << '\n'
                    << std::flush;
      }
    }
    const double completion_s = static_cast<double>(NowNs(CLOCK_MONOTONIC) - job_start_mono) / 1e9;
    const std::int64_t job_end_ns = realtime(NowNs(CLOCK_MONOTONIC));
    Check(ncclCommFinalize(comm), "ncclCommFinalize", comm);
    Check(ncclCommDestroy(comm), "ncclCommDestroy");
    comm = nullptr;

    // Statistics leave the warm-up iterations out (unless that would leave nothing).
    const std::size_t skip = static_cast<std::size_t>(options.warmup) < phases.size()
                                 ? static_cast<std::size_t>(options.warmup)
                                 : 0;
    std::vector<double> iteration_ms, compute_ms, comm_ms;
    for (std::size_t i = skip; i < phases.size(); ++i) {
      iteration_ms.push_back(phases[i].iteration_ms);
      compute_ms.push_back(phases[i].compute_ms);
      comm_ms.push_back(phases[i].comm_ms);
    }
    const json summary = {
        {"job", options.job},
        {"rank", options.rank},
        {"world_size", options.world_size},
        {"model", workload.model},
        {"gpu", workload.gpu},
        {"workload_source", workload.source},
        {"device", buffers->Describe()},
        {"nccl_library", library},
        {"nccl_version", version},
        {"iterations", options.iterations},
        {"warmup", static_cast<int>(skip)},
        {"compute_ms_configured", workload.compute_ms},
        {"gradient_bytes", workload.gradient_bytes},
        {"buckets", workload.buckets},
        {"iteration_ms", ToJson(Summarize(iteration_ms))},
        {"compute_ms", ToJson(Summarize(compute_ms))},
        {"comm_ms", ToJson(Summarize(comm_ms))},
        {"completion_s", completion_s},
        {"start_ns", job_start_ns},
        {"end_ns", job_end_ns},
    };
    if (!options.summary_out.empty()) {
      std::ofstream out(options.summary_out, std::ios::trunc);
      out << summary.dump(2) << '\n';
      if (!out) throw std::runtime_error("cannot write " + options.summary_out);
    }
    if (options.rank == 0) std::cout << summary.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << tag << "error: " << e.what() << std::endl;
    if (comm != nullptr) ncclCommAbort(comm);
    return 1;
  }
}

}  // namespace metronome::testbed::trainer
