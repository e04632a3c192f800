// Who yields to whom on a shared link (common/yield.hpp): the windows each job's phases must not
// start into, whatever the periods.
//
// On every link the jobs are ranked by priority. A job yields to the windows of the gated jobs
// of higher priority on any link they share where its traffic would slow theirs materially
// (slows_materially). Jobs of one priority do not yield to each other: the plan keeps gated
// ones apart, and an ungated one made to wait for its peers' windows lost more than they
// gained (model pairs, docs/decisions/0004). Its set holds at most
// kMaxYieldWindows of them, the highest-ranked first (then the longest duty cycle); it needs a
// gap of its own communication time stretched by the traffic it expects to share that gap with
// (1 + the duty cycles of the others there that it does not yield to, on its busiest link),
// waits for one at most its natural period. A phase that would end a little into a window
// finishes instead of pausing for it (YieldSet::allowance_ns): the jobs ranked below a window
// on a link share a fifth of its length (PlannerOptions::yield_allowance) as how far past its
// opening each may end (load sweep, docs/decisions/0022).
#pragma once

#include <memory>
#include <vector>

#include "metronome/common/yield.hpp"
#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner {

// Whether a job of priority a ranks above one of priority b on a link they share.
[[nodiscard]] bool RanksAbove(int a_priority, int b_priority);

// Whether traffic at b_rate beside a's at a_rate (each at most the link's capacity) would take
// more than a quarter of a's rate: only then does the lower-ranked one yield (a 25 Gbit/s job
// beside a 100 Gbit/s one on a 100 Gbit/s link shares; waiting a whole window would cost it
// far more than it takes).
[[nodiscard]] bool SlowsMaterially(double a_rate, double b_rate, double capacity);

struct JobYields {
  // The windows it yields to (epoch 0: the plan's frame); null when it yields to none. Shared
  // and never modified: a plan of thousands of jobs carries a pointer per job, not a set.
  std::shared_ptr<const YieldSet> yields;
  // Gated, met by ungated jobs on its links, and every one of them holds its window: nothing
  // the plan does not control starts into it (a phase of it that overran met a yielding
  // transfer's tail, not traffic the window must make room for).
  bool yielded_to = false;
};

// One entry per entry of plan.jobs, in that order (whoever pushes a set sets its epoch).
// `jobs` are the planned jobs (fastest in plan order, as OnlinePlanner lists both; otherwise
// looked up by id); a plan entry without one gets no set. Each window is followed by the part of
// its cushion its job's jitter may take (max(min_cushion_ns, jitter_cushion·σ), at most its late
// slack), and a set tolerates running into a window by the least of those.
[[nodiscard]] std::vector<JobYields> RankedYields(const Topology& topology,
                                                  const std::vector<Job>& jobs, const Plan& plan,
                                                  const PlannerOptions& options);

// What RankedYields computed last time for a plan that changes a little between calls (the
// service's rounds): each job's links, its set and the gated jobs its traffic meets, with what
// they were computed from. For one topology and one set of options.
class RankedYieldsMemo {
 public:
  RankedYieldsMemo();
  ~RankedYieldsMemo();
  RankedYieldsMemo(RankedYieldsMemo&&) noexcept;
  RankedYieldsMemo& operator=(RankedYieldsMemo&&) noexcept;

 private:
  friend std::vector<JobYields> RankedYields(const Topology&, const std::vector<Job>&, const Plan&,
                                             const PlannerOptions&, RankedYieldsMemo&);
  struct State;
  std::unique_ptr<State> state_;
};

// The same as above, judging again only the jobs on a link where a job, its profile or its plan
// entry changed since the memo's last call, or a job came or left.
[[nodiscard]] std::vector<JobYields> RankedYields(const Topology& topology,
                                                  const std::vector<Job>& jobs, const Plan& plan,
                                                  const PlannerOptions& options,
                                                  RankedYieldsMemo& memo);

}  // namespace metronome::planner
