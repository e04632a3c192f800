// TurnStore: whom a job takes turns with and the edges relayed of their phases (common's
// TurnSet), written by the background thread and read by the gate on the caller's path without
// a lock: the same sequence lock as TimetableStore (a reader retries while a write is under way
// or happened meanwhile, and goes on without turns when it keeps finding one).
#pragma once

#include <atomic>
#include <cstdint>

#include "metronome/common/turn.hpp"

namespace metronome::shim {

class TurnStore {
 public:
  // Single writer; `s` passed ValidateTurnSet (count 0: no turns).
  void Publish(const TurnSet& s) noexcept {
    const uint32_t seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    const uint32_t n = s.count < kMaxTurnPartners ? s.count : kMaxTurnPartners;
    f_[0].store(s.wire_ns, std::memory_order_relaxed);
    f_[1].store(s.period_ns, std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) {
      const TurnPartner& p = s.partners[i];
      std::atomic<int64_t>* f = &f_[kHeader + kPartnerFields * i];
      f[0].store(static_cast<int64_t>(p.job), std::memory_order_relaxed);
      f[1].store(p.higher ? 1 : 0, std::memory_order_relaxed);
      f[2].store(p.wire_ns, std::memory_order_relaxed);
      f[3].store(p.compute_ns, std::memory_order_relaxed);
      f[4].store(p.begun_ns, std::memory_order_relaxed);
      f[5].store(p.ended_ns, std::memory_order_relaxed);
    }
    count_.store(n, std::memory_order_relaxed);
    seq_.store(seq + 2, std::memory_order_release);
  }

  void Clear() noexcept { Publish(TurnSet{}); }

  // One relaxed load: whether the job has partners at all (a stale answer costs one read or one
  // missed turn, never a wrong hold).
  bool MayTakeTurns() const noexcept { return count_.load(std::memory_order_relaxed) != 0; }

  // Any number of readers. False when a writer kept it busy for all the retries.
  bool Read(TurnSet& out) const noexcept {
    for (int attempt = 0; attempt < 16; ++attempt) {
      const uint32_t s1 = seq_.load(std::memory_order_acquire);
      if (s1 & 1u) continue;
      const uint32_t n = count_.load(std::memory_order_relaxed);
      out.count = n < kMaxTurnPartners ? n : kMaxTurnPartners;
      out.wire_ns = f_[0].load(std::memory_order_relaxed);
      out.period_ns = f_[1].load(std::memory_order_relaxed);
      for (uint32_t i = 0; i < out.count; ++i) {
        TurnPartner& p = out.partners[i];
        const std::atomic<int64_t>* f = &f_[kHeader + kPartnerFields * i];
        p.job = static_cast<uint64_t>(f[0].load(std::memory_order_relaxed));
        p.higher = f[1].load(std::memory_order_relaxed) != 0;
        p.wire_ns = f[2].load(std::memory_order_relaxed);
        p.compute_ns = f[3].load(std::memory_order_relaxed);
        p.begun_ns = f[4].load(std::memory_order_relaxed);
        p.ended_ns = f[5].load(std::memory_order_relaxed);
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1) return true;
    }
    return false;
  }

 private:
  static constexpr uint32_t kHeader = 2;         // wire, period
  static constexpr uint32_t kPartnerFields = 6;  // job, higher, wire, compute, begun, ended
  std::atomic<uint32_t> seq_{0};
  std::atomic<uint32_t> count_{0};
  std::atomic<int64_t> f_[kHeader + kPartnerFields * kMaxTurnPartners] = {};
};

}  // namespace metronome::shim
