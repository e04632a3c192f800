// NTP-style estimate of the offset between a client's clock and the scheduler's.
//
// One exchange gives four timestamps: t1 client sends ping, t2 server receives it, t3 server sends
// the pong, t4 client receives it (t1, t4 client clock; t2, t3 server clock). Then
//   offset = ((t2 - t1) + (t3 - t4)) / 2      (server clock - client clock)
//   delay  = (t4 - t1) - (t3 - t2)            (round trip spent on the wire)
// and the true offset lies within offset ± delay / 2 whatever the asymmetry of the two directions.
// A queueing delay inflates one direction and biases the offset, so the estimate keeps the sample
// with the smallest delay among the last `window` samples (Mills' clock filter, simplified).
//
// Every sample's interval holds the true offset, so a new sample whose interval misses the one in
// use (allowing for the clocks' drift since) means a clock stepped: the old samples are dropped at
// once instead of ageing out of the window, which at one ping every two seconds takes half a
// minute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace metronome {

struct ClockSample {
  int64_t t1 = 0;  // client send (client clock)
  int64_t t2 = 0;  // server receive (server clock)
  int64_t t3 = 0;  // server send (server clock)
  int64_t t4 = 0;  // client receive (client clock)

  int64_t Offset() const { return ((t2 - t1) + (t3 - t4)) / 2; }
  int64_t Delay() const { return (t4 - t1) - (t3 - t2); }
};

class ClockSync {
 public:
  explicit ClockSync(size_t window = 16);

  // Drift allowed between the two clocks when two samples are compared: a free-running
  // oscillator's worst (±100 ppm each side) plus a slewing NTP's. A step smaller than this
  // times the samples' distance apart (plus kStepSlackNs) ages out of the window instead.
  static constexpr int64_t kDriftPpm = 500;
  static constexpr int64_t kStepSlackNs = 1'000'000;

  // Adds one exchange. Returns false (and ignores it) when its timestamps are inconsistent:
  // the client saw the pong before the ping left, or the server replied before it received.
  // A sample that contradicts the estimate in use (a clock stepped) replaces every sample.
  bool AddSample(const ClockSample& s);

  bool HasEstimate() const { return best_ < samples_.size(); }
  int64_t OffsetNs() const;  // server - client; 0 without an estimate
  int64_t DelayNs() const;   // round trip of the sample in use; -1 without an estimate
  int64_t ErrorBoundNs() const { return HasEstimate() ? DelayNs() / 2 + 1 : -1; }
  size_t Rejected() const { return rejected_; }
  size_t Steps() const { return steps_; }  // samples that contradicted the estimate

  int64_t ToServer(int64_t client_ns) const { return client_ns + OffsetNs(); }
  int64_t ToClient(int64_t server_ns) const { return server_ns - OffsetNs(); }

  void Reset();

 private:
  void PickBest();
  bool Contradicts(const ClockSample& s) const;

  size_t window_;
  std::vector<ClockSample> samples_;  // ring buffer of the last `window_` accepted samples
  size_t next_ = 0;                   // where the next sample goes
  size_t best_ = SIZE_MAX;            // index of the minimum-delay sample, or SIZE_MAX
  size_t rejected_ = 0;
  size_t steps_ = 0;
};

// How long a client waits before its next clock ping: 200 ms until `answered` pings have settled
// the estimate (kSettlingPings), then every 2 s, or more often where the silence bound is short,
// so that at least two pongs fall in every silence bound (the pongs are what the scheduler says
// regularly; a client that hears nothing for `silence_ns` fails open).
inline constexpr uint64_t kSettlingPings = 8;
inline constexpr int64_t kDefaultSilenceNs = 5'000'000'000;  // the shim's METRONOME_FAILOPEN_MS
int64_t ClockPingIntervalNs(uint64_t answered, int64_t silence_ns);

}  // namespace metronome
