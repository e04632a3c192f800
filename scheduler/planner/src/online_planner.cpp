// The online planner: stages 1–3 run job by job in priority order (see planner.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "metronome/planner/planner.hpp"
#include "workspace.hpp"

namespace metronome::planner {

namespace detail {

// Loads jobs into a workspace; those found in `current` are marked as running there.
void LoadJobs(Workspace& ws, const std::vector<Job>& jobs, const Plan* current) {
  std::unordered_map<JobId, const JobPlan*> previous;
  if (current != nullptr) {
    for (const JobPlan& p : current->jobs) previous[p.id] = &p;
  }
  for (const Job& job : jobs) {
    const std::uint32_t j = ws.AddJob(job);
    auto it = previous.find(job.id);
    if (it == previous.end() || it->second->timetable.period_ns <= 0) continue;
    Slot& s = ws.slots[j];
    s.has_prev = true;
    s.prev_gated = !it->second->best_effort;
    s.prev_period = it->second->timetable.period_ns;
    s.prev_offset = Mod(it->second->timetable.offset_ns, it->second->timetable.period_ns);
  }
}

std::vector<std::uint32_t> AliveJobs(const Workspace& ws) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t j = 0; j < ws.jobs.size(); ++j) {
    if (ws.jobs[j].alive) out.push_back(j);
  }
  return out;
}

// The greedy method: place every job in priority order, then spread the cushions; then every
// job left best-effort is admitted once more, against the spread windows.
//
// Why the second admission: new jobs are packed against the window before them (best fit) and
// spread only by stage 3, so a job placed among packed windows may find no room at a harmonic
// period that the spread windows leave. Two windows of period T packed back to back cover the
// whole circle of T/2, spread apart they leave a gap in it. (On the CPU testbed demo the
// low-priority job, 23 ms every ~230 ms, fits at 485/2 ms beside two 170 ms windows of 485 ms
// once they are spread, not while they are packed; when the high-priority job joined last, the
// re-plan left it ungated, and adding it again gated it.) A job gated this way takes part of
// the cushions (stage 1 before stage 3), so the cushions are spread again.
void RunGreedy(Workspace& ws) {
  const std::vector<std::uint32_t> order = PlacementOrder(ws, AliveJobs(ws));
  for (const std::uint32_t j : order) PlaceJob(ws, j);
  RelaxCushions(ws, order, ws.options.cushion_sweeps);
  if (ws.options.cushion) {  // without stage 3 nothing was spread: nothing new can fit
    bool admitted = false;
    for (const std::uint32_t j : order) {
      if (ws.slots[j].state != SlotState::kBestEffort) continue;
      PlaceJob(ws, j);
      admitted = admitted || ws.slots[j].state == SlotState::kGated;
    }
    if (admitted) RelaxCushions(ws, order, ws.options.cushion_sweeps);
  }
}

// The jobs of equal or lower priority on the links of job j.
std::vector<std::uint32_t> NeighboursUpTo(const Workspace& ws, std::uint32_t j) {
  std::vector<std::uint32_t> out;
  const int priority = ws.jobs[j].job.priority;
  for (const LinkId l : ws.jobs[j].shape.links) {
    for (const auto& o : ws.link_jobs[l]) {
      if (o.job != j && ws.jobs[o.job].job.priority <= priority) out.push_back(o.job);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The jobs of lower priority than job j on its links: the gated ones and, with `best_effort`,
// the best-effort ones too.
std::vector<std::uint32_t> NeighboursBelow(const Workspace& ws, std::uint32_t j, bool best_effort) {
  std::vector<std::uint32_t> out;
  const int priority = ws.jobs[j].job.priority;
  for (const LinkId l : ws.jobs[j].shape.links) {
    for (const auto& o : ws.link_jobs[l]) {
      if (ws.jobs[o.job].job.priority < priority) out.push_back(o.job);
    }
    if (!best_effort) continue;
    for (const std::uint32_t b : ws.link_best_effort[l]) {
      if (ws.jobs[b].job.priority < priority) out.push_back(b);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Takes jobs off their slots, remembering where they ran (stage 2 puts them back if it can).
void TakeOff(Workspace& ws, const std::vector<std::uint32_t>& js) {
  for (const std::uint32_t v : js) MarkRunning(ws, v);
  ws.UnplaceAll(js);
}

// The least common stretch s (a whole percent above 1) at which a group of jobs could take
// turns on every link they cross: their windows plus cushions over s·T0, together with what the
// other gated jobs there reserve, fill at most each link. 0 when no stretch can help (the
// others fill a link already) or none is needed (s would be 1: the group fails for another
// reason). Only a necessary condition: the repack checks whether the windows really fit.
std::int64_t SharedStretchPercent(const Workspace& ws, const std::vector<std::uint32_t>& group) {
  std::vector<LinkId> links;
  for (const std::uint32_t k : group) {
    links.insert(links.end(), ws.jobs[k].shape.links.begin(), ws.jobs[k].shape.links.end());
  }
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
  // The stretch needed when each member keeps the cushion it would have at `guess`·T0.
  const auto need_at = [&](double guess) {
    double need = 1.0;
    for (const LinkId l : links) {
      double fixed = 0.0;
      double own = 0.0;
      for (const auto& o : ws.link_jobs[l]) {
        const JobShape& shape = ws.jobs[o.job].shape;
        if (std::find(group.begin(), group.end(), o.job) == group.end()) {
          const Nanos t = ws.slots[o.job].period;
          fixed += static_cast<double>(shape.w + GapAt(shape, t)) / static_cast<double>(t);
        }
      }
      for (const std::uint32_t k : group) {
        const JobShape& shape = ws.jobs[k].shape;
        if (std::binary_search(shape.links.begin(), shape.links.end(), l)) {
          const auto t = static_cast<Nanos>(guess * static_cast<double>(shape.t0));
          own += static_cast<double>(shape.w + GapAt(shape, t)) / static_cast<double>(shape.t0);
        }
      }
      if (fixed >= 1.0) return 1e9;
      need = std::max(need, own / (1.0 - fixed));
    }
    return need;
  };
  // With full cushions first; then with the cushions of members that the stretch makes wait
  // at their gates (gap_at), kept if it still makes them wait.
  double need = need_at(1.0);
  if (need < 100.0) {
    const double smaller = need_at(need);
    if (smaller < need && need_at(smaller) <= smaller) need = smaller;
  }
  if (!(need < 100.0)) return 0;  // never within max_stretch; keeps T0 · percent in range
  const auto percent = static_cast<std::int64_t>(std::ceil(need * 100.0 - 1e-9));
  return percent > 100 ? percent : 0;
}

// Local re-plan around a job that found no free place: its equal- and lower-priority
// neighbours are packed again together with it (as if new, best fit), in priority order; if
// that fails, once more with the longer periods first within each priority (jobs whose natural
// periods differ by a little, e.g. the same model measured with noise, then share the longer
// period instead of the shorter one blocking the longer). Kept only if the job is now gated and
// no neighbour lost its gate (stage 1 gained); otherwise everything goes back where it was.
//
// If both fail and the job's neighbours here are its equals, a third try stretches the whole
// group by one factor, the least at which its windows and cushions fit (shared_stretch_percent):
// two jobs whose phases take about half their period each fit neither at P nor at a harmonic
// of each other's period, since the cushions overflow it by a few percent; both stretched by
// those few percent take turns. It is a candidate only when the group's added stretch costs
// less than the job would cost running ungated (stage 2's rule, as stretch_bound applies it to
// one job) and within max_stretch; it is kept only when the class then serves more load (stage
// 1: the stretch lowers every member's w/T).
// Returns the neighbours that moved.
std::vector<std::uint32_t> RepackAround(Workspace& ws, std::uint32_t j) {
  const std::vector<std::uint32_t> victims = NeighboursUpTo(ws, j);
  if (victims.empty() || victims.size() > kMaxLocalMoves) return {};
  const bool among_equals = NeighboursBelow(ws, j, false).empty();
  const double ungated = UngatedCost(ws, ws.jobs[j].shape);
  struct Saved {
    std::uint32_t job;
    Slot slot;
  };
  std::vector<Saved> saved;
  saved.reserve(victims.size() + 1);
  for (const std::uint32_t v : victims) saved.push_back({v, ws.slots[v]});
  saved.push_back({j, ws.slots[j]});
  std::vector<std::uint32_t> all = victims;
  all.push_back(j);
  auto attempt = [&](const std::vector<std::uint32_t>& order) {
    ws.UnplaceAll(all);
    for (const Saved& s : saved) {
      ws.slots[s.job].has_prev = false;  // packed like new jobs, as tight as they go
      ws.jobs[s.job].job.next_phase_ns = kUnknownPhase;
    }
    bool ok = true;
    for (const std::uint32_t k : order) {
      PlaceJob(ws, k);
      ok = ok && ws.slots[k].state == SlotState::kGated;
    }
    return ok;
  };
  std::vector<std::uint32_t> order = PlacementOrder(ws, all);
  bool ok = attempt(order);
  if (!ok) {
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
      const int px = ws.jobs[x].job.priority;
      const int py = ws.jobs[y].job.priority;
      return px != py ? px > py : ws.jobs[x].shape.t0 > ws.jobs[y].shape.t0;
    });
    ok = attempt(order);
  }
  if (!ok && among_equals) {
    const std::int64_t percent = SharedStretchPercent(ws, all);
    bool within = percent > 0;
    for (const std::uint32_t k : all) {
      const JobShape& shape = ws.jobs[k].shape;
      const std::int64_t stretched = (shape.t0 * percent + 99) / 100;  // rounded up
      within = within && static_cast<double>(stretched) <=
                             ws.options.max_stretch * static_cast<double>(shape.p);
    }
    if (within) {
      std::vector<Nanos> natural_t0;
      for (const std::uint32_t k : all) {  // the group's shortest period, for this try only
        JobShape& shape = ws.jobs[k].shape;
        natural_t0.push_back(shape.t0);
        shape.t0 = (shape.t0 * percent + 99) / 100;
      }
      ok = attempt(order);
      for (std::size_t i = 0; i < all.size(); ++i) ws.jobs[all[i]].shape.t0 = natural_t0[i];
      // The periods the members got (one that found no room at s·T0 takes a harmonic of
      // another's, which may stretch it more), against what they had.
      double added_cost = 0.0;
      double before_served = 0.0;
      double after_served = 0.0;
      for (const Saved& s : saved) {
        const JobShape& shape = ws.jobs[s.job].shape;
        const Nanos now = ws.slots[s.job].period;
        added_cost += StretchCost(shape, now);
        after_served += static_cast<double>(shape.w) / static_cast<double>(now);
        if (s.slot.state == SlotState::kGated) {
          added_cost -= StretchCost(shape, s.slot.period);
          before_served += static_cast<double>(shape.w) / static_cast<double>(s.slot.period);
        }
      }
      ok = ok && added_cost < ungated &&
           after_served > before_served * (1 + ws.options.utilization_tolerance);
    }
  }
  if (!ok) {  // no gain: restore
    for (const std::uint32_t k : all) ws.Unplace(k);
    for (const Saved& s : saved) {
      if (s.slot.state == SlotState::kGated) {
        ws.PlaceGated(s.job, s.slot.period, s.slot.offset);
      } else if (s.slot.state == SlotState::kBestEffort) {
        ws.PlaceBestEffort(s.job);
      }
      ws.slots[s.job] = s.slot;
    }
    return {};
  }
  std::vector<std::uint32_t> moved;
  for (const Saved& s : saved) {
    Slot& now = ws.slots[s.job];
    now.has_prev = s.slot.has_prev;
    now.prev_gated = s.slot.prev_gated;
    now.prev_period = s.slot.prev_period;
    now.prev_offset = s.slot.prev_offset;
    if (s.job != j && (now.period != s.slot.period || now.offset != s.slot.offset)) {
      moved.push_back(s.job);
    }
  }
  return moved;
}

// Throws std::invalid_argument with every defect validate() finds.
void RequireValid(const Topology& topology, const std::vector<Job>& jobs) {
  std::vector<std::string> errors;
  if (jobs.size() == 1) {
    ValidateJob(topology, jobs.front(), errors);  // no copy of the topology on the hot path
  } else {
    errors = Validate(Problem{topology, jobs});
  }
  if (errors.empty()) return;
  std::string message = "metronome planner: invalid input:";
  for (const std::string& e : errors) message.append(" ").append(e).append(";");
  throw std::invalid_argument(message);
}

}  // namespace detail

using detail::Workspace;

Plan MakePlan(const Problem& problem, const PlannerOptions& options, const Plan* current) {
  detail::RequireValid(problem.topology, problem.jobs);
  Workspace ws(problem.topology, options);
  detail::LoadJobs(ws, problem.jobs, current);
  detail::RunGreedy(ws);
  return detail::Evaluate(ws);
}

namespace detail {

// Job::next_phase_ns is a hint for the moment a job is added; a later re-plan of the job
// (after another job leaves, in a repack, in the offline search) must not aim at a phase long
// past.
void ForgetNextPhases(Workspace& ws) {
  for (ResolvedJob& r : ws.jobs) r.job.next_phase_ns = kUnknownPhase;
}

}  // namespace detail

OnlinePlanner::OnlinePlanner(Topology topology, PlannerOptions options)
    : ws_(std::make_unique<Workspace>(std::move(topology), options)) {}
OnlinePlanner::~OnlinePlanner() = default;
OnlinePlanner::OnlinePlanner(OnlinePlanner&&) noexcept = default;
OnlinePlanner& OnlinePlanner::operator=(OnlinePlanner&&) noexcept = default;

void OnlinePlanner::PlanAll(const std::vector<Job>& jobs, const Plan* current, bool keep_running) {
  detail::RequireValid(ws_->topology, jobs);
  auto fresh = std::make_unique<Workspace>(ws_->topology, ws_->options);
  fresh->contention_memo = std::move(ws_->contention_memo);  // keyed by inputs: still valid
  fresh->slack_memo = std::move(ws_->slack_memo);
  detail::LoadJobs(*fresh, jobs, current);
  // No gain is worth a move (stage 2): a running job whose place is free stays in it.
  if (keep_running) fresh->options.min_move_gain = std::numeric_limits<double>::infinity();
  detail::RunGreedy(*fresh);
  fresh->options.min_move_gain = ws_->options.min_move_gain;
  detail::ForgetNextPhases(*fresh);
  ws_ = std::move(fresh);
}

void OnlinePlanner::Adopt(const std::vector<Job>& jobs, const Plan& plan) {
  detail::RequireValid(ws_->topology, jobs);
  auto fresh = std::make_unique<Workspace>(ws_->topology, ws_->options);
  fresh->contention_memo = std::move(ws_->contention_memo);  // keyed by inputs: still valid
  fresh->slack_memo = std::move(ws_->slack_memo);
  detail::LoadJobs(*fresh, jobs, &plan);
  std::vector<std::uint32_t> missing;
  for (std::uint32_t j = 0; j < fresh->jobs.size(); ++j) {
    detail::Slot& s = fresh->slots[j];
    if (!s.has_prev) {
      missing.push_back(j);
    } else if (s.prev_gated) {
      fresh->PlaceGated(j, s.prev_period, s.prev_offset);
      s.movable = false;
    } else {
      fresh->PlaceBestEffort(j);
    }
  }
  for (const std::uint32_t j : detail::PlacementOrder(*fresh, missing)) {
    detail::PlaceJob(*fresh, j);
  }
  detail::RelaxCushions(*fresh, missing, fresh->options.cushion_sweeps);
  detail::ForgetNextPhases(*fresh);
  ws_ = std::move(fresh);
}

AddResult OnlinePlanner::AddJob(const Job& job) {
  return WithEntry(Add(job));
}

AddResult OnlinePlanner::AddJobFirst(const Job& job) {
  return WithEntry(AddFirst(job));
}

std::vector<JobId> OnlinePlanner::Insert(const Job& job) {
  return Add(job).second;
}

std::vector<JobId> OnlinePlanner::InsertFirst(const Job& job) {
  return AddFirst(job).second;
}

AddResult OnlinePlanner::WithEntry(Added added) const {
  AddResult result;
  result.job = detail::JobEntry(*ws_, added.first);
  result.changed = std::move(added.second);
  return result;
}

OnlinePlanner::Added OnlinePlanner::Add(const Job& job) {
  detail::RequireValid(ws_->topology, {job});
  Workspace& ws = *ws_;
  RemoveJob(job.id);
  const std::uint32_t j = ws.AddJob(job);
  detail::PlaceJob(ws, j);
  std::vector<std::uint32_t> moved{j};
  if (ws.slots[j].state == detail::SlotState::kBestEffort) {
    // No free place. First, pack the job's equal- and lower-priority neighbours again with it.
    std::vector<std::uint32_t> repacked = detail::RepackAround(ws, j);
    if (ws.slots[j].state == detail::SlotState::kGated) {
      moved.insert(moved.end(), repacked.begin(), repacked.end());
    } else {
      // Still none: if it outranks gated jobs on its links, they are re-placed around it: the
      // kMaxLocalMoves lowest-ranked of them, as a repack is bounded (on a spine crossed by
      // hundreds of jobs, taking off all those below a newcomer cost 7 ms an arrival).
      std::vector<std::uint32_t> victims = detail::NeighboursBelow(ws, j, false);
      if (victims.size() > detail::kMaxLocalMoves) {
        victims = detail::PlacementOrder(ws, victims);
        victims.erase(victims.begin(),
                      victims.end() - static_cast<std::ptrdiff_t>(detail::kMaxLocalMoves));
      }
      if (!victims.empty()) {
        detail::TakeOff(ws, victims);
        detail::PlaceJob(ws, j);
        for (const std::uint32_t v : detail::PlacementOrder(ws, victims)) {
          if (detail::PlaceJob(ws, v)) moved.push_back(v);
        }
      }
    }
  }
  return FinishAdd(j, moved);
}

OnlinePlanner::Added OnlinePlanner::AddFirst(const Job& job) {
  detail::RequireValid(ws_->topology, {job});
  Workspace& ws = *ws_;
  RemoveJob(job.id);
  const std::uint32_t j = ws.AddJob(job);
  // Its lower-priority neighbours leave its links, it takes its place among the jobs that
  // outrank or equal it, and they come back around it (each where it ran, if still free).
  const std::vector<std::uint32_t> victims = detail::NeighboursBelow(ws, j, true);
  detail::TakeOff(ws, victims);
  detail::PlaceJob(ws, j);
  std::vector<std::uint32_t> moved{j};
  if (ws.slots[j].state == detail::SlotState::kBestEffort) {
    // Its equals fill its links: pack them again with it, as add_job does.
    std::vector<std::uint32_t> repacked = detail::RepackAround(ws, j);
    if (ws.slots[j].state == detail::SlotState::kGated) {
      moved.insert(moved.end(), repacked.begin(), repacked.end());
    }
  }
  const std::vector<std::uint32_t> order = detail::PlacementOrder(ws, victims);
  for (const std::uint32_t v : order) {
    if (detail::PlaceJob(ws, v)) moved.push_back(v);
  }
  if (ws.options.cushion) {
    // As in plan(): once stage 3 has spread the cushions, a neighbour left best-effort may fit.
    detail::RelaxCushions(ws, moved, ws.options.cushion_sweeps);
    for (const std::uint32_t v : order) {
      if (ws.slots[v].state != detail::SlotState::kBestEffort) continue;
      detail::PlaceJob(ws, v);
      if (ws.slots[v].state == detail::SlotState::kGated) moved.push_back(v);
    }
  }
  return FinishAdd(j, moved);
}

// The end of an addition: cushions spread around the jobs that moved, and what moved.
OnlinePlanner::Added OnlinePlanner::FinishAdd(std::uint32_t j,
                                              const std::vector<std::uint32_t>& moved) {
  Workspace& ws = *ws_;
  std::vector<JobId> changed;
  detail::RelaxCushions(ws, moved, ws.options.cushion_sweeps);
  for (const std::uint32_t m : moved) {
    if (m != j) changed.push_back(ws.jobs[m].job.id);
  }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  ws.jobs[j].job.next_phase_ns = kUnknownPhase;  // a hint for this addition only
  return {j, std::move(changed)};
}

void OnlinePlanner::RemoveJob(JobId id) {
  Workspace& ws = *ws_;
  const std::int32_t found = ws.Find(id);
  if (found < 0) return;
  const auto j = static_cast<std::uint32_t>(found);
  const std::vector<LinkId> links = ws.jobs[j].shape.links;
  ws.KillJob(j);
  // Best-effort and stretched jobs on the freed links may now fit or shrink; the rest stay.
  std::vector<std::uint32_t> review;
  for (const LinkId l : links) {
    for (const std::uint32_t k : ws.link_best_effort[l]) review.push_back(k);
    for (const auto& o : ws.link_jobs[l]) {
      if (ws.slots[o.job].period > ws.jobs[o.job].shape.t0) review.push_back(o.job);
    }
  }
  std::sort(review.begin(), review.end());
  review.erase(std::unique(review.begin(), review.end()), review.end());
  std::vector<std::uint32_t> moved;
  std::vector<std::uint32_t> order = detail::PlacementOrder(ws, review);
  if (order.size() > detail::kMaxLocalMoves) order.resize(detail::kMaxLocalMoves);
  for (const std::uint32_t k : order) {
    detail::MarkRunning(ws, k);
    if (detail::PlaceJob(ws, k)) moved.push_back(k);
    const detail::Slot& s = ws.slots[k];
    if (!s.prev_gated && s.state == detail::SlotState::kGated) moved.push_back(k);
  }
  detail::RelaxCushions(ws, moved, ws.options.cushion_sweeps);
}

Plan OnlinePlanner::Snapshot() const {
  return detail::Reevaluate(*ws_);
}

const Job* OnlinePlanner::Find(JobId id) const {
  const std::int32_t j = ws_->Find(id);
  return j < 0 ? nullptr : &ws_->jobs[static_cast<std::uint32_t>(j)].job;
}

std::vector<Job> OnlinePlanner::Jobs() const {
  std::vector<Job> out;
  for (const auto& r : ws_->jobs) {
    if (r.alive) out.push_back(r.job);
  }
  return out;
}

std::vector<Job> OnlinePlanner::JobsSharingLinks(const Job& job) const {
  const Workspace& ws = *ws_;
  std::vector<std::uint32_t> found;
  for (const LinkId l : JobLinks(ws.topology, job)) {
    for (const auto& o : ws.link_jobs[l]) found.push_back(o.job);
    found.insert(found.end(), ws.link_best_effort[l].begin(), ws.link_best_effort[l].end());
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::vector<Job> out;
  for (const std::uint32_t j : found) {
    if (ws.jobs[j].alive && ws.jobs[j].job.id != job.id) out.push_back(ws.jobs[j].job);
  }
  return out;
}

const Topology& OnlinePlanner::GetTopology() const {
  return ws_->topology;
}
const PlannerOptions& OnlinePlanner::Options() const {
  return ws_->options;
}

}  // namespace metronome::planner
