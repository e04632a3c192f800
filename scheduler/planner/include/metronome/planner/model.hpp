// The traffic model (docs/planner.md): jobs whose iterations are a compute phase followed by a
// communication phase, on links they share.
//
// Units: time is integer nanoseconds (Nanos), bandwidth is bytes per second (double).
//
// On each link a job's communication phase is a rectangle: width in time (the window w = c, the
// communication time at bandwidth β) and height in bandwidth (β, at most the link's capacity).
// Rectangles of different jobs may stack as long as their heights sum to at most the capacity;
// a job that saturates the link (β = B) needs the link to itself.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "metronome/planner/topology.hpp"

namespace metronome::planner {

using Nanos = std::int64_t;
using JobId = std::uint64_t;

// What a job does when it runs alone.
struct JobProfile {
  Nanos period_ns = 0;    // P: natural period, compute + communication, alone
  Nanos comm_ns = 0;      // c: communication phase on the wire, at bandwidth beta
  double beta_bps = 0.0;  // β: the bandwidth the job can use (its NIC, its own pace)
  // σ: standard deviation of the compute phase from one iteration to the next (0: unknown).
  // It sets the job's minimum cushion and the headroom of its period (PlannerOptions).
  Nanos jitter_ns = 0;

  // From the communication volume per link V (bytes) and β: c = V / β, P = compute + c.
  static JobProfile FromVolume(Nanos compute_ns, double volume_bytes, double beta_bps);
  [[nodiscard]] double DutyCycle() const;  // d = c / P
};

// Job::next_phase_ns when the caller does not know when the job's next phase starts.
inline constexpr Nanos kUnknownPhase = std::numeric_limits<Nanos>::min();

struct Job {
  JobId id = 0;
  int priority = 0;                 // higher = more important
  std::vector<NodeId> nodes;        // nodes of its ranks (duplicates allowed)
  std::vector<LinkId> extra_links;  // explicit links crossed besides those the nodes imply
  JobProfile profile;
  // When the job's next communication phase is expected to start, in the plan's frame (ns
  // after the epoch), for a job that runs but is not gated yet. A hint used once, when the job
  // is added: its window opens there if that place is free, else at the free place reached
  // with the least delay after it, so that its first gated phase hardly waits (docs/planner.md,
  // stage 2: the one-time delay of moving a running job). The planner forgets it afterwards.
  Nanos next_phase_ns = kUnknownPhase;
};

// The planner's input. Job order is irrelevant to the result except as a last tie-break.
struct Problem {
  Topology topology;
  std::vector<Job> jobs;
};

// The links a job crosses: topology.links_crossed(nodes) ∪ extra_links, sorted, unique.
[[nodiscard]] std::vector<LinkId> JobLinks(const Topology& topology, const Job& job);

// Jobs connected by the links they cross (two jobs on one link, and so on), given each job's
// links: each job's group, numbered from 0 in the order the groups first appear. Jobs of
// different groups never meet on a link, so no placement in one moves a job of another.
[[nodiscard]] std::vector<std::size_t> LinkGroups(const std::vector<std::vector<LinkId>>& links);

// A period rounded up to a grid: multiples of the largest power of ten (in ns) that is at most
// both `grid` and period/100, so that the rounding never costs more than 1 % of the period.
// Periods measured to the nanosecond are almost never commensurate, and the planner interleaves
// periods by their gcd: the daemon rounds measured periods with this (grid 1 ms).
[[nodiscard]] Nanos RoundUpPeriod(Nanos period, Nanos grid);

// π_j, the weight of a priority in stages 2 and 3: 1 + max(priority, 0).
[[nodiscard]] double PriorityWeight(int priority);

// Checks a problem for inputs the planner cannot use (P ≤ 0, c < 0, c > P, β ≤ 0, jitter
// outside [0, P], unknown node or link, duplicate job id). Returns one message per defect; empty
// means usable.
[[nodiscard]] std::vector<std::string> Validate(const Problem& problem);
// The same checks for one job (all but the duplicate id), appended to `errors`.
void ValidateJob(const Topology& topology, const Job& job, std::vector<std::string>& errors);

}  // namespace metronome::planner
