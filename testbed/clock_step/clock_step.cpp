// libmetronome_clock_step.so: steps one process's wall clock, as NTP stepping a node's clock
// would, for the soak test (testbed/soak). Preloaded into a node's processes, it adds an offset to
// CLOCK_REALTIME (clock_gettime, gettimeofday, time) and leaves the monotonic clocks alone, as a
// real step does. The offset (signed nanoseconds, text) is read from the file named by
// METRONOME_CLOCK_STEP_FILE, again at most every 100 ms of monotonic time: writing the file steps
// the clock. No file, or one that does not parse: no offset.
#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using ClockGettime = int (*)(clockid_t, timespec*);

constexpr int64_t kNs = 1'000'000'000;
constexpr int64_t kRereadNs = 100'000'000;

ClockGettime RealClockGettime() {
  static const auto kReal = reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
  return kReal;
}

int64_t MonotonicNs() {
  timespec ts{};
  RealClockGettime()(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNs + ts.tv_nsec;
}

// The offset now (re-read from the file at most every kRereadNs; racing readers may both read
// it, which costs nothing but a read).
int64_t OffsetNs() {
  static std::atomic<int64_t> offset{0};
  static std::atomic<int64_t> next_read{0};
  const int64_t now = MonotonicNs();
  if (now < next_read.load(std::memory_order_relaxed)) {
    return offset.load(std::memory_order_relaxed);
  }
  next_read.store(now + kRereadNs, std::memory_order_relaxed);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): nothing in the preloaded process calls setenv
  const char* path = std::getenv("METRONOME_CLOCK_STEP_FILE");
  int64_t value = 0;
  if (path != nullptr) {
    const int saved_errno = errno;  // the caller asked for the time, not for our file's errors
    if (std::FILE* f = std::fopen(path, "re")) {
      long long v = 0;
      if (std::fscanf(f, "%lld", &v) == 1) value = v;
      std::fclose(f);
    }
    errno = saved_errno;
  }
  offset.store(value, std::memory_order_relaxed);
  return value;
}

bool IsRealtime(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int clock_gettime(clockid_t id, timespec* ts) {
  const int rc = RealClockGettime()(id, ts);
  if (rc != 0 || !IsRealtime(id)) return rc;
  const int64_t t = static_cast<int64_t>(ts->tv_sec) * kNs + ts->tv_nsec + OffsetNs();
  ts->tv_sec = static_cast<time_t>(t / kNs);
  ts->tv_nsec = static_cast<long>(t % kNs);
  return 0;
}

__attribute__((visibility("default"))) int gettimeofday(timeval* tv, void* /*tz*/) {
  timespec ts{};
  const int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == 0) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = static_cast<suseconds_t>(ts.tv_nsec / 1000);
  }
  return rc;
}

__attribute__((visibility("default"))) time_t time(time_t* out) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"
