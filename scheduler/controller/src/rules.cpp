#include "metronome/controller/rules.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "metronome/controller/overrun.hpp"

namespace metronome::controller {

namespace {

double RelativeChange(int64_t now, int64_t planned) {
  if (planned <= 0) return 0.0;
  return std::fabs(static_cast<double>(now - planned)) / static_cast<double>(planned);
}

}  // namespace

const char* DecisionName(Decision d) {
  switch (d) {
    case Decision::kNone:
      return "none";
    case Decision::kReplanLateness:
      return "replan_lateness";
    case Decision::kReplanProfile:
      return "replan_profile";
    case Decision::kReplanOverrun:
      return "replan_overrun";
  }
  return "?";
}

int64_t SignedLateness(const Timetable& tt, int64_t start_ns) {
  const int64_t phase = PhaseInPeriod(tt, start_ns);
  return phase > tt.period_ns / 2 ? phase - tt.period_ns : phase;
}

int64_t PredictNextPhase(const JobState& job, int64_t after_ns) {
  const Timetable& tt = job.timetable;
  if (job.planned && !job.best_effort && tt.version > 0 && tt.window_ns < tt.period_ns) {
    return NextWindowStart(tt, after_ns);  // gated: its phases start as its windows open
  }
  // Ungated: only at a steady pace. A job learned under contention speeds up as its neighbours
  // get gated (on the CPU demo 690, 635, 580, 550 ms, then 490): a phase predicted from that is
  // off by 100 ms or more, and one that comes later than its window's cushion waits a period.
  constexpr size_t kGaps = 4;
  constexpr double kSteady = 0.02;  // spread of the gaps, relative to their median
  if (job.phases.size() < kGaps + 1) return 0;
  std::array<int64_t, kGaps> gaps{};
  const size_t last_k = job.phases.size() - 1;
  for (size_t i = 0; i < kGaps; ++i) {
    gaps[i] = job.phases[last_k - i].start_ns - job.phases[last_k - i - 1].start_ns;
  }
  std::sort(gaps.begin(), gaps.end());
  const int64_t period = gaps[kGaps / 2];
  const int64_t spread = gaps.back() - gaps.front();
  if (period <= 0 || static_cast<double>(spread) > kSteady * static_cast<double>(period)) return 0;
  // Half the spread later: a phase that comes a little early waits that much, once.
  const int64_t margin = spread / 2;
  const int64_t last = job.phases.back().start_ns;
  const int64_t periods = after_ns <= last ? 1 : (after_ns - last) / period + 1;
  return last + periods * period + margin;
}

bool SpillsPastCushion(const JobState& job) {
  const Timetable& tt = job.timetable;
  if (!job.planned || job.best_effort || tt.version == 0 || AlwaysOpen(tt) || !job.has_profile) {
    return false;
  }
  const auto late = static_cast<int64_t>(std::max(job.lateness_ewma_ns, 0.0));
  return late + job.profile.comm_ns > tt.window_ns + std::max<int64_t>(tt.late_slack_ns, 0);
}

bool OutranksOnSharedLink(const JobState& other, const JobState& job) {
  if (other.priority <= job.priority) return false;  // also the job itself
  return std::ranges::any_of(job.links, [&](const std::string& l) {
    return std::ranges::find(other.links, l) != other.links.end();
  });
}

ReportVerdict ApplyReport(JobState& job, RankState& rank, const proto::ProfileReport& report,
                          const ControllerConfig& controller, const PlanningConfig& planning,
                          int64_t now_ns, const OutrankingNeighbours& outranking) {
  ReportVerdict v;
  ++rank.reports;
  rank.last_seen_ns = now_ns;
  rank.clock_offset_ns = report.clock_offset_ns;
  rank.clock_error_ns = report.clock_error_ns;
  const uint64_t held = report.late > rank.late ? report.late - rank.late : 0;
  rank.timetable_version = report.timetable_version;
  rank.gated = report.gated;
  rank.late = report.late;
  rank.failed_open = report.failed_open;
  v.realigned = report.realigned > rank.realigned ? report.realigned - rank.realigned : 0;
  rank.realigned = report.realigned;
  v.yielded = report.yielded > rank.yielded ? report.yielded - rank.yielded : 0;
  v.yield_wait_ns =
      report.yield_wait_ns > rank.yield_wait_ns ? report.yield_wait_ns - rank.yield_wait_ns : 0;
  rank.yielded = report.yielded;
  rank.yield_wait_ns = report.yield_wait_ns;
  job.yielded += v.yielded;
  // A counter of all ranks' waits: it saturates rather than wraps (each rank's is only bounded
  // below).
  job.yield_wait_ns = SaturatingAdd(job.yield_wait_ns, v.yield_wait_ns);

  // Profile.
  // A period under the timetables' least (100 µs) is no rhythm a gate can keep: never planned.
  const bool usable = report.period_ns >= TimetableLimits{}.min_period_ns && report.comm_ns > 0 &&
                      report.comm_ns <= report.period_ns &&
                      report.confidence >= planning.min_confidence;
  if (usable) {
    if (!job.has_profile) v.first_profile = true;
    job.has_profile = true;
    // The ungated rhythm: the gate's mean hold per phase is not part of the job's period (else
    // a stretched job's profile would ratchet up to its stretched period).
    job.profile.period_ns = std::max(report.period_ns - report.hold_ns, report.comm_ns);
    job.profile.comm_ns = report.comm_ns;
    if (report.bytes_per_phase != job.profile.bytes_per_phase || job.profile.min_comm_ns == 0) {
      job.profile.min_comm_ns = report.comm_ns;
    } else {
      job.profile.min_comm_ns = std::min(job.profile.min_comm_ns, report.comm_ns);
    }
    job.profile.bytes_per_phase = report.bytes_per_phase;
    if (report.jitter_ns > 0) job.profile.jitter_ns = report.jitter_ns;
    if (report.compute_ns > 0) job.profile.compute_ns = report.compute_ns;
    job.confidence = report.confidence;
  }

  // Measured phases: ranks of one job report the same phases, so only starts clearly after the
  // last one recorded are new.
  std::span<const int64_t> starts = report.phase_starts_ns;
  std::vector<int64_t> sorted;  // shims send them oldest first; another sender may not
  if (!std::is_sorted(starts.begin(), starts.end())) {
    sorted.assign(starts.begin(), starts.end());
    std::sort(sorted.begin(), sorted.end());
    starts = sorted;
  }
  const int64_t min_gap = job.profile.period_ns > 0 ? job.profile.period_ns / 2 : 1'000'000;
  // An always-open timetable has no window to be late for (DecideGate lets every phase go).
  const bool judged =
      job.planned && !job.best_effort && job.timetable.version > 0 && !AlwaysOpen(job.timetable);
  uint32_t off_window = 0;
  for (int64_t s : starts) {
    if (job.last_phase_start_ns != 0 && s < job.last_phase_start_ns + min_gap) continue;
    MeasuredPhase ph;
    ph.start_ns = s;
    ph.duration_ns = job.profile.comm_ns;
    if (judged) {
      ph.lateness_ns = SignedLateness(job.timetable, s);
      // The cushion, plus what measurement cannot resolve: the rank's clock error bound or the
      // configured jitter allowance, whichever is larger (a gate releasing exactly at the
      // opening is reported microseconds to a millisecond later).
      const int64_t jitter = std::max<int64_t>(controller.lateness_jitter_us * 1'000,
                                               std::max<int64_t>(rank.clock_error_ns, 0));
      const int64_t tolerance = std::max<int64_t>(job.timetable.late_slack_ns, 0) + jitter;
      ph.late = ph.lateness_ns > tolerance || ph.lateness_ns < -tolerance;
      if (ph.late) ++off_window;
      constexpr double kAlpha = 0.2;
      job.lateness_ewma_ns =
          (1 - kAlpha) * job.lateness_ewma_ns + kAlpha * static_cast<double>(ph.lateness_ns);
    }
    job.phases.push_back(ph);
    job.last_phase_start_ns = s;
    ++v.new_phases;
    ++job.phases_seen;
  }
  while (job.phases.size() > controller.phase_history) job.phases.pop_front();
  v.late_phases = off_window + static_cast<uint32_t>(std::min<uint64_t>(held, 1'000'000));
  job.phases_late += v.late_phases;

  if (!job.planned || job.timetable.version == 0) return v;

  // Stale timetable at the rank (allow a report interval for a push in flight).
  if (rank.timetable_version < job.timetable.version &&
      now_ns - rank.last_push_ns > 2'000'000'000) {
    v.repush = true;
  }

  const bool cooled = now_ns - job.last_replan_ns >= controller.replan_cooldown_ms * 1'000'000;

  // Rule 2: changed profile.
  if (usable) {
    // With the bytes known, the window comes from the bytes and the link (planning.cpp), so
    // only the compute part (as the shim measured it, else period - comm) and the bytes describe
    // the job: the measured comm time also moves with contention and with how far apart the
    // ranks were released, which is not a change of the job. Without bytes, period and comm are
    // the profile.
    const double change =
        job.profile.bytes_per_phase > 0
            ? std::max({job.profile.compute_ns > 0 && job.planned_profile.compute_ns > 0
                            ? RelativeChange(job.profile.compute_ns, job.planned_profile.compute_ns)
                            : RelativeChange(
                                  job.profile.period_ns - job.profile.comm_ns,
                                  job.planned_profile.period_ns - job.planned_profile.comm_ns),
                        RelativeChange(static_cast<int64_t>(job.profile.bytes_per_phase),
                                       static_cast<int64_t>(job.planned_profile.bytes_per_phase)),
                        RelativeChange(job.profile.min_comm_ns, job.planned_profile.min_comm_ns)})
            : std::max(RelativeChange(job.profile.period_ns, job.planned_profile.period_ns),
                       RelativeChange(job.profile.comm_ns, job.planned_profile.comm_ns));
    if (change > controller.profile_change_threshold) {
      ++job.consecutive_changed_reports;
    } else {
      job.consecutive_changed_reports = 0;
    }
    if (job.consecutive_changed_reports >= controller.profile_change_reports && cooled) {
      v.decision = Decision::kReplanProfile;
      v.reason = "profile changed: period " + std::to_string(job.planned_profile.period_ns) +
                 " -> " + std::to_string(job.profile.period_ns) + " ns, comm " +
                 std::to_string(job.planned_profile.comm_ns) + " -> " +
                 std::to_string(job.profile.comm_ns) + " ns";
      job.consecutive_changed_reports = 0;
      job.consecutive_late_reports = 0;
      return v;
    }
  }

  // Rule 4 (rules.hpp): overrun. The floor moves to the measured phase when that is longer
  // than a gated window by the ratio, or (once set) when it is shorter than the floor by the
  // ratio squared: a band, so that phases that overlap drifting traffic only now and then do not
  // widen and narrow the window report after report. The shim's median phase covers its last 8
  // phases: judged only once twice as many ran under the current timetable at this rank (phases
  // learned ungated, under contention that the plan then removed, are no measure of a window).
  constexpr uint64_t kSettledPhases = 16;
  const bool settled = rank.timetable_version == job.timetable.version &&
                       job.phases_seen >= job.phases_at_timetable + kSettledPhases;
  if (usable && settled && controller.overrun_ratio > 0.0) {
    const Timetable& tt = job.timetable;
    // A window every other transfer on its links yields to is overrun only where a yielding
    // transfer was still on the wire when it opened: the job's own phase is its fastest.
    const int64_t phase = job.yielded_to && job.profile.min_comm_ns > 0
                              ? std::min(report.comm_ns, job.profile.min_comm_ns)
                              : report.comm_ns;
    const OverrunMove move = JudgeOverrun({phase, tt.window_ns, !job.best_effort && !AlwaysOpen(tt),
                                           job.overrun_refused_ns, job.profile.phase_floor_ns},
                                          controller.overrun_ratio);
    job.consecutive_overrun_reports =
        move != OverrunMove::kNone ? job.consecutive_overrun_reports + 1 : 0;
    const bool due = job.consecutive_overrun_reports >= controller.profile_change_reports;
    // A higher job spilling into this window is the overrun's likely cause: its own widening
    // comes first, and this one waits (the count stands, so it is taken once that job keeps to
    // its window and cushion). Looked up again once per interval of the job, on the report that
    // brings its phases: the other ranks' reports keep the verdict (a lookup may scan every job).
    // The wait is bounded: a job that spills for traffic the plan does not control may take
    // long to be widened itself, and meanwhile this job keeps a window it cannot keep.
    const uint32_t max_intervals = 2 * controller.profile_change_reports;
    std::string spilling;
    if (due && move == OverrunMove::kWiden && v.new_phases == 0 &&
        !job.overrun_deferred_to.empty()) {
      spilling = job.overrun_deferred_to;
    } else if (due && move == OverrunMove::kWiden && outranking &&
               job.overrun_deferred_intervals < max_intervals) {
      for (const JobState* other : outranking(job)) {
        if (SpillsPastCushion(*other)) {
          spilling = other->name;
          break;
        }
      }
    }
    if (spilling.empty()) {
      job.overrun_deferred_intervals = 0;
    } else if (v.new_phases > 0) {
      ++job.overrun_deferred_intervals;
    }
    job.overrun_deferred_to = spilling;
    v.overrun_deferred_to = spilling;
    if (due && spilling.empty() && cooled) {
      v.decision = Decision::kReplanOverrun;
      v.reason = "phases take " + std::to_string(report.comm_ns) + " ns in a " +
                 std::to_string(tt.window_ns) + " ns window";
      job.profile.phase_floor_ns = report.comm_ns;
      job.consecutive_overrun_reports = 0;
      job.consecutive_late_reports = 0;
      return v;
    }
  }

  // Rule 1: persistent lateness (best-effort jobs are never late: their window is always open).
  // Judged once per interval of the job, on the report that brings its phases first: every rank
  // reports the same phases and holds them at its own gate, so a rank's held count in a report
  // with no new phase repeats what an earlier rank's report already judged (one late interval
  // of an 8-rank job would otherwise count as eight late reports in a row).
  if (job.best_effort) return v;
  if (v.new_phases > 0) {
    const uint32_t judged_phases = std::max<uint32_t>(v.new_phases, v.late_phases);
    const double share = static_cast<double>(v.late_phases) / static_cast<double>(judged_phases);
    if (v.late_phases > 0 && share >= controller.late_fraction) {
      ++job.consecutive_late_reports;
    } else {
      job.consecutive_late_reports = 0;
    }
  }
  if (job.consecutive_late_reports >= controller.late_reports && cooled) {
    v.decision = Decision::kReplanLateness;
    v.reason = std::to_string(job.consecutive_late_reports) +
               " late reports in a row (lateness ewma " +
               std::to_string(static_cast<int64_t>(job.lateness_ewma_ns)) + " ns, slack " +
               std::to_string(job.timetable.late_slack_ns) + " ns)";
    job.consecutive_late_reports = 0;
  }
  return v;
}

PlanJob ToPlanJob(const JobState& job, int64_t now_ns) {
  PlanJob p;
  p.id = job.id;
  p.name = job.name;
  p.priority = job.priority;
  for (const auto& [r, rank] : job.ranks) p.nodes.push_back(rank.node);
  p.profile = job.profile;
  // Where its first window should open if it is placed now: its next phase after the plan and
  // the timetable's push (well under kPlanLead), so that the phase hardly waits for it.
  constexpr int64_t kPlanLead = 10'000'000;
  p.next_phase_ns = PredictNextPhase(job, now_ns + kPlanLead);
  return p;
}

void RecordPlanned(JobState& job, const PlanJob& planned) {
  job.planned_profile = planned.profile;
}

void RecordWidenRefused(JobState& job, const PlanJob& refused) {
  job.overrun_refused_ns = refused.profile.phase_floor_ns;
  job.profile.phase_floor_ns = job.planned_profile.phase_floor_ns;
}

bool AdoptSchedule(JobState& job, const JobSchedule& schedule, const TimetableConfig& config,
                   uint32_t& check) {
  Timetable tt = schedule.timetable;
  tt.late_slack_ns =
      static_cast<int64_t>(static_cast<double>(tt.late_slack_ns) * config.late_slack_scale);
  // The planner's max wait (period − window: a phase that missed its slack by less than a
  // window length goes at once rather than wait a whole period), capped by the config.
  tt.max_wait_ns = std::min(tt.max_wait_ns, config.max_wait_ms * 1'000'000);
  check = ValidateTimetable(tt);
  job.predicted_slowdown = schedule.predicted_slowdown;
  if ((check & kTimetableRejectMask) != 0) return false;
  YieldSet yields = schedule.yields ? *schedule.yields : YieldSet{};
  yields.epoch_ns = schedule.timetable.epoch_ns;
  yields.max_wait_ns = std::min(yields.max_wait_ns, config.max_wait_ms * 1'000'000);
  if ((ValidateYieldSet(yields) & kYieldRejectMask) != 0) yields = YieldSet{};
  const Timetable& old = job.timetable;
  tt.version = old.version;  // the same slot keeps its version
  job.yielded_to = schedule.yielded_to;
  if (job.planned && old == tt && job.yields == yields && job.best_effort == schedule.best_effort) {
    return false;
  }
  tt.version = old.version + 1;
  job.timetable = tt;
  job.yields = yields;
  job.planned = true;
  job.best_effort = schedule.best_effort;
  job.consecutive_late_reports = 0;
  job.consecutive_overrun_reports = 0;
  job.overrun_refused_ns = 0;  // a new slot: a widening may fit now
  job.overrun_deferred_to.clear();
  job.overrun_deferred_intervals = 0;
  job.phases_at_timetable = job.phases_seen;
  return true;
}

}  // namespace metronome::controller
