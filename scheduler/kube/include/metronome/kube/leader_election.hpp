// Leader election on a coordination.k8s.io/v1 Lease, with the semantics of kube-scheduler's
// (client-go's leaderelection): a candidate takes the Lease when it is free, or when its record
// has not changed for a lease duration as measured on the candidate's own monotonic clock (so
// clock skew between replicas does not matter); the leader renews it every retry period, and
// gives up leadership when it has not renewed for a renew deadline (shorter than the lease
// duration, so that it stops before anyone else may start). Every write carries the
// resourceVersion it read: of two candidates racing for the same record one gets 409 Conflict.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "metronome/kube/client.hpp"
#include "metronome/kube/result.hpp"

namespace metronome::kube {

struct LeaderElectionConfig {
  std::string namespace_name = "default";
  std::string name = "metronome-scheduler";  // the Lease's name
  std::string identity;                      // this replica (its pod name); never empty
  // A standby takes over at most lease_duration + retry_period after the leader's last renewal.
  std::chrono::milliseconds lease_duration{6'000};
  std::chrono::milliseconds renew_deadline{4'000};
  std::chrono::milliseconds retry_period{1'000};
};

// "" when the three durations are consistent (lease > renew deadline > retry period > 0, the
// lease at least a second: the Lease holds whole seconds), else what is wrong.
std::string CheckLeaderElection(const LeaderElectionConfig& config);

// The Lease's time format (metav1.MicroTime): RFC 3339 in UTC with microseconds.
std::string MicroTime(std::chrono::system_clock::time_point t);

class LeaderElector {
 public:
  // `client` should make one attempt per request, with a timeout below half of lease duration −
  // renew deadline: a renewal that hangs delays the leader's giving up by that much.
  LeaderElector(Client& client, LeaderElectionConfig config);

  // One attempt: reads the Lease and writes this replica into it when it holds it already, when
  // the Lease is free, or when its holder let it expire. True when this replica holds it now.
  Result<bool> TryAcquireOrRenew();
  // Tries every retry period until this replica holds the Lease (true) or `stop` (false).
  bool Acquire(const std::stop_token& stop);
  // Renews every retry period. Returns true when `stop` was requested while still leading, and
  // false when leadership was lost: no successful renewal for the renew deadline, or another
  // holder in the record.
  bool Renew(const std::stop_token& stop);
  // Whether this replica's last successful write of the Lease was sent less than a renew
  // deadline ago: until then no other candidate can have taken it (it waits a lease duration
  // from when it saw that write).
  bool WithinRenewDeadline() const;
  // On a clean stop: empties the holder so that a standby takes over at its next retry instead
  // of waiting out the lease.
  Status Release();

  const LeaderElectionConfig& Config() const { return config_; }

 private:
  // Creates the Lease (`existing` false) or merge-patches it; true when this replica holds it.
  Result<bool> Write(const nlohmann::json& body, bool existing);

  Client& client_;
  LeaderElectionConfig config_;
  nlohmann::json observed_spec_;  // the Lease's spec as last read or written
  std::chrono::steady_clock::time_point observed_at_{};
  std::chrono::steady_clock::time_point renewed_at_{};  // when our last write was sent
};

}  // namespace metronome::kube
