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

// Why a request's candidates got no opinion (the extender counts each).
struct Shortfall {
  bool no_job = false;      // the pod names no job
  bool no_profile = false;  // its job has no traffic profile
  // The planner refused the job as the pod describes it (e.g. numbers beyond its limits): no
  // opinion on the candidates it refused.
  bool refused = false;
};

// The planner's what-if for every candidate of `args` (one verdict each, in request order);
// `explain` fills the reasons. False when the pod's job or its profile is unknown, or the
// planner refused it (`why`): the verdicts then stay neutral.
bool Evaluate(const Extender::Snapshot& snap, const ExtenderConfig& config,
              const models::ModelTable* models, const Args& args, std::vector<Verdict>& out,
              bool explain, Shortfall& why);

// kube-scheduler's MaxExtenderPriority.
inline constexpr int kMaxScore = 10;

// A cost as a score in [0, kMaxScore]: kMaxScore at no cost, 0 at config.cost_at_zero.
int ScoreOf(double cost, const ExtenderConfig& config);

}  // namespace metronome::extender
