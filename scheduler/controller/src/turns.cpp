#include "metronome/controller/turns.hpp"

#include <algorithm>
#include <cmath>

#include "metronome/controller/plan_snapshot.hpp"
#include "metronome/planner/model.hpp"
#include "metronome/planner/ranked_yields.hpp"

namespace metronome::controller {

std::optional<TurnFigures> FiguresForTurns(const JobState& job, double bottleneck_bps,
                                           const PlanningConfig& config) {
  if (!job.has_profile) return std::nullopt;
  PlanningConfig bare = config;  // the phase itself, not the window the plan gives it
  bare.wire_margin = 0.0;
  bare.period_margin = 0.0;
  WireWindow wire;
  const std::size_t ranks = job.world_size > 0 ? job.world_size : job.ranks.size();
  const planner::JobProfile p = ToPlannerProfile(job.profile, ranks, bottleneck_bps, bare, &wire);
  TurnFigures f;
  f.wire_ns = wire.wire_ns > 0.0 ? std::llround(wire.wire_ns) : p.comm_ns;
  const MeasuredProfile& m = job.profile;
  f.compute_ns = m.compute_ns > 0 ? m.compute_ns : std::max<int64_t>(m.period_ns - m.comm_ns, 0);
  f.period_ns = f.wire_ns + f.compute_ns;
  f.beta_bps = p.beta_bps;
  const int64_t max_period = TimetableLimits{}.max_period_ns;
  if (f.wire_ns <= 0 || f.wire_ns > max_period || f.compute_ns > max_period ||
      f.period_ns > max_period) {
    return std::nullopt;
  }
  return f;
}

namespace {

bool Moved(int64_t a, int64_t b) {
  return std::abs(static_cast<double>(a - b)) > 0.05 * static_cast<double>(std::max(a, b));
}

}  // namespace

bool TurnsMoved(const TurnSet& now, const TurnSet& before) {
  if (now.count != before.count || Moved(now.wire_ns, before.wire_ns) ||
      Moved(now.period_ns, before.period_ns)) {
    return true;
  }
  for (uint32_t i = 0; i < now.count; ++i) {
    const TurnPartner& p = now.partners[i];
    const TurnPartner& q = before.partners[i];
    if (p.job != q.job || p.higher != q.higher || Moved(p.wire_ns, q.wire_ns) ||
        Moved(p.compute_ns, q.compute_ns)) {
      return true;
    }
  }
  return false;
}

void TwoJobLinks::Add(const JobState& job, std::span<const std::string> links) {
  for (const std::string& l : links) {
    Crossing& c = by_link_[l];
    if (c.count == 0) {
      c.first = &job;
    } else if (c.count == 1) {
      c.second = &job;
    }
    ++c.count;
  }
  jobs_[job.id].links = links;
}

const std::optional<TurnFigures>& TwoJobLinks::Figures(const JobState& job,
                                                       const Entry& entry) const {
  if (!entry.figured) {
    entry.figures = figures_of_ ? figures_of_(job, entry.links) : std::nullopt;
    entry.figured = true;
  }
  return entry.figures;
}

bool TwoJobLinks::BothFill(const std::string& link, const TurnFigures& a,
                           const TurnFigures& b) const {
  const auto c = capacity_bps_.find(link);
  if (c == capacity_bps_.end() || c->second <= 0.0) return true;
  const double least = kTurnsLinkShare * c->second;
  return a.beta_bps >= least && b.beta_bps >= least;
}

bool HeldToAWindow(const JobState& job) {
  return job.planned && !job.best_effort && !AlwaysOpen(job.timetable);
}

TurnSet TwoJobLinks::TurnsFor(const JobState& job) const {
  TurnSet s;
  const auto own = jobs_.find(job.id);
  if (own == jobs_.end()) return s;
  const std::optional<TurnFigures>* own_figures = nullptr;  // asked for at the first pair
  for (const std::string& l : own->second.links) {
    const auto it = by_link_.find(l);
    if (it == by_link_.end() || it->second.count != 2) continue;
    const JobState* other = it->second.first == &job ? it->second.second : it->second.first;
    if (other == &job || planner::RanksAbove(job.priority, other->priority)) continue;
    if (HeldToAWindow(*other) &&
        (HeldToAWindow(job) || planner::RanksAbove(other->priority, job.priority))) {
      continue;
    }
    if (own_figures == nullptr) {
      own_figures = &Figures(job, own->second);
      if (!*own_figures) return TurnSet{};
      s.wire_ns = (*own_figures)->wire_ns;
      s.period_ns = (*own_figures)->period_ns;
    }
    const auto entry = jobs_.find(other->id);
    if (entry == jobs_.end()) continue;
    const std::optional<TurnFigures>& figures = Figures(*other, entry->second);
    if (!figures || !BothFill(l, **own_figures, *figures)) continue;
    bool known = false;  // a partner on two of its links is one partner
    for (uint32_t i = 0; i < s.count; ++i) known |= s.partners[i].job == other->id;
    if (known) continue;
    if (s.count == kMaxTurnPartners) break;
    s.partners[s.count++] = {other->id,
                             planner::RanksAbove(other->priority, job.priority),
                             figures->wire_ns,
                             figures->compute_ns,
                             0,
                             0};
  }
  if (s.count == 0 || ValidateTurnSet(s) != kTurnOk) return TurnSet{};
  return s;
}

}  // namespace metronome::controller
