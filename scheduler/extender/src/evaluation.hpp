// Scoring one request's candidates: the planner's what-if against the extender's snapshot, and
// the cost as a kube-scheduler score.
#pragma once

#include <string>
#include <vector>

#include "metronome/extender/extender.hpp"
#include "metronome/models/model_table.hpp"
#include "request.hpp"
#include "snapshot.hpp"

namespace metronome::extender {

// One candidate's verdict.
struct Verdict {
  bool known = false;  // a what-if was made
  double cost = 0.0;
  bool hurts_higher = false;
  std::string reason;
};

// The planner's what-if for every candidate of `args` (one verdict each, in request order);
// `explain` fills the reasons. False when the pod's job (`no_job`) or its profile (`no_profile`)
// is unknown: the verdicts then stay neutral.
bool Evaluate(const Extender::Snapshot& snap, const ExtenderConfig& config,
              const models::ModelTable* models, const Args& args, std::vector<Verdict>& out,
              bool explain, bool& no_job, bool& no_profile);

// kube-scheduler's MaxExtenderPriority.
inline constexpr int kMaxScore = 10;

// A cost as a score in [0, kMaxScore]: kMaxScore at no cost, 0 at config.cost_at_zero.
int ScoreOf(double cost, const ExtenderConfig& config);

}  // namespace metronome::extender
