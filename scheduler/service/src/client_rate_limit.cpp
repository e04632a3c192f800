#include "client_rate_limit.hpp"

#include <algorithm>

namespace metronome::service {

double ClientRateLimit::Refilled(const Bucket& b, Clock::time_point now) const {
  const double idle = std::chrono::duration<double>(now - b.last).count();
  return std::min(burst_, b.tokens + std::max(idle, 0.0) * rate_);
}

bool ClientRateLimit::Allow(const std::string& client, Clock::time_point now) {
  const std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxClients) {
      std::erase_if(buckets_, [&](const auto& e) { return Refilled(e.second, now) >= burst_; });
      if (buckets_.size() >= kMaxClients) buckets_.clear();
    }
    it = buckets_.emplace(client, Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  b.tokens = Refilled(b, now);
  b.last = now;
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

}  // namespace metronome::service
