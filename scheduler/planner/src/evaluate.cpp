// Turning the working state into a Plan: each job's entry (late slack = its cushion, predicted
// slowdown), each link's entry (hyperperiod, served load, minimum cushion, contention) and the
// three-stage score.
//
// Cost: one single-link free-range query per (gated job, link) for the cushions, plus the
// contention model on links that carry best-effort traffic. Reevaluate (the online planner's
// snapshot) pays that only for what changed since its last evaluation, and a comparison per job
// and per link for the rest.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "contention.hpp"
#include "metronome/planner/ranked_yields.hpp"
#include "workspace.hpp"

namespace metronome::planner::detail {

namespace {

double Duty(const JobShape& s) {
  return static_cast<double>(s.w) / static_cast<double>(s.p);
}

// Contention on one link: gated windows are deterministic arcs; best-effort jobs, drifting, are
// random sources (in job order, so that the model does not depend on the order they came in). Adds
// each job's extra slowdown into extra[j] (max over links), for every job or only `only_job`. A
// gated window that every best-effort job there yields to (ranked_yields.hpp) is not slowed by
// them: they wait for it instead (their own slowdown, sharing or waiting, is counted as before).
double ComputeLinkContention(const Workspace& ws, LinkId l, std::vector<double>* extra,
                             std::uint32_t only_job = std::numeric_limits<std::uint32_t>::max()) {
  const auto& be = ws.link_best_effort[l];
  if (be.empty()) return 0.0;
  std::vector<GatedArc> arcs;
  std::vector<std::uint32_t> arc_ids;
  std::vector<RandomLoad> random;
  std::vector<std::uint32_t> random_ids;
  for (const auto& o : ws.link_jobs[l]) {
    const Slot& s = ws.slots[o.job];
    arcs.push_back({s.period, s.offset, ws.jobs[o.job].shape.w, o.height});
    arc_ids.push_back(o.job);
  }
  random_ids.assign(be.begin(), be.end());
  std::sort(random_ids.begin(), random_ids.end());
  for (const std::uint32_t k : random_ids) {
    const JobShape& shape = ws.jobs[k].shape;
    const auto pos = static_cast<std::size_t>(
        std::lower_bound(shape.links.begin(), shape.links.end(), l) - shape.links.begin());
    random.push_back({Duty(shape), shape.height[pos]});
  }
  const double capacity = ws.topology.GetLink(l).capacity_bps;
  if (ws.contention_memo.size() < ws.topology.LinkCount()) {
    ws.contention_memo.resize(ws.topology.LinkCount());
  }
  Workspace::ContentionMemo& memo = ws.contention_memo[l];
  if (!memo.valid || memo.capacity != capacity || memo.arcs != arcs || memo.random != random) {
    memo.model.emplace(capacity, arcs, random);
    memo.valid = true;
    memo.capacity = capacity;
    memo.arcs = arcs;
    memo.random = random;
    memo.overload = memo.model->Overload();
    memo.gated_stretch.assign(arcs.size(), std::numeric_limits<double>::quiet_NaN());
    memo.random_stretch.assign(random.size(), std::numeric_limits<double>::quiet_NaN());
  }
  const auto gated_stretch = [&memo](std::size_t i) {
    if (std::isnan(memo.gated_stretch[i])) memo.gated_stretch[i] = memo.model->GatedStretch(i);
    return memo.gated_stretch[i];
  };
  const auto random_stretch = [&memo](std::size_t k) {
    if (std::isnan(memo.random_stretch[k])) memo.random_stretch[k] = memo.model->RandomStretch(k);
    return memo.random_stretch[k];
  };
  if (extra != nullptr) {
    constexpr auto kAll = std::numeric_limits<std::uint32_t>::max();
    auto bump = [&](std::uint32_t j, double factor) {
      auto& e = (*extra)[j];
      const JobShape& shape = ws.jobs[j].shape;
      e = std::max(e, (factor - 1.0) * static_cast<double>(shape.w) / static_cast<double>(shape.p));
    };
    for (std::size_t i = 0; i < arc_ids.size(); ++i) {
      if (only_job != kAll && arc_ids[i] != only_job) continue;
      const int priority = ws.jobs[arc_ids[i]].shape.priority;
      const double rate = arcs[i].height;
      const bool yielded_to = std::all_of(be.begin(), be.end(), [&](std::uint32_t k) {
        const JobShape& other = ws.jobs[k].shape;
        const auto at = std::lower_bound(other.links.begin(), other.links.end(), l);
        const double height = other.height[static_cast<std::size_t>(at - other.links.begin())];
        return RanksAbove(priority, other.priority) && SlowsMaterially(rate, height, capacity);
      });
      if (!yielded_to) bump(arc_ids[i], gated_stretch(i));
    }
    for (std::size_t k = 0; k < random_ids.size(); ++k) {
      if (only_job == kAll || random_ids[k] == only_job) {
        bump(random_ids[k], random_stretch(k));
      }
    }
  }
  return memo.overload;
}

// The cushion of each gated job on a link shared by several, in link_jobs order: memoized
// (Workspace::SlackMemo) by the link's windows, which are all that the query reads.
const std::vector<Nanos>& LinkSlacks(const Workspace& ws, LinkId l) {
  if (ws.slack_memo.size() < ws.topology.LinkCount()) {
    ws.slack_memo.resize(ws.topology.LinkCount());
  }
  Workspace::SlackMemo& memo = ws.slack_memo[l];
  const double capacity = ws.topology.GetLink(l).capacity_bps;
  static thread_local std::vector<Workspace::WindowKey> windows;
  windows.clear();
  for (const auto& o : ws.link_jobs[l]) {
    const Slot& s = ws.slots[o.job];
    const JobShape& shape = ws.jobs[o.job].shape;
    windows.push_back(
        {ws.jobs[o.job].job.id, s.period, s.offset, shape.w, GapAt(shape, s.period), o.height});
  }
  if (!memo.valid || memo.capacity != capacity || memo.windows != windows) {
    memo.valid = true;
    memo.capacity = capacity;
    memo.windows = windows;
    memo.slack.clear();
    for (const auto& o : ws.link_jobs[l]) memo.slack.push_back(LateSlack(ws, o.job, l));
  }
  return memo.slack;
}

// The height of a job's rectangle on one of its links.
double HeightOn(const JobShape& shape, LinkId l) {
  const auto at = std::find(shape.links.begin(), shape.links.end(), l);
  return at == shape.links.end() ? 0.0
                                 : shape.height[static_cast<std::size_t>(at - shape.links.begin())];
}

}  // namespace

// Whether gated job j protects its window from drifting best-effort job b on link l: b ranks
// below j and would slow it materially there (then b yields to j's window, RankedYields), and b
// still fits in time around every window it would yield to: its own duty cycle plus those of j
// and of the gated jobs ranked above b on any of its links at most 1. (Without that bound a job
// that is on the wire most of its period, yielding to several higher windows, waits most of its
// time away; heterogeneous-13 lost 10 % priority-weighted that way: docs/decisions/0009.)
bool ProtectsFrom(const Workspace& ws, std::uint32_t j, const JobShape& other, LinkId l) {
  const JobShape& shape = ws.jobs[j].shape;
  if (!RanksAbove(shape.priority, other.priority)) return false;
  if (!SlowsMaterially(HeightOn(shape, l), HeightOn(other, l),
                       ws.topology.GetLink(l).capacity_bps)) {
    return false;
  }
  const auto duty = [&](std::uint32_t a) {
    return static_cast<double>(ws.jobs[a].shape.w) / static_cast<double>(ws.slots[a].period);
  };
  double busy = Duty(other) + duty(j);
  std::vector<std::uint32_t> counted{j};
  for (const LinkId bl : other.links) {
    for (const auto& o : ws.link_jobs[bl]) {
      if (!RanksAbove(ws.jobs[o.job].shape.priority, other.priority) ||
          std::find(counted.begin(), counted.end(), o.job) != counted.end()) {
        continue;
      }
      counted.push_back(o.job);
      busy += duty(o.job);
    }
  }
  return busy <= 1.0;
}

// True when the job's gate would protect nothing: on each of its links all the windows there,
// its own included, fit side by side (their heights add up to at most the link), so nobody on
// them takes turns whatever their phases, and the best-effort jobs there (if any) drift
// ungated and have no reason to yield to it (ProtectsFrom). Its window would only cost it the
// headroom, gate waits and, where drifting traffic slows its phases, overrun re-plans. (The sum,
// not the load over time: jobs ungated by this rule run at their own pace, away from their
// planned windows, and only a link whose windows fit together in any arrangement stays free of
// overload with them.)
bool NeedsNoGate(const Workspace& ws, std::uint32_t j) {
  const auto& links = ws.jobs[j].shape.links;
  for (const LinkId l : links) {  // the cheap test first: no drifting job is looked at
    if (GatedOverflow(ws, l)) return false;
  }
  for (const LinkId l : links) {
    for (const std::uint32_t b : ws.link_best_effort[l]) {
      if (ProtectsFrom(ws, j, ws.jobs[b].shape, l)) return false;
    }
  }
  return true;
}

bool GatedOverflow(const Workspace& ws, LinkId l) {
  const auto& gated = ws.link_jobs[l];
  if (gated.size() <= 1) return false;
  double load = 0.0;
  for (const auto& o : gated) load += o.height;
  return load > ws.topology.GetLink(l).capacity_bps * (1.0 + 1e-9);
}

namespace {

JobPlan MakeEntry(const Workspace& ws, std::uint32_t j, Nanos slack, double extra) {
  const Slot& s = ws.slots[j];
  const JobShape& shape = ws.jobs[j].shape;
  JobPlan e;
  e.id = ws.jobs[j].job.id;
  switch (s.state) {
    case SlotState::kGated:
      e.timetable = MakeTimetable(s.period, s.offset, shape.w, slack);
      e.predicted_slowdown =
          static_cast<double>(s.period - shape.p) / static_cast<double>(shape.p) + extra;
      if (NeedsNoGate(ws, j)) {
        // Nothing to take turns with: no gate (window = period) and no headroom to pay; it runs
        // at its natural pace (sharing bandwidth with drifting best-effort traffic, if any, as
        // it would gated). Its period and offset stay in the plan: a newcomer that cannot stack
        // with it is placed around them, and the job is gated from then on.
        e.timetable = MakeTimetable(s.period, s.offset, s.period, 0);
        e.predicted_slowdown = extra;
      }
      break;
    case SlotState::kBestEffort:
      e.best_effort = true;  // ungated at its natural pace
      e.timetable = MakeTimetable(shape.p, 0, shape.p, 0);
      e.predicted_slowdown = extra;
      break;
    case SlotState::kUnplaced:
      e.timetable = MakeTimetable(shape.p, 0, shape.p, 0);
      e.best_effort = true;
      break;
    case SlotState::kNoLinks:
      e.timetable = MakeTimetable(shape.p, 0, shape.p, 0);  // nothing to share
      break;
  }
  return e;
}

}  // namespace

void MarkRunning(Workspace& ws, std::uint32_t j) {
  Slot& s = ws.slots[j];
  s.has_prev = s.state == SlotState::kGated || s.state == SlotState::kBestEffort;
  s.prev_gated = s.state == SlotState::kGated;
  s.prev_period = s.period;
  s.prev_offset = s.offset;
}

JobPlan JobEntry(const Workspace& ws, std::uint32_t j) {
  const JobShape& shape = ws.jobs[j].shape;
  Nanos slack = 0;
  std::vector<double> extra(ws.jobs.size(), 0.0);
  if (ws.slots[j].state == SlotState::kGated) {
    slack = LateSlack(ws, j);
  }
  for (const LinkId l : shape.links) ComputeLinkContention(ws, l, &extra, j);
  return MakeEntry(ws, j, slack, extra[j]);
}

namespace {

constexpr Nanos kNoSlack = std::numeric_limits<Nanos>::max();

// Link l's entry, folding what it says about each of its jobs into the per-job arrays: the
// least cushion (slack, min over links), sharing a link with another gated job (shares) and
// the contention slowdown (extra, max over links). Folding a link twice leaves the arrays as
// folding it once.
void EvaluateLink(const Workspace& ws, LinkId l, LinkPlan& lp, std::vector<Nanos>& slack,
                  std::vector<char>& shares, std::vector<double>& extra) {
  lp = LinkPlan{};
  lp.link = l;
  lp.hyperperiod_ns = ws.Hyperperiod(l);
  const auto& occupants = ws.link_jobs[l];
  lp.gated_jobs = static_cast<std::uint32_t>(occupants.size());
  lp.best_effort_jobs = static_cast<std::uint32_t>(ws.link_best_effort[l].size());
  const double capacity = ws.topology.GetLink(l).capacity_bps;
  lp.min_cushion_ns = -1;
  const std::vector<Nanos>* slacks = occupants.size() > 1 ? &LinkSlacks(ws, l) : nullptr;
  for (std::size_t k = 0; k < occupants.size(); ++k) {
    const auto& o = occupants[k];
    const Slot& s = ws.slots[o.job];
    const JobShape& shape = ws.jobs[o.job].shape;
    lp.served_load +=
        static_cast<double>(shape.w) * o.height / (static_cast<double>(s.period) * capacity);
    Nanos gap = s.period - shape.w;
    if (slacks != nullptr) {  // more than one occupant
      gap = (*slacks)[k];
      shares[o.job] = 1;
      lp.min_cushion_ns = lp.min_cushion_ns < 0 ? gap : std::min(lp.min_cushion_ns, gap);
    }
    slack[o.job] = std::min(slack[o.job], gap);
  }
  lp.contention = ComputeLinkContention(ws, l, &extra);
}

JobPlan EntryOf(const Workspace& ws, std::uint32_t j, const std::vector<Nanos>& slack,
                const std::vector<double>& extra) {
  return MakeEntry(ws, j, slack[j] == kNoSlack ? 0 : slack[j], extra[j]);
}

// The three-stage score of a plan whose entries and links are in place.
void ScorePlan(const Workspace& ws, const std::vector<Nanos>& slack,
               const std::vector<char>& shares, Plan& plan) {
  Score& score = plan.score;
  double cushion = std::numeric_limits<double>::infinity();
  std::map<int, double, std::greater<>> by_class;
  for (std::uint32_t j = 0; j < ws.jobs.size(); ++j) {
    if (!ws.jobs[j].alive) continue;
    const Slot& s = ws.slots[j];
    const ResolvedJob& r = ws.jobs[j];
    const JobShape& shape = r.shape;
    double served = 0.0;
    if (s.state == SlotState::kGated) {
      score.latency += StretchCost(shape, s.period) + MoveCost(ws, j, s.period, s.offset);
      if (shares[j]) cushion = std::min(cushion, static_cast<double>(slack[j]) / shape.weight);
      for (std::size_t k = 0; k < shape.links.size(); ++k) {
        served +=
            static_cast<double>(shape.w) * shape.height[k] /
            (static_cast<double>(s.period) * ws.topology.GetLink(shape.links[k]).capacity_bps);
      }
    } else if (s.state == SlotState::kBestEffort || s.state == SlotState::kUnplaced) {
      score.latency += ws.options.best_effort_penalty * shape.weight;
    }
    by_class[r.job.priority] += served;
  }
  for (const LinkPlan& lp : plan.links) score.utilization += lp.served_load;
  score.served_by_priority.assign(by_class.begin(), by_class.end());
  score.cushion_ns = std::isinf(cushion) ? 0.0 : cushion;
}

Workspace::EvalMemo::JobKey KeyOf(const Workspace& ws, std::uint32_t j) {
  const Slot& s = ws.slots[j];
  return {ws.jobs[j].alive, ws.jobs[j].job.id, s.state, s.period, s.offset, ws.jobs[j].shape};
}

// KeyOf(ws, j) == key, without building the key.
bool Matches(const Workspace::EvalMemo::JobKey& key, const Workspace& ws, std::uint32_t j) {
  const Slot& s = ws.slots[j];
  return key.alive == ws.jobs[j].alive && key.id == ws.jobs[j].job.id && key.state == s.state &&
         key.period == s.period && key.offset == s.offset && key.shape == ws.jobs[j].shape;
}

// The whole evaluation, into the memo; with `remember`, also what it read (JobKey, the links'
// job lists) for a later EvaluateChanges. A one-shot Evaluate (the offline search evaluates each
// of its candidates once) does not copy those.
void EvaluateAll(const Workspace& ws, Workspace::EvalMemo& m, bool remember) {
  const std::size_t n = ws.jobs.size();
  m.slack.assign(n, kNoSlack);
  m.shares.assign(n, 0);
  m.extra.assign(n, 0.0);
  m.links.resize(ws.topology.LinkCount());
  for (std::size_t li = 0; li < m.links.size(); ++li) {
    EvaluateLink(ws, static_cast<LinkId>(li), m.links[li], m.slack, m.shares, m.extra);
  }
  m.entries.assign(n, JobPlan{});
  for (std::uint32_t j = 0; j < n; ++j) {
    if (ws.jobs[j].alive) m.entries[j] = EntryOf(ws, j, m.slack, m.extra);
  }
  if (!remember) return;
  m.jobs.resize(n);
  for (std::uint32_t j = 0; j < n; ++j) m.jobs[j] = KeyOf(ws, j);
  m.link_jobs = ws.link_jobs;
  m.link_best_effort = ws.link_best_effort;
}

// What changed since the memo's evaluation, evaluated again. A link is evaluated again when its
// gated or best-effort jobs are not the ones it had, or one of them changed (JobKey); a job's
// cushion, sharing and contention when it is on such a link (from all its links); its entry
// then, and also when it is gated on a link with a best-effort job that crosses such a link
// (NeedsNoGate reads the windows on that job's links: ProtectsFrom).
void EvaluateChanges(const Workspace& ws, Workspace::EvalMemo& m) {
  const std::size_t n = ws.jobs.size();
  const std::size_t links = ws.topology.LinkCount();
  std::vector<char> link_dirty(links, 0);
  std::vector<char> job_dirty(n, 0);  // cushion, sharing and contention folded again
  std::vector<char> entry_dirty(n, 0);
  if (m.jobs.size() < n) {  // new indices: a default key, unlike any live job's
    m.jobs.resize(n);
    m.entries.resize(n);
    m.slack.resize(n, kNoSlack);
    m.shares.resize(n, 0);
    m.extra.resize(n, 0.0);
  }
  for (std::uint32_t j = 0; j < n; ++j) {
    if (Matches(m.jobs[j], ws, j)) continue;
    Workspace::EvalMemo::JobKey key = KeyOf(ws, j);
    for (const LinkId l : m.jobs[j].shape.links) link_dirty[l] = 1;
    for (const LinkId l : key.shape.links) link_dirty[l] = 1;
    job_dirty[j] = 1;
    m.jobs[j] = std::move(key);
  }
  std::vector<LinkId> dirty;
  for (std::size_t li = 0; li < links; ++li) {
    if (!link_dirty[li] && m.link_jobs[li] == ws.link_jobs[li] &&
        m.link_best_effort[li] == ws.link_best_effort[li]) {
      continue;
    }
    link_dirty[li] = 1;
    dirty.push_back(static_cast<LinkId>(li));
    m.link_jobs[li] = ws.link_jobs[li];
    m.link_best_effort[li] = ws.link_best_effort[li];
    for (const auto& o : ws.link_jobs[li]) job_dirty[o.job] = 1;
    for (const std::uint32_t b : ws.link_best_effort[li]) job_dirty[b] = 1;
  }
  // Fold again every link of the jobs whose arrays start afresh (a clean link folds its other
  // jobs as it did before).
  std::vector<char> fold(links, 0);
  for (std::uint32_t j = 0; j < n; ++j) {
    if (!job_dirty[j]) continue;
    m.slack[j] = kNoSlack;
    m.shares[j] = 0;
    m.extra[j] = 0.0;
    entry_dirty[j] = 1;
    if (!ws.jobs[j].alive) continue;
    for (const LinkId l : ws.jobs[j].shape.links) fold[l] = 1;
  }
  for (const LinkId l : dirty) fold[l] = 1;
  for (std::size_t li = 0; li < links; ++li) {
    if (fold[li]) {
      EvaluateLink(ws, static_cast<LinkId>(li), m.links[li], m.slack, m.shares, m.extra);
    }
  }
  for (const LinkId bl : dirty) {
    for (const std::uint32_t b : ws.link_best_effort[bl]) {
      for (const LinkId l : ws.jobs[b].shape.links) {
        for (const auto& o : ws.link_jobs[l]) entry_dirty[o.job] = 1;
      }
    }
  }
  for (std::uint32_t j = 0; j < n; ++j) {
    if (entry_dirty[j] && ws.jobs[j].alive) m.entries[j] = EntryOf(ws, j, m.slack, m.extra);
  }
}

Plan PlanFrom(const Workspace& ws, const Workspace::EvalMemo& m) {
  Plan plan;
  plan.links = m.links;
  plan.jobs.reserve(ws.jobs.size());
  for (std::uint32_t j = 0; j < ws.jobs.size(); ++j) {
    if (ws.jobs[j].alive) plan.jobs.push_back(m.entries[j]);
  }
  ScorePlan(ws, m.slack, m.shares, plan);
  return plan;
}

}  // namespace

Plan Evaluate(const Workspace& ws) {
  Workspace::EvalMemo m;
  EvaluateAll(ws, m, /*remember=*/false);
  return PlanFrom(ws, m);
}

Plan Reevaluate(const Workspace& ws) {
  Workspace::EvalMemo& m = ws.eval_memo;
  const bool reuse =
      m.valid && m.links.size() == ws.topology.LinkCount() && m.jobs.size() <= ws.jobs.size();
  m.valid = false;  // until it is whole again: an exception half-way leaves no stale memo
  if (reuse) {
    EvaluateChanges(ws, m);
  } else {
    EvaluateAll(ws, m, /*remember=*/true);
  }
  m.valid = true;
  return PlanFrom(ws, m);
}

}  // namespace metronome::planner::detail
