// The adapter between the controller's registry and metronome::planner (see planning.hpp).
#include "metronome/controller/planning.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>

#include "metronome/controller/plan_snapshot.hpp"
#include "metronome/controller/topology.hpp"
#include "metronome/planner/model.hpp"
#include "metronome/planner/offline.hpp"
#include "metronome/planner/plan.hpp"
#include "metronome/planner/planner.hpp"
#include "metronome/planner/ranked_yields.hpp"
#include "metronome/planner/topology.hpp"
#include "metronome/planner/what_if.hpp"

namespace metronome::controller {

namespace pl = metronome::planner;

struct OfflineTask {
  uint64_t generation = 0;
  pl::Problem problem;
  pl::Plan current;
  pl::PlannerOptions options;
};

namespace {

// A job that a previous leader ran gated keeps the window it ran in where its first measurement
// here asks a longer one (the period shorter by the difference): those first reports hold the
// phases of the takeover, when no leader held the gates and the jobs' phases collided, and their
// median gave the wire its full margin (planner_job.cpp's WireMargin). Its period would then
// exceed the one it ran at, and the job lose its slot to a window it will not need.
void KeepInheritedWindow(pl::JobProfile& profile, const Timetable& ran) {
  if (ran.window_ns <= 0 || ran.window_ns >= ran.period_ns || ran.window_ns >= profile.comm_ns) {
    return;
  }
  profile.period_ns -= profile.comm_ns - ran.window_ns;
  profile.comm_ns = ran.window_ns;
}

struct OfflinePlan {
  std::vector<pl::Job> jobs;
  pl::Plan plan;
};

}  // namespace

struct PlanningAdapter::Impl {
  PlanningConfig config;
  pl::PlannerOptions options;
  pl::OnlinePlanner online;
  NodeIndex nodes;
  std::vector<std::string> topology_defects;

  // Where a previous leader ran its jobs (Inherit), by name, until inherited_until.
  std::map<std::string, Timetable> inherited;
  std::chrono::steady_clock::time_point inherited_until{};

  Impl(const TopologyConfig& topo, const PlanningConfig& cfg)
      : config(cfg),
        options(MakeOptions(cfg)),
        online(BuildTopology(topo), options),
        nodes(IndexNodes(online.GetTopology(), topo.unknown_nodes_link)),
        topology_defects(TopologyDefects(online.GetTopology())) {}

  // What is wrong with the topology itself, found once: every job is refused with it (a job's
  // own check must not copy a topology of thousands of nodes).
  static std::vector<std::string> TopologyDefects(const pl::Topology& topology) {
    pl::Problem empty;
    empty.topology = topology;
    return pl::Validate(empty);
  }

  static pl::PlannerOptions MakeOptions(const PlanningConfig& cfg) {
    pl::PlannerOptions o;
    o.max_stretch = cfg.max_stretch;
    o.min_cushion_ns = cfg.min_cushion_us * 1'000;
    o.jitter_cushion = cfg.jitter_cushion;
    o.cushion = cfg.cushion;
    return o;
  }

  pl::Job ToPlanner(const PlanJob& j) const {
    return ToPlannerJob(j, online.GetTopology(), nodes, config);
  }

  // What each planned saturating job's own phases make its window of (before ShareMargin): the
  // margin its copies may share.
  std::unordered_map<uint64_t, WireWindow> wires;
  // Copies: saturating jobs whose wire times differ by at most this, at the same bottleneck.
  static constexpr double kCopyWire = 0.005;

  // Copies of one model on shared links get one window: the least margin that any of them
  // shows. A copy that ran ungated measured phases that collided with the others', and its
  // median shows the collisions, not the transport's overhead; with the full margin its period
  // exceeds the gated copy's and it never fits beside it again (the testbed's normal-priority
  // copy lost its slot so, and stayed ungated). `job` is `j` converted with `own` (Checked);
  // `neighbours` the planned jobs on its links. Records `own` for the copies to come.
  void ShareMargin(const PlanJob& j, const WireWindow& own, const std::vector<pl::Job>& neighbours,
                   pl::Job& job) {
    wires[j.id] = own;
    double least = own.margin;
    for (const pl::Job& n : neighbours) {
      const auto it = wires.find(n.id);
      if (it == wires.end() || it->second.wire_ns <= 0.0 ||
          n.profile.beta_bps != job.profile.beta_bps ||
          std::abs(it->second.wire_ns - own.wire_ns) > kCopyWire * own.wire_ns) {
        continue;
      }
      least = std::min(least, it->second.margin);
    }
    if (least >= own.margin) return;
    PlanningConfig shared = config;
    shared.wire_margin = least;
    job.profile = ToPlannerJob(j, online.GetTopology(), nodes, shared).profile;
  }

  // The plan as evaluated at `generation` (the adapter's count of changes). Evaluating costs
  // more than a small re-plan on a large cluster, so it is done once per change and shared by
  // what needs the running state (a takeover, a widening, moving jobs between adapters) and
  // Summary(), whose snapshot holds it rather than a copy (never modified: the next change
  // evaluates a new one).
  mutable std::shared_ptr<const pl::Plan> evaluated;
  mutable uint64_t evaluated_generation = 0;
  const std::shared_ptr<const pl::Plan>& CurrentShared(uint64_t generation) const {
    if (!evaluated || evaluated_generation != generation) {
      evaluated = std::make_shared<const pl::Plan>(online.Snapshot());
      evaluated_generation = generation;
    }
    return evaluated;
  }
  const pl::Plan& Current(uint64_t generation) const { return *CurrentShared(generation); }
  // Summary()'s ranked yields, judged again only where the plan changed since the last one.
  mutable pl::RankedYieldsMemo yields_memo;

  // Jobs whose periods on shared links are within kPeriodSnap of each other are planned at one
  // period, the largest: interleaving needs harmonic periods, and a job measured 0.2 % slower
  // than a neighbour (compute noise) could otherwise only take twice the neighbour's period.
  static constexpr double kPeriodSnap = 0.01;

  // Raises `job`'s period to the largest period within kPeriodSnap above it among its
  // neighbours. Returns those whose period lies within kPeriodSnap below the result, raised to
  // it: they must be re-planned with it.
  static std::vector<pl::Job> SnapPeriod(pl::Job& job, const std::vector<pl::Job>& neighbours) {
    const auto within = [](pl::Nanos low, pl::Nanos high) {
      return low <= high &&
             static_cast<double>(high) <= static_cast<double>(low) * (1 + kPeriodSnap);
    };
    for (const pl::Job& n : neighbours) {
      if (within(job.profile.period_ns, n.profile.period_ns)) {
        job.profile.period_ns = n.profile.period_ns;
      }
    }
    std::vector<pl::Job> raise;
    for (pl::Job n : neighbours) {
      if (n.profile.period_ns < job.profile.period_ns &&
          within(n.profile.period_ns, job.profile.period_ns)) {
        n.profile.period_ns = job.profile.period_ns;
        raise.push_back(n);
      }
    }
    return raise;
  }

  // Whether a re-plan of `planned` as `now` would give the planner the same job: same nodes,
  // priority, period (on its 1 ms grid), window and rate, and a jitter within 25 % (it sets
  // the cushions and the headroom, in whole percent of the period). A profile that changed
  // only in what the conversion discards (a faster phase of a saturating job, compute noise
  // below the grid) then moves no job: every re-plan is a slot move for the job's neighbours.
  static bool SameInputs(const pl::Job* planned, const pl::Job& now) {
    if (planned == nullptr) return false;
    const auto& a = planned->profile;
    const auto& b = now.profile;
    const auto jitter_close = [](pl::Nanos x, pl::Nanos y) {
      return std::abs(static_cast<double>(x - y)) <= 0.25 * static_cast<double>(std::max(x, y));
    };
    return planned->nodes == now.nodes && planned->extra_links == now.extra_links &&
           planned->priority == now.priority && a.period_ns == b.period_ns &&
           a.comm_ns == b.comm_ns && a.beta_bps == b.beta_bps &&
           jitter_close(a.jitter_ns, b.jitter_ns);
  }

  // Whether `job` has a higher priority than one of its neighbours.
  static bool Outranks(const pl::Job& job, const std::vector<pl::Job>& neighbours) {
    return std::any_of(neighbours.begin(), neighbours.end(),
                       [&](const pl::Job& n) { return n.priority < job.priority; });
  }

  pl::Job Checked(const PlanJob& j, WireWindow* wire = nullptr) const {
    const MeasuredProfile& m = j.profile;
    if (m.period_ns < TimetableLimits{}.min_period_ns || m.comm_ns <= 0 ||
        m.comm_ns > m.period_ns) {
      throw PlanningError(
          "job " + j.name + ": profile needs 0 < comm <= period, period >= 100 us " + "(period " +
          std::to_string(m.period_ns) + " ns, comm " + std::to_string(m.comm_ns) + " ns)");
    }
    pl::Job job = ToPlannerJob(j, online.GetTopology(), nodes, config, wire);
    std::vector<std::string> defects = topology_defects;
    pl::ValidateJob(online.GetTopology(), job, defects);
    if (!defects.empty()) throw PlanningError("job " + j.name + ": " + defects.front());
    return job;
  }
};

// One job of an AddJobs batch, converted.
struct PlanningAdapter::Add {
  pl::Job job;
  bool first = false;  // outranks a planned neighbour: placed before it (add_job_first)
  std::string name;
  bool raised = false;  // a planned neighbour whose period follows a newcomer's
};

PlanningAdapter::PlanningAdapter(const TopologyConfig& topology, const PlanningConfig& config)
    : impl_(std::make_unique<Impl>(topology, config)) {}

PlanningAdapter::~PlanningAdapter() = default;

void PlanningAdapter::Inherit(std::map<std::string, Timetable> timetables,
                              std::chrono::steady_clock::time_point until) {
  impl_->inherited = std::move(timetables);
  impl_->inherited_until = until;
}

// The batch as a whole when it holds jobs a previous leader ran (Inherit): every planned job and
// the batch's in one plan, the inherited ones as running where they ran.
bool PlanningAdapter::PlanInherited(const std::vector<Add>& adds,
                                    std::vector<std::pair<uint64_t, std::string>>& refused) {
  if (impl_->inherited.empty()) return false;
  if (std::chrono::steady_clock::now() > impl_->inherited_until) {
    impl_->inherited.clear();
    return false;
  }
  pl::Plan current = impl_->Current(generation_);
  std::unordered_map<uint64_t, Timetable> ran_in;
  for (const Add& a : adds) {
    const auto it = impl_->inherited.find(a.name);
    if (it == impl_->inherited.end() || current.Find(a.job.id) != nullptr) continue;
    pl::JobPlan ran;
    ran.id = a.job.id;
    ran.timetable = it->second;
    current.jobs.push_back(ran);
    ran_in.emplace(a.job.id, it->second);
    impl_->inherited.erase(it);
  }
  const size_t taken = ran_in.size();
  if (taken == 0) return false;
  std::vector<pl::Job> jobs = impl_->online.Jobs();
  for (const Add& a : adds) {
    pl::Job job = a.job;
    if (const auto ran = ran_in.find(job.id); ran != ran_in.end()) {
      KeepInheritedWindow(job.profile, ran->second);
    }
    const auto same =
        std::find_if(jobs.begin(), jobs.end(), [&](const pl::Job& j) { return j.id == job.id; });
    if (same != jobs.end()) {
      *same = job;
    } else {
      jobs.push_back(job);
    }
  }
  spdlog::info("planner: {} job(s) planned where the previous leader ran them ({} still to come)",
               taken, impl_->inherited.size());
  try {
    // Where the jobs ran, not where their new measurements would place them a little better:
    // a period that a job's first measurement set a millisecond long would otherwise move it
    // as soon as the new leader measured it again.
    impl_->online.PlanAll(jobs, &current, /*keep_running=*/true);
  } catch (const std::invalid_argument& e) {
    for (const Add& a : adds) refused.emplace_back(a.job.id, "job " + a.name + ": " + e.what());
  }
  ++generation_;
  return true;
}

void PlanningAdapter::AddJob(const PlanJob& job) {
  const auto refused = AddJobs({job});
  if (!refused.empty()) throw PlanningError(refused.front().second);
}

std::vector<std::pair<uint64_t, std::string>> PlanningAdapter::AddJobs(
    const std::vector<PlanJob>& batch, const std::function<bool()>& yield,
    std::vector<uint64_t>* deferred) {
  std::vector<std::pair<uint64_t, std::string>> refused;
  std::vector<Add> adds;
  std::map<uint64_t, pl::Job> raised;  // planned neighbours whose period must follow a newcomer's
  for (const auto& j : batch) {
    try {
      WireWindow wire;
      Add a{impl_->Checked(j, &wire), false, j.name};
      std::vector<pl::Job> neighbours;
      const bool saturates = wire.wire_ns > 0.0;
      if (saturates) {
        neighbours = impl_->online.JobsSharingLinks(a.job);
        impl_->ShareMargin(j, wire, neighbours, a.job);
      }
      if (Impl::SameInputs(impl_->online.Find(a.job.id), a.job)) continue;  // nothing to re-plan
      if (!saturates) {
        impl_->wires.erase(j.id);
        neighbours = impl_->online.JobsSharingLinks(a.job);
      }
      for (pl::Job& n : Impl::SnapPeriod(a.job, neighbours)) {
        auto [it, fresh] = raised.emplace(n.id, n);
        if (!fresh) {
          it->second.profile.period_ns =
              std::max(it->second.profile.period_ns, n.profile.period_ns);
        }
      }
      a.first = Impl::Outranks(a.job, neighbours);
      adds.push_back(std::move(a));
    } catch (const PlanningError& e) {
      refused.emplace_back(j.id, e.what());
    }
  }
  // A raised neighbour is placed again at its new period, as a newcomer.
  for (auto& [raised_id, n] : raised) {
    const auto id = raised_id;  // clang 14 cannot capture a structured binding in a lambda
    const bool in_batch =
        std::any_of(adds.begin(), adds.end(), [&](const Add& a) { return a.job.id == id; });
    if (!in_batch) adds.push_back({n, false, "id " + std::to_string(id), true});
  }
  if (PlanInherited(adds, refused)) return refused;
  // Highest priority first, so that a newcomer is never fitted around a lower-priority one
  // from the same batch. Only the jobs on each newcomer's links are re-planned: on a large
  // cluster one join must not cost a plan of every job.
  //
  // Within a priority, the jobs of small groups first (a group: jobs of the batch that share
  // links, and so on), in arrival order: a join beside a burst of joins elsewhere is not placed
  // behind the burst (the service then pushes it with the round's first share, see
  // AddJobs' yield). Groups share no link, so their order changes no job's place.
  std::vector<std::vector<pl::LinkId>> links;
  links.reserve(adds.size());
  for (const Add& a : adds) links.push_back(pl::JobLinks(impl_->online.GetTopology(), a.job));
  const std::vector<size_t> group = pl::LinkGroups(links);
  std::vector<size_t> members(adds.size());  // by group
  for (const size_t g : group) ++members[g];
  std::vector<size_t> order(adds.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (adds[x].job.priority != adds[y].job.priority) {
      return adds[x].job.priority > adds[y].job.priority;
    }
    return members[group[x]] < members[group[y]];
  });
  std::vector<Add> sorted;
  std::vector<size_t> group_size;  // of each sorted add's group
  sorted.reserve(adds.size());
  group_size.reserve(adds.size());
  for (const size_t i : order) {
    sorted.push_back(std::move(adds[i]));
    group_size.push_back(members[group[i]]);
  }
  adds = std::move(sorted);
  size_t placed = 0;
  size_t largest_placed = 0;  // the largest group placed from so far (raised neighbours too)
  bool yielded = false;
  for (size_t k = 0; k < adds.size(); ++k) {
    const Add& a = adds[k];
    // A raised neighbour is placed whatever: it is planned already, and its new period must
    // follow its newcomer's. A round that may yield also ends before a group larger than any it
    // placed: the small groups placed first (lone joins beside a burst) are pushed at once
    // rather than after the burst's share.
    if (!a.raised && deferred != nullptr && yield && placed > 0) {
      yielded = yielded || group_size[k] > largest_placed || yield();
    }
    if (yielded && !a.raised) {
      deferred->push_back(a.job.id);
      continue;
    }
    ++placed;
    largest_placed = std::max(largest_placed, group_size[k]);
    // What the planner is given, after the conversion and the period snapping: the log line
    // that explains a timetable.
    spdlog::info("planner: input job={} P={}ns c={}ns beta={:.0f}B/s sigma={}ns priority={}{}",
                 a.name, a.job.profile.period_ns, a.job.profile.comm_ns, a.job.profile.beta_bps,
                 a.job.profile.jitter_ns, a.job.priority, a.first ? " (placed first)" : "");
    try {
      if (a.first) {
        (void)impl_->online.InsertFirst(a.job);
      } else {
        (void)impl_->online.Insert(a.job);
      }
    } catch (const std::invalid_argument& e) {
      refused.emplace_back(a.job.id, "job " + a.name + ": " + e.what());
    }
  }
  if (!adds.empty()) ++generation_;
  return refused;
}

bool PlanningAdapter::WidenWindow(const PlanJob& job) {
  const std::vector<pl::Job> jobs = impl_->online.Jobs();
  const std::shared_ptr<const pl::Plan> before = impl_->CurrentShared(generation_);  // kept
  AddJob(job);
  const pl::JobPlan* was = before->Find(job.id);
  const pl::JobPlan* now = impl_->Current(generation_).Find(job.id);
  if (was == nullptr || now == nullptr || !pl::WideningStretches(*was, *now)) return true;
  impl_->online.Adopt(jobs, *before);
  ++generation_;
  return false;
}

PlanningAdapter::RoundOutcome PlanningAdapter::PlanRound(const std::vector<PlanJob>& batch,
                                                         const std::vector<PlanJob>& widen,
                                                         const std::function<bool()>& yield) {
  RoundOutcome out;
  try {
    out.refused = AddJobs(batch, yield, &out.deferred);
  } catch (const std::exception& e) {
    for (const auto& a : batch) out.refused.emplace_back(a.id, e.what());
  }
  for (const auto& w : widen) {
    if (!out.deferred.empty() || (!batch.empty() && yield && yield())) {
      out.deferred.push_back(w.id);
      continue;
    }
    try {
      if (!WidenWindow(w)) out.widen_refused.insert(w.id);
    } catch (const std::exception& e) {
      out.refused.emplace_back(w.id, e.what());
    }
  }
  return out;
}

void PlanningAdapter::RemoveJob(uint64_t id) {
  impl_->online.RemoveJob(id);
  impl_->wires.erase(id);
  ++generation_;
}

struct PlanningAdapter::PlannedJobs {
  std::vector<pl::Job> jobs;
  std::vector<pl::JobPlan> entries;
};

std::shared_ptr<const PlanningAdapter::PlannedJobs> PlanningAdapter::Extract(
    const std::vector<uint64_t>& ids) {
  const std::set<uint64_t> out(ids.begin(), ids.end());
  auto moved = std::make_shared<PlannedJobs>();
  std::vector<pl::Job> keep;
  for (pl::Job& j : impl_->online.Jobs()) {
    (out.contains(j.id) ? moved->jobs : keep).push_back(std::move(j));
  }
  if (moved->jobs.empty()) return moved;
  pl::Plan rest = impl_->Current(generation_);
  std::vector<pl::JobPlan> entries;
  for (pl::JobPlan& e : rest.jobs) (out.contains(e.id) ? moved->entries : entries).push_back(e);
  rest.jobs = std::move(entries);
  impl_->online.Adopt(keep, rest);
  ++generation_;
  return moved;
}

std::shared_ptr<const PlanningAdapter::PlannedJobs> PlanningAdapter::Copy() const {
  auto copy = std::make_shared<PlannedJobs>();
  copy->jobs = impl_->online.Jobs();
  copy->entries = impl_->Current(generation_).jobs;
  return copy;
}

void PlanningAdapter::Import(const PlannedJobs& moved) {
  if (moved.jobs.empty()) return;
  std::vector<pl::Job> jobs = impl_->online.Jobs();
  jobs.insert(jobs.end(), moved.jobs.begin(), moved.jobs.end());
  pl::Plan plan = impl_->Current(generation_);
  plan.jobs.insert(plan.jobs.end(), moved.entries.begin(), moved.entries.end());
  try {
    impl_->online.Adopt(jobs, plan);
  } catch (const std::invalid_argument& e) {
    throw PlanningError(e.what());
  }
  ++generation_;
}

bool PlanningAdapter::Contains(uint64_t id) const {
  return impl_->online.Find(id) != nullptr;
}

size_t PlanningAdapter::LinkCount() const {
  return impl_->online.GetTopology().LinkCount();
}

std::vector<std::string> PlanningAdapter::LinkNames() const {
  std::vector<std::string> names;
  const auto& t = impl_->online.GetTopology();
  for (pl::LinkId l = 0; l < t.LinkCount(); ++l) names.push_back(t.GetLink(l).name);
  return names;
}

double PlanningAdapter::LinkCapacity(size_t link) const {
  return impl_->online.GetTopology().GetLink(static_cast<pl::LinkId>(link)).capacity_bps;
}

std::vector<uint32_t> PlanningAdapter::JobLinks(const PlanJob& job) const {
  const auto links = pl::JobLinks(impl_->online.GetTopology(), impl_->ToPlanner(job));
  return {links.begin(), links.end()};
}

PlanSummary PlanningAdapter::Summary() const {
  const pl::Plan& plan = impl_->Current(generation_);
  PlanSummary s;
  s.epoch_ns = impl_->config.epoch_ns + plan.epoch_ns;
  s.utilization = plan.score.utilization;
  s.latency = plan.score.latency;
  s.cushion_ns = plan.score.cushion_ns;
  std::vector<pl::Job> jobs = impl_->online.Jobs();
  const std::vector<pl::JobYields> yields =
      pl::RankedYields(impl_->online.GetTopology(), jobs, plan, impl_->options, impl_->yields_memo);
  s.jobs.reserve(plan.jobs.size());
  s.links.reserve(plan.links.size());
  for (std::size_t i = 0; i < plan.jobs.size(); ++i) {
    const pl::JobPlan& j = plan.jobs[i];
    JobSchedule& js = s.jobs.emplace_back();
    js.id = j.id;
    js.best_effort = j.best_effort;
    js.timetable = j.timetable;
    js.timetable.epoch_ns = s.epoch_ns;
    js.yields = yields[i].yields;
    js.yielded_to = yields[i].yielded_to;
    js.predicted_slowdown = j.predicted_slowdown;
  }
  const auto& t = impl_->online.GetTopology();
  for (const auto& l : plan.links) {
    LinkSchedule ls;
    ls.name = t.GetLink(l.link).name;
    ls.capacity_bytes_per_s = t.GetLink(l.link).capacity_bps;
    ls.hyperperiod_ns = l.hyperperiod_ns;
    ls.served_load = l.served_load;
    ls.min_cushion_ns = l.min_cushion_ns;
    ls.contention = l.contention;
    ls.gated_jobs = l.gated_jobs;
    ls.best_effort_jobs = l.best_effort_jobs;
    s.links.push_back(std::move(ls));
  }
  auto snapshot = std::make_shared<PlanSnapshot>();
  snapshot->jobs = std::move(jobs);
  snapshot->plan = impl_->CurrentShared(generation_);
  s.snapshot = std::move(snapshot);
  return s;
}

std::vector<WhatIfEntry> PlanningAdapter::WhatIf(
    const PlanJob& candidate, const std::map<uint64_t, std::string>& names) const {
  const pl::Job job = impl_->Checked(candidate);
  std::vector<std::vector<pl::NodeId>> candidates{job.nodes};
  pl::WhatIfOptions opt;
  opt.list_affected = true;
  std::vector<pl::WhatIfResult> results;
  try {
    results = pl::WhatIf(impl_->online, job, candidates, opt);
  } catch (const std::invalid_argument& e) {
    throw PlanningError(e.what());
  }
  std::vector<WhatIfEntry> out;
  if (results.empty()) return out;
  const auto& r = results.front();
  WhatIfEntry self;
  self.job = candidate.name;
  self.candidate = true;
  self.slowdown_after = r.job_slowdown;
  self.best_effort_after = !r.gated;
  self.neighbour_slowdown = r.neighbour_slowdown;
  self.hurts_higher_priority = r.hurts_higher_priority;
  out.push_back(self);
  for (const auto& a : r.affected) {
    WhatIfEntry e;
    const auto it = names.find(a.id);
    e.job = it == names.end() ? std::to_string(a.id) : it->second;
    e.slowdown_now = a.slowdown_before;
    e.slowdown_after = a.slowdown_after;
    out.push_back(e);
  }
  return out;
}

std::shared_ptr<OfflineTask> PlanningAdapter::PrepareOffline() const {
  auto task = std::make_shared<OfflineTask>();
  task->generation = generation_;
  task->problem.topology = impl_->online.GetTopology();
  task->problem.jobs = impl_->online.Jobs();
  task->current = impl_->Current(generation_);
  task->options = impl_->options;
  return task;
}

OfflineResult PlanningAdapter::RunOffline(const OfflineTask& task, int64_t budget_ms,
                                          std::stop_token stop, uint64_t max_iterations) {
  OfflineResult result;
  result.generation = task.generation;
  if (task.problem.jobs.empty()) {
    result.summary = "no jobs";
    return result;
  }
  pl::OfflineOptions opt;
  opt.planner = task.options;
  opt.budget = std::chrono::milliseconds(budget_ms);
  if (max_iterations > 0) opt.max_iterations = max_iterations;
  opt.seed = task.generation + 1;
  pl::OfflineStats stats;
  std::optional<pl::Plan> better;
  try {
    better = pl::Recalculate(task.problem, task.current, opt, stop, &stats);
  } catch (const std::invalid_argument& e) {
    result.summary = std::string("refused: ") + e.what();
    return result;
  }
  result.summary =
      std::to_string(stats.iterations) + " iterations, score (" +
      std::to_string(stats.current.utilization) + ", " + std::to_string(stats.current.latency) +
      ", " + std::to_string(stats.current.cushion_ns) + ") -> (" +
      std::to_string(stats.best.utilization) + ", " + std::to_string(stats.best.latency) + ", " +
      std::to_string(stats.best.cushion_ns) + ")";
  if (!better) return result;
  result.improved = true;
  std::unordered_map<pl::JobId, const pl::JobPlan*> current;  // thousands of jobs: no search each
  for (const pl::JobPlan& p : task.current.jobs) current.emplace(p.id, &p);
  for (const auto& j : better->jobs) {
    const auto found = current.find(j.id);
    const pl::JobPlan* before = found == current.end() ? nullptr : found->second;
    if (before == nullptr || before->timetable.period_ns != j.timetable.period_ns ||
        before->timetable.offset_ns != j.timetable.offset_ns ||
        before->best_effort != j.best_effort) {
      result.moved.push_back(j.id);
    }
  }
  auto op = std::make_shared<OfflinePlan>();
  op->jobs = task.problem.jobs;
  op->plan = std::move(*better);
  result.plan = op;
  return result;
}

PlanningAdapter::Adoption PlanningAdapter::AdoptOffline(const OfflineResult& result,
                                                        size_t max_moves) {
  if (!result.improved || !result.plan) return Adoption::kNoGain;
  if (result.generation != generation_) return Adoption::kStale;
  if (result.moved.size() > max_moves) return Adoption::kTooDisruptive;
  const auto* op = static_cast<const OfflinePlan*>(result.plan.get());
  try {
    impl_->online.Adopt(op->jobs, op->plan);
  } catch (const std::invalid_argument&) {
    return Adoption::kRefused;
  }
  ++generation_;
  return Adoption::kApplied;
}

double PriorityWeight(int priority) {
  return pl::PriorityWeight(priority);
}

}  // namespace metronome::controller
