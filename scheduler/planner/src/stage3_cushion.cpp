// Stage 3 — cushion.
//
// Objective: maximize the smallest gap after each gated window before another job's window on
// the same link, weighted so that higher priority gets the larger gap: maximize
// min_j cushion_j / π_j. The cushion absorbs jitter and drift and is each job's late slack.
//
// Method: relaxation. Each job free to move (new this round, or moved anyway) is slid within
// its free range [a, b] — never past a neighbour, so the order of windows on every link, and
// with it stages 1 and 2, are untouched — to the point that balances the gap after the
// preceding window, owned by job p, against its own: (φ − a)/π_p = (b − φ)/π_j. A few sweeps
// converge to the weighted balance on a single link and approach it on a graph of links.
// Running jobs that stay are not moved: by stage 2, moving them costs more than a cushion gains.
// Best-effort jobs drift (ungated, their phases sweeping the circle), so the slack left
// between windows serves them the same in one piece or spread.
//
// Every window also reserves a minimum cushion after it (JobShape::gap: PlannerOptions'
// min_cushion_ns and jitter_cushion·σ), which the free ranges already leave out; the relaxation
// spreads what remains on top. With PlannerOptions::cushion off (the ablation) there is no
// stage 3, no reserved cushion and no late slack.
//
// Cost: one free-range query per movable job and sweep, O(sweeps·Σ a log a).
#include <algorithm>
#include <cmath>

#include "workspace.hpp"

namespace metronome::planner::detail {

void RelaxCushions(Workspace& ws, const std::vector<std::uint32_t>& js, int sweeps) {
  if (!ws.options.cushion) return;  // the no-cushion ablation: windows stay packed
  for (int s = 0; s < sweeps; ++s) {
    for (const std::uint32_t j : js) {
      Slot& slot = ws.slots[j];
      if (slot.state != SlotState::kGated || !slot.movable) continue;
      const JobShape& shape = ws.jobs[j].shape;
      FreeRange r;
      if (!ws.RangeContaining(shape, slot.period, slot.offset, r) || r.unbounded) continue;
      const double wp = r.pred >= 0 ? ws.jobs[static_cast<std::size_t>(r.pred)].shape.weight : 1.0;
      const double share = wp / (wp + shape.weight);
      const auto target =
          r.a + static_cast<Nanos>(std::llround(static_cast<double>(r.b - r.a) * share));
      ws.SetOffset(j, std::clamp(target, r.a, r.b));
    }
  }
}

Nanos LateSlack(const Workspace& ws, std::uint32_t j, std::int64_t only_link) {
  const Slot& slot = ws.slots[j];
  if (slot.state != SlotState::kGated || !ws.options.cushion) return 0;
  const JobShape& shape = ws.jobs[j].shape;
  const Nanos free_after = slot.period - shape.w;
  FreeRange r;
  if (!ws.RangeContaining(shape, slot.period, slot.offset, r, only_link)) return 0;
  if (r.unbounded) return free_after;
  // The free range is computed with the reserved widths (window + minimum cushion), so the
  // gap after the window is what the offset could still slide, plus the reserved cushion.
  const Nanos phi = slot.offset >= r.a ? slot.offset : slot.offset + slot.period;
  return std::clamp<Nanos>(r.b - phi + GapAt(shape, slot.period), 0, free_after);
}

}  // namespace metronome::planner::detail
