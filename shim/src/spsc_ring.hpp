// A bounded lock-free ring for one producer (the thread calling NCCL on a communicator; NCCL
// forbids using one communicator from two threads at once) and one consumer (the background
// thread). Push never blocks and never allocates: when the ring is full the event is dropped and
// counted.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace metronome::shim {

template <class T, size_t N>
class SpscRing {
  static_assert((N & (N - 1)) == 0, "N must be a power of two");

 public:
  bool Push(const T& v) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    if (head - tail >= N) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    items_[head & (N - 1)] = v;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  bool Pop(T& out) noexcept {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    if (tail == head) return false;
    out = items_[tail & (N - 1)];
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  uint64_t Dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) std::atomic<uint64_t> dropped_{0};
  std::array<T, N> items_{};
};

}  // namespace metronome::shim
