// What the controller knows of a job and its ranks: registration, the measured profile, the
// profile its plan was made with, its timetable, and the rules' counters. Plain data: the
// scheduler service keeps it in its registry (under its lock), the simulator one per simulated
// job; the rules (rules.hpp) read and update it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"
#include "metronome/controller/profile.hpp"

namespace metronome::controller {

// One (job, rank) registration, made by a Hello.
struct RankState {
  uint32_t rank = 0;
  std::string node;
  std::string identity;  // ROUTER routing id of the client that registered it
  uint64_t session = 0;
  uint32_t pid = 0;
  std::string shim_version;
  uint32_t features = 0;  // its hello's (protocol Feature bits)
  int32_t priority = 1;   // its hello's (or its pod's): the job's is the highest of its ranks'
  int64_t registered_ns = 0;
  int64_t last_seen_ns = 0;
  uint64_t reports = 0;
  int64_t clock_offset_ns = 0;  // the shim's estimate (server - client)
  int64_t clock_error_ns = -1;
  uint64_t timetable_version = 0;  // the version in force at the shim, as last reported
  int64_t last_push_ns = 0;        // when the scheduler last sent it a timetable
  uint64_t gated = 0, late = 0, failed_open = 0,
           realigned = 0;  // the shim's cumulative gate counters
  uint64_t yielded = 0;    // ... collectives held for higher-ranked windows
  int64_t yield_wait_ns = 0;
};

// A communication phase a job actually ran (scheduler clock), as the controller judged it.
struct MeasuredPhase {
  int64_t start_ns = 0;
  int64_t duration_ns = 0;  // the reported communication time at the time
  int64_t lateness_ns = 0;  // signed distance from the nearest window opening (0 if unplanned)
  bool late = false;        // past the late slack: the shim held it to the next window
};

struct JobState {
  std::string name;
  uint64_t id = 0;  // numeric id handed to the planner
  int32_t priority = 0;
  uint32_t world_size = 0;
  int64_t created_ns = 0;
  std::string pod_namespace;  // with the pod check: the namespace the job belongs to
  std::map<uint32_t, RankState> ranks;

  // Latest measured profile (from reports with enough confidence), its confidence, and the
  // profile the current plan was made with. The overrun rule sets profile.phase_floor_ns: the
  // window its phases have shown they take when that is longer than their wire time (the plan's
  // window is never shorter).
  bool has_profile = false;
  MeasuredProfile profile;
  double confidence = 0.0;
  MeasuredProfile planned_profile;
  // A widening not taken because it would have stretched the period (0: none since the job's
  // timetable last changed): the rule waits for phases longer than it by the ratio.
  int64_t overrun_refused_ns = 0;
  // The higher-priority neighbour whose phases run past its cushion, for which a widening waits
  // (empty: none), and for how many of the job's intervals it has waited.
  std::string overrun_deferred_to;
  uint32_t overrun_deferred_intervals = 0;

  // Current timetable (version 0: none yet).
  bool planned = false;
  bool best_effort = false;
  double predicted_slowdown = 0.0;
  Timetable timetable;
  YieldSet yields;          // pushed with the timetable, under its version
  bool yielded_to = false;  // every transfer on its links that could meet it yields to it
  std::vector<std::string> links;
  // Whom it takes turns with on the links it and one other job cross (turns.hpp), under its
  // own version; and whether it is some job's partner (its shims then send their phase edges).
  TurnSet turns;
  bool sends_edges = false;
  uint64_t turns_version = 0;

  // Controller.
  uint32_t consecutive_late_reports = 0;
  uint32_t consecutive_changed_reports = 0;
  uint32_t consecutive_overrun_reports = 0;
  uint64_t phases_at_timetable = 0;  // phases_seen when the current timetable was made
  int64_t last_replan_ns = 0;
  double lateness_ewma_ns = 0.0;
  uint64_t phases_seen = 0;
  uint64_t phases_late = 0;
  int64_t last_phase_start_ns = 0;
  uint64_t replans = 0;
  // Collectives its ranks held for higher-ranked windows, and how long they waited, since it
  // registered (never falls: a rank that restarts counts from 0 again, its earlier holds stay).
  uint64_t yielded = 0;
  int64_t yield_wait_ns = 0;
  std::deque<MeasuredPhase> phases;    // most recent last, bounded by controller.phase_history
  std::vector<std::string> decisions;  // last few controller decisions, for the status API
};

}  // namespace metronome::controller
