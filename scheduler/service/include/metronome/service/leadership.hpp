// metronome-scheduler as one of several replicas (--leader-elect): a standby until it holds the
// Lease (kube/leader_election.hpp), serving /healthz but not planning; then the leader: it reads
// the plan the last leader left in the LinkSchedules' status, so that the jobs that register
// again keep their slots, and starts the Kubernetes side and the service. A leader that cannot
// renew the Lease ends the process (exit 1, as kube-scheduler does; Kubernetes restarts it as a
// standby): two replicas never plan at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <thread>

#include "metronome/kube/config.hpp"
#include "metronome/kube/leader_election.hpp"
#include "metronome/service/kubernetes.hpp"
#include "metronome/service/service.hpp"

namespace metronome::service {

// How long a new leader keeps the last plan for jobs that have not registered again.
inline constexpr int64_t kInheritPlanMs = 60'000;

class Leadership {
 public:
  // `kube` is started when this replica leads and kubernetes.enabled is set.
  Leadership(Service& service, KubernetesSync& kube, kube::ClientConfig api,
             kube::LeaderElectionConfig election);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Starts the service as a standby and the election thread.
  void Start();
  // Stops the election thread (a leader stays the Lease's holder until Resign or expiry).
  void Stop();
  // A leader empties the Lease so that a standby takes over at its next retry instead of after
  // the lease duration. Call after Stop() and after the service has stopped.
  void Resign();

 private:
  void Run(const std::stop_token& stop);
  void TakeOver();

  Service& service_;
  KubernetesSync& kube_;
  kube::ClientConfig api_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::LeaderElector> elector_;
  std::atomic<bool> leading_{false};
  std::jthread thread_;
};

}  // namespace metronome::service
