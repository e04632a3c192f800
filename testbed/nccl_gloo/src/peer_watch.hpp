// Fails the operations stuck on a dead peer. When a TCP pair of Gloo (the 2022 version Debian
// ships) sees its connection reset or closed, it fails the operations still queued on it but not
// the one it was in the middle of reading or writing: that one's waiter sleeps until the
// operation timeout (300 s by default), although the peer is known to be gone. While an
// operation is in flight, a PeerWatch looks at every pair of the context a few times a second and
// fails such stuck operations with the pair's own error. It never acts on time alone, so long
// legitimate waits (a peer that is slow to join a collective) are left alone.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace standin {

class PeerWatch {
 public:
  static constexpr std::chrono::milliseconds kPeriod{100};

  PeerWatch() = default;
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Marks an operation on `context` in flight for the guard's lifetime.
  class Busy {
   public:
    Busy(PeerWatch& watch, const std::shared_ptr<gloo::Context>& context);
    ~Busy();
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    PeerWatch& watch_;
    const bool active_;
  };

  // Ends the watching thread (no Busy may be alive).
  void stop() noexcept;

  // Fails the operations stuck on the failed pairs of `context`; returns how many it woke.
  static int wakeStuckOperations(gloo::Context& context) noexcept;

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<gloo::Context> context_;  // while busy_ > 0
  int busy_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // started by the first Busy
};

}  // namespace standin
