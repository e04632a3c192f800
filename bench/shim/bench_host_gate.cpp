// Host gate release error: how late SleepUntilRealtime (sleep until 200 µs before the target, then
// spin) releases a waiter, against the target, idle and with the other cores loaded; plain
// clock_nanosleep for comparison. Prints a table (µs).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>
#include <vector>

#include "host_gate.hpp"
#include "metronome/common/clock.hpp"

namespace {

struct Row {
  double p50, p99, max;
};

Row Measure(int n, bool spin) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int64_t> delay(1'000'000, 3'000'000);
  std::vector<int64_t> err;
  err.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int64_t target = metronome::RealtimeNs() + delay(rng);
    int64_t released = 0;
    if (spin) {
      released = metronome::shim::SleepUntilRealtime(target);
    } else {
      timespec ts{static_cast<time_t>(target / 1'000'000'000),
                  static_cast<long>(target % 1'000'000'000)};
      clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr);
      released = metronome::RealtimeNs();
    }
    err.push_back(released - target);
  }
  std::sort(err.begin(), err.end());
  auto at = [&](double q) {
    return static_cast<double>(err[std::min(
               err.size() - 1, static_cast<size_t>(q * static_cast<double>(err.size())))]) /
           1e3;
  };
  return Row{at(0.5), at(0.99), static_cast<double>(err.back()) / 1e3};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 500;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("host gate release error, %d waits of 1-3 ms each, %u cores (µs, late > 0)\n", n,
              cores);
  std::printf("%-34s %8s %8s %8s\n", "condition", "p50", "p99", "max");
  auto print = [](const char* what, Row r) {
    std::printf("%-34s %8.1f %8.1f %8.1f\n", what, r.p50, r.p99, r.max);
  };
  print("idle, sleep+spin (the gate)", Measure(n, true));
  print("idle, clock_nanosleep alone", Measure(n, false));
  for (unsigned busy : {1u, cores}) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> hogs;
    for (unsigned i = 0; i < busy; ++i) {
      hogs.emplace_back([&] {
        volatile uint64_t x = 0;
        while (!stop.load(std::memory_order_relaxed)) x = x + 1;
      });
    }
    char label[64];
    std::snprintf(label, sizeof(label), "%u busy thread(s), sleep+spin", busy);
    print(label, Measure(n, true));
    std::snprintf(label, sizeof(label), "%u busy thread(s), nanosleep", busy);
    print(label, Measure(n, false));
    stop.store(true);
    for (auto& t : hogs) t.join();
  }
  return 0;
}
