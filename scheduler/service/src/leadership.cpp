#include "metronome/service/leadership.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <utility>

#include "metronome/kube/client.hpp"

namespace metronome::service {

namespace {

// Ends the process at once: whatever the reason, a replica that may no longer lead must stop
// pushing timetables now, not after an orderly shutdown.
[[noreturn]] void Abdicate(const char* why) {
  spdlog::critical("leader election: {}: exiting so that another replica leads", why);
  spdlog::default_logger()->flush();
  std::_Exit(1);
}

}  // namespace

Leadership::Leadership(Service& service, KubernetesSync& kube, kube::ClientConfig api,
                       kube::LeaderElectionConfig election)
    : service_(service), kube_(kube), api_(std::move(api)) {
  // The election's own connection, one attempt per request (the elector retries every retry
  // period itself). A renewal that hangs may overrun the renew deadline by one attempt: a GET
  // and a PATCH, each up to its connect and read timeouts (a request's body is small), so four
  // request timeouts. A quarter of the margin between the deadline and the lease duration keeps
  // the leader's exit before a standby may take over (with the defaults, 500 ms a request).
  kube::ClientConfig c = api_;
  c.request_timeout = std::max((election.lease_duration - election.renew_deadline) / 4,
                               std::chrono::milliseconds(100));
  c.connect_timeout = std::min(c.connect_timeout, c.request_timeout);
  c.max_attempts = 1;
  client_ = std::make_unique<kube::Client>(std::move(c));
  elector_ = std::make_unique<kube::LeaderElector>(*client_, std::move(election));
}

Leadership::~Leadership() {
  Stop();
}

void Leadership::Start() {
  service_.StartStandby();
  const auto& e = elector_->Config();
  spdlog::info(
      "leader election: {} standing by for lease {}/{} (duration {} ms, renew deadline {} ms, "
      "retry {} ms)",
      e.identity, e.namespace_name, e.name, e.lease_duration.count(), e.renew_deadline.count(),
      e.retry_period.count());
  thread_ = std::jthread([this](const std::stop_token& stop) {
    pthread_setname_np(pthread_self(), "mtr-election");
    Run(stop);
  });
}

void Leadership::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void Leadership::Resign() {
  if (!leading_.exchange(false)) return;
  const auto released = elector_->Release();
  if (released) {
    spdlog::info("leader election: lease released");
  } else {
    spdlog::warn("leader election: releasing the lease: {}", released.GetError().ToString());
  }
}

void Leadership::Run(const std::stop_token& stop) {
  if (!elector_->Acquire(stop)) return;
  leading_ = true;
  spdlog::info("leader election: {} leads", elector_->Config().identity);
  try {
    TakeOver();
  } catch (const std::exception& e) {
    spdlog::critical("leader election: starting as the leader: {}", e.what());
    Abdicate("cannot lead");
  }
  if (!elector_->Renew(stop)) Abdicate("leadership lost");
}

void Leadership::TakeOver() {
  if (service_.Config().kubernetes.enabled) {
    size_t skipped = 0;
    auto plan = ReadLastPlan(*client_, &skipped);
    if (plan) {
      spdlog::info(
          "leader election: the last plan has {} gated job(s){}; they keep their slots when they "
          "register within {} s",
          plan->size(), skipped != 0 ? " (" + std::to_string(skipped) + " unusable entries)" : "",
          kInheritPlanMs / 1000);
      service_.InheritPlan(std::move(plan).Value(), kInheritPlanMs);
    } else {
      spdlog::warn("leader election: cannot read the last plan ({}); planning afresh",
                   plan.GetError().ToString());
    }
  }
  // Reading the last plan may take a while on a large cluster and renews nothing: a replica past
  // its renew deadline may have lost the Lease meanwhile, so it never writes or plans.
  if (!elector_->WithinRenewDeadline()) Abdicate("the lease may have expired while taking over");
  if (service_.Config().kubernetes.enabled) kube_.Start(api_);
  service_.Start();
}

}  // namespace metronome::service
