// The shim's waits under a step of the wall clock. This test program's own clock_gettime adds a
// shift to CLOCK_REALTIME while a test sets one (the monotonic clocks are left alone, as a real
// step leaves them); everything else in the program reads the clock unshifted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "host_gate.hpp"
#include "metronome/common/clock.hpp"
#include "realtime_shift.hpp"

namespace metronome::shim {
namespace {

// NTP steps a node's clock back by ten seconds while a collective is held for its window 20 ms
// away: the hold ends after its 20 ms, not ten seconds later.
TEST(ClockStep, AStepBackDuringAWaitDoesNotStretchIt) {
  const int64_t start = MonotonicNs();
  std::thread ntp([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    realtime_shift_ns.store(-10'000'000'000);
  });
  SleepUntilRealtime(RealtimeNs() + 20 * kMs);
  const int64_t held = MonotonicNs() - start;
  ntp.join();
  realtime_shift_ns.store(0);
  EXPECT_GE(held, 19 * kMs);
  EXPECT_LT(held, 1'000 * kMs) << "held for the step";
}

// A step forward ends the wait when the wall clock passes the target, as before.
TEST(ClockStep, AStepForwardEndsAWaitEarly) {
  const int64_t start = MonotonicNs();
  const int64_t target = RealtimeNs() + 200 * kMs;
  realtime_shift_ns.store(10'000'000'000);
  const int64_t released = SleepUntilRealtime(target);
  const int64_t held = MonotonicNs() - start;
  realtime_shift_ns.store(0);
  EXPECT_GE(released, target);
  EXPECT_LT(held, 100 * kMs);
}

}  // namespace
}  // namespace metronome::shim
