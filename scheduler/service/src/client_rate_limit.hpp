// A token bucket per client address for the HTTP server: `per_second` requests a second, in
// bursts of up to twice that. The table is bounded: past kMaxClients addresses, buckets that
// have refilled (idle clients) are dropped, and if that is not enough, all of them (a flood from
// that many addresses is not what a per-client limit can stop).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace metronome::service {

class ClientRateLimit {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxClients = 4096;

  // The bucket holds at least one request: a rate under 0.5 a second still lets one through.
  explicit ClientRateLimit(double per_second)
      : rate_(per_second), burst_(std::max(2 * per_second, 1.0)) {}

  double PerSecond() const { return rate_; }
  // Whether `client` may make a request at `now` (and takes the token if so).
  bool Allow(const std::string& client, Clock::time_point now);

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point last;
  };
  double Refilled(const Bucket& b, Clock::time_point now) const;

  const double rate_;
  const double burst_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace metronome::service
