// Who takes turns with whom (common/turn.hpp, docs/decisions/0029): the two jobs of each link
// that exactly two running jobs cross. The service and the simulator gather their running jobs
// here, each with its figures, and ask what each one's gate takes turns with.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "metronome/common/turn.hpp"
#include "metronome/controller/config.hpp"
#include "metronome/controller/job_state.hpp"

namespace metronome::controller {

// A job's figures for taking turns: its phase on the wire alone and its compute between phases,
// from its measured profile as the planner reads it (ToPlannerProfile, without the margins the
// plan adds), its natural period (their sum), and the pace of its phase alone (the planner's β).
struct TurnFigures {
  int64_t wire_ns = 0;
  int64_t compute_ns = 0;
  int64_t period_ns = 0;
  double beta_bps = 0.0;  // bytes per second
};

// Two jobs take turns on a link only where each alone uses at least this share of it. Served
// one after the other, the first finishes early by what sharing would have cost it and the
// second waits for the first's whole phase; that pays only while sharing would have slowed both
// nearly by half: for two equal phases at pace β on a link of capacity C, the sum of their ends
// is 3V/β in turn against 4V/C shared (from β = C/2 up, max-min), so turns win from β > 3C/4.
inline constexpr double kTurnsLinkShare = 0.75;

// The figures of `job` on links whose narrowest carries `bottleneck_bps`; none while it has no
// profile (or one that gives no usable figures).
[[nodiscard]] std::optional<TurnFigures> FiguresForTurns(const JobState& job, double bottleneck_bps,
                                                         const PlanningConfig& config);

// Whether a job's set moved enough from the one it has to be given the new one: other partners,
// or a figure by more than 5 % (a profile moves a little with every report).
[[nodiscard]] bool TurnsMoved(const TurnSet& now, const TurnSet& before);

// Whether the plan holds `job`'s phases to a window (planned, not best-effort, gated): the jobs
// ranked below it on its links yield to that window, and two such jobs are interleaved by their
// timetables (TwoJobLinks::TurnsFor gives neither kind of pair turns).
[[nodiscard]] bool HeldToAWindow(const JobState& job);

// When the sets are computed again, by the service and the simulator alike: at once after a
// job came or left or a plan moved a job's hold to a window (the sets follow from those), and
// at most once a second while profiles move (every report moves them a little; TurnsMoved keeps
// the sets from following every move).
class TurnsRefresh {
 public:
  static constexpr int64_t kProfilesEveryNs = 1'000'000'000;
  void JobsChanged() { jobs_ = true; }
  void ProfilesMoved() { profiles_ = true; }
  // A clock that stepped back since the last refresh makes it due too (else none for as long
  // as the step).
  [[nodiscard]] bool Due(int64_t now_ns) const {
    return jobs_ ||
           (profiles_ && (now_ns - refreshed_ns_ >= kProfilesEveryNs || now_ns < refreshed_ns_));
  }
  void Refreshed(int64_t now_ns) {
    jobs_ = false;
    profiles_ = false;
    refreshed_ns_ = now_ns;
  }

 private:
  bool jobs_ = false;
  bool profiles_ = false;
  int64_t refreshed_ns_ = 0;
};

class TwoJobLinks {
 public:
  using Capacities = std::unordered_map<std::string, double>;
  // A job's figures, given the links it was added with. Asked at most once per job, and only
  // for the jobs that cross a link with exactly one other: the index is rebuilt after every
  // join or leave, over every running job, and most jobs of a large cluster have no such link.
  using FiguresOf = std::function<std::optional<TurnFigures>(const JobState& job,
                                                             std::span<const std::string> links)>;

  // `capacity_bps`: the links' capacities (bytes per second) by name; a link without one is
  // taken as one that both of its jobs fill. It must outlive the index.
  TwoJobLinks(const Capacities& capacity_bps, FiguresOf figures)
      : capacity_bps_(capacity_bps), figures_of_(std::move(figures)) {
    by_link_.reserve(capacity_bps.size());  // no rehash while the jobs are added
  }

  // Counts `job` on each of `links` (the links it crosses). A job without figures still counts
  // there, but no job takes turns with it and it takes none. The job and its links must outlive
  // the index.
  void Add(const JobState& job, std::span<const std::string> links);

  // The partners of the added `job`: on each of its links that it and exactly one other added
  // job cross, that job, when it ranks at or above `job`, has figures, each of the two alone
  // uses kTurnsLinkShare of the link, and the plan does not keep the two apart already (a gated
  // job ranked above: `job` yields to its window; both gated: their timetables interleave them);
  // at most kMaxTurnPartners, in the order of `job`'s links. Their edges (begun, ended) are left
  // for whoever keeps the set to fill in as they are relayed. Empty (count 0) when `job` has no
  // figures or no partner.
  [[nodiscard]] TurnSet TurnsFor(const JobState& job) const;

 private:
  struct Entry {
    std::span<const std::string> links;
    mutable bool figured = false;  // figures asked for (FiguresOf), once
    mutable std::optional<TurnFigures> figures;
  };
  // The jobs that cross one link: the first two, and how many.
  struct Crossing {
    const JobState* first = nullptr;
    const JobState* second = nullptr;
    uint32_t count = 0;
  };
  [[nodiscard]] const std::optional<TurnFigures>& Figures(const JobState& job,
                                                          const Entry& entry) const;
  // Whether each of two jobs alone fills `link` enough for turns to pay (kTurnsLinkShare).
  [[nodiscard]] bool BothFill(const std::string& link, const TurnFigures& a,
                              const TurnFigures& b) const;

  const Capacities& capacity_bps_;
  FiguresOf figures_of_;
  std::unordered_map<std::string_view, Crossing> by_link_;
  std::unordered_map<uint64_t, Entry> jobs_;
};

}  // namespace metronome::controller
