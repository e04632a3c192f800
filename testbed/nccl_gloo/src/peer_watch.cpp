#include "peer_watch.hpp"

#include <gloo/transport/tcp/pair.h>
#include <gloo/transport/tcp/unbound_buffer.h>

#include <exception>
#include <vector>

namespace standin {
namespace {

namespace tcp = gloo::transport::tcp;

// Gloo keeps the state needed here protected. A class derived from the Gloo class may name a
// protected member to form a pointer to it (&Derived::member has type T Base::*), which is then
// applied to the Gloo object itself. These classes are never instantiated.
struct PairAccess : tcp::Pair {
  // The pair's error (set once its socket failed) and the unbound buffers of the operation it was
  // reading and of those it was writing; under the pair's lock, as Gloo itself does.
  static std::exception_ptr stuckBuffers(tcp::Pair& pair,
                                         std::vector<gloo::NonOwningPtr<tcp::UnboundBuffer>>& out) {
    std::lock_guard<std::mutex> lock(pair.*(&PairAccess::m_));
    std::exception_ptr error = pair.*(&PairAccess::ex_);
    if (!error) return nullptr;
    const tcp::Op& rx = pair.*(&PairAccess::rx_);
    gloo::NonOwningPtr<tcp::UnboundBuffer> reading(rx.ubuf);
    if (reading) out.push_back(std::move(reading));
    for (const tcp::Op& op : pair.*(&PairAccess::tx_)) {
      gloo::NonOwningPtr<tcp::UnboundBuffer> writing(op.ubuf);
      if (writing) out.push_back(std::move(writing));
    }
    return error;
  }
};

struct UnboundBufferAccess : tcp::UnboundBuffer {
  static void fail(tcp::UnboundBuffer& buffer, const std::exception_ptr& error) {
    (buffer.*(&UnboundBufferAccess::signalException))(error);
  }
};

}  // namespace

int PeerWatch::wakeStuckOperations(gloo::Context& context) noexcept {
  int woken = 0;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    try {
      auto* pair = dynamic_cast<tcp::Pair*>(context.getPair(peer).get());
      if (pair == nullptr) continue;
      std::vector<gloo::NonOwningPtr<tcp::UnboundBuffer>> stuck;
      const std::exception_ptr error = PairAccess::stuckBuffers(*pair, stuck);
      if (!error) continue;
      for (auto& buffer : stuck) {
        UnboundBufferAccess::fail(*buffer.operator->(), error);
        ++woken;
      }
    } catch (...) {
      // A pair that cannot be looked at is left to the operation timeout.
    }
  }
  return woken;
}

PeerWatch::~PeerWatch() {
  stop();
}

void PeerWatch::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

PeerWatch::Busy::Busy(PeerWatch& watch, const std::shared_ptr<gloo::Context>& context)
    : watch_(watch), active_(context && context->size > 1) {
  if (!active_) return;  // nobody to watch
  std::lock_guard<std::mutex> lock(watch_.mu_);
  if (watch_.busy_++ == 0) watch_.context_ = context;
  if (!watch_.thread_.joinable()) {
    try {
      PeerWatch* owner = &watch_;
      watch_.thread_ = std::thread([owner] { owner->loop(); });
    } catch (...) {
      // Without the thread, a dead peer is noticed at the operation timeout.
    }
  }
  watch_.cv_.notify_all();
}

PeerWatch::Busy::~Busy() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(watch_.mu_);
  if (--watch_.busy_ == 0) watch_.context_.reset();
}

void PeerWatch::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (busy_ == 0) {
      cv_.wait(lock, [&] { return stopping_ || busy_ > 0; });
      continue;
    }
    cv_.wait_for(lock, kPeriod, [&] { return stopping_; });
    if (stopping_ || !context_) continue;
    std::shared_ptr<gloo::Context> context = context_;
    lock.unlock();
    wakeStuckOperations(*context);
    context.reset();
    lock.lock();
  }
}

}  // namespace standin
