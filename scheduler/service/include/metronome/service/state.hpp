// The registry: what the scheduler knows about clients (ZeroMQ peers), jobs and their ranks.
// Plain data, guarded by the service's lock; the controller's rules
// (metronome/controller/rules.hpp) read and update the jobs' fields.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "metronome/controller/job_state.hpp"

namespace metronome::service {

// The registry's jobs and ranks are the controller's (metronome/controller/job_state.hpp).
using controller::JobState;
using controller::MeasuredPhase;
using controller::RankState;

// A ZeroMQ peer (one DEALER, i.e. one shim process). It may register several (job, rank).
struct ClientState {
  std::string identity;
  int64_t first_seen_ns = 0;
  int64_t last_seen_ns = 0;
  uint64_t messages = 0;
  uint64_t rejected = 0;
  std::set<std::pair<std::string, uint32_t>> members;  // (job, rank) registered by this client
};

}  // namespace metronome::service
