#include "host_gate.hpp"

#include <ctime>

#include "metronome/common/clock.hpp"

namespace metronome::shim {

int64_t SleepUntilRealtime(int64_t target_ns, int64_t spin_lead_ns) noexcept {
  int64_t now = RealtimeNs();
  if (now >= target_ns) return now;
  // The wait's length is taken now and kept on CLOCK_MONOTONIC: a step of CLOCK_REALTIME while
  // it lasts (NTP stepping the clock back, a restored VM) must not stretch it. It ends when the
  // realtime target is reached or that length has passed, whichever comes first.
  const int64_t end_mono = SaturatingAdd(MonotonicNs(), target_ns - now);
  const int64_t sleep_until = end_mono - spin_lead_ns;
  if (sleep_until > MonotonicNs()) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(sleep_until / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(sleep_until % 1'000'000'000);
    // EINTR: fall through to the spin, which re-checks the clocks.
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    now = RealtimeNs();
  }
  while (now < target_ns && MonotonicNs() < end_mono) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    now = RealtimeNs();
  }
  return now;
}

GateDecision DecideHostGate(const Timetable& tt, int64_t now_local_ns,
                            int64_t server_minus_local_ns, int64_t max_wait_cap_ns,
                            bool realign) noexcept {
  return DecideHostGate(tt, YieldRequest{}, now_local_ns, server_minus_local_ns, max_wait_cap_ns,
                        realign);
}

GateDecision DecideHostGate(const Timetable& tt, const YieldRequest& y, int64_t now_local_ns,
                            int64_t server_minus_local_ns, int64_t max_wait_cap_ns,
                            bool realign) noexcept {
  const int64_t now_server = SaturatingAdd(now_local_ns, server_minus_local_ns);
  const YieldSet& set = y.yields != nullptr ? *y.yields : kNoYields;
  GateDecision d =
      y.phase_start ? DecideRankedGate(tt, set, now_server, max_wait_cap_ns, realign, y.need_ns,
                                       y.cursor, y.rest_ns)
                    : DecideYield(set, now_server, y.need_ns, max_wait_cap_ns, y.cursor, y.rest_ns);
  d.until_ns = d.action == GateAction::kWaitUntil ? SaturatingSub(d.until_ns, server_minus_local_ns)
                                                  : now_local_ns;
  return d;
}

HostGateOutcome HostGate(const Timetable& tt, int64_t now_local_ns, int64_t server_minus_local_ns,
                         int64_t max_wait_cap_ns, bool may_block, bool realign) noexcept {
  return HostGate(tt, YieldRequest{}, now_local_ns, server_minus_local_ns, max_wait_cap_ns,
                  may_block, realign);
}

HostGateOutcome HostGate(const Timetable& tt, const YieldRequest& y, int64_t now_local_ns,
                         int64_t server_minus_local_ns, int64_t max_wait_cap_ns, bool may_block,
                         bool realign) noexcept {
  HostGateOutcome out;
  const GateDecision d =
      DecideHostGate(tt, y, now_local_ns, server_minus_local_ns, max_wait_cap_ns, realign);
  out.action = d.action;
  out.lateness_ns = d.lateness_ns;
  out.realigned = d.realigned;
  out.yielded = d.yielded;
  if (d.action == GateAction::kWaitUntil && may_block) {
    // The decision bounded the wait by max_wait; bound it again against clock steps.
    int64_t target = d.until_ns;
    const int64_t limit = SaturatingAdd(now_local_ns, max_wait_cap_ns);
    if (target > limit) target = limit;
    const int64_t released = SleepUntilRealtime(target);
    out.waited_ns = released - now_local_ns;
  }
  return out;
}

}  // namespace metronome::shim
