// Internal: the planner's working state, shared by the stages.
//
// A Workspace holds every job (resolved to the links it crosses and its rectangle on each), the
// job's current slot (gated at (T, φ), best-effort, or not yet placed) and, per link, the gated
// jobs on it and the chain of their periods. Its queries are the interval structure of the
// design: "at period T, which offsets of job j collide with no gated window on any of its links?"
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "contention.hpp"
#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner::detail {

inline constexpr std::int32_t kNoOwner = -1;

// The geometry of a job on its links: what stages 1–3 need, nothing else. On the circle a
// gated job reserves w + gap: its window and the minimum cushion after it.
struct JobShape {
  std::vector<LinkId> links;
  std::vector<double> height;  // per link: min(β, B_l)
  Nanos p = 0;                 // natural period
  Nanos w = 0;                 // window (communication time)
  Nanos t0 = 0;                // the shortest period it is gated at: P + jitter headroom
  Nanos headroom_t0 = 0;       // P + jitter headroom, also while a group stretch raises t0
  Nanos gap = 0;               // the least cushion kept free after each of its windows
  Nanos waiting_gap = 0;       // ... when its period is stretched past P + gap (gap_at)
  double weight = 1.0;         // π
  int priority = 0;
  std::int32_t self = kNoOwner;  // index of the job itself (its own windows are ignored)

  bool operator==(const JobShape&) const = default;
};

// The cushion a gated window of this shape keeps after it at period t. Its jitter cushion
// (3σ), unless t exceeds the natural period P by at least that much: then the job comes to its
// gate early by t − P on average and waits there every iteration, so its phases start at the
// window opening whatever the compute jitter, and it keeps 1σ (at least the clocks' error) for
// what still varies, its own phase. Two jobs of duty cycle 0.6 sharing a link, stretched to
// take turns, then need their windows and 1σ, not 3σ of idle wire each. (With the clocks'
// error alone, pairs that fill the link had no idle time left: a phase slowed at its start
// delayed the next window, and the overrun rule widened both: BERT pairs on T4 2 points worse.)
inline Nanos GapAt(const JobShape& shape, Nanos t) {
  return t - shape.p >= shape.gap ? shape.waiting_gap : shape.gap;
}

struct ResolvedJob {
  Job job;
  JobShape shape;
  bool alive = true;
};

enum class SlotState : std::uint8_t { kUnplaced, kGated, kBestEffort, kNoLinks };

struct Slot {
  SlotState state = SlotState::kUnplaced;
  Nanos period = 0;
  Nanos offset = 0;
  bool movable = true;  // stage 3 may slide it (it is new or moved in this round)
  // Where the job ran before this round (the "current plan"); has_prev = false for new jobs.
  bool has_prev = false;
  bool prev_gated = false;
  Nanos prev_period = 0;
  Nanos prev_offset = 0;
};

// A range of offsets [a, b] (closed; b may exceed T when the range wraps past 0) at which the
// job's windows collide with nothing. pred: the job whose window ends at a; succ: the job whose
// window starts at b + w (kNoOwner when unknown or when the range is unbounded).
struct FreeRange {
  Nanos a = 0;
  Nanos b = 0;
  std::int32_t pred = kNoOwner;
  std::int32_t succ = kNoOwner;
  bool unbounded = false;  // nothing else on the links: every offset is free
};

class Workspace {
 public:
  Workspace(Topology topology, PlannerOptions options);

  // Jobs --------------------------------------------------------------------------------------
  std::uint32_t AddJob(const Job& job);  // resolved, unplaced; returns its index
  void KillJob(std::uint32_t j);         // unplaces and forgets it (index stays reserved)
  [[nodiscard]] std::int32_t Find(JobId id) const;
  [[nodiscard]] JobShape ShapeFor(const Job& job) const;

  // Slots (the interval structure is updated here) --------------------------------------------
  void PlaceGated(std::uint32_t j, Nanos period, Nanos offset);
  // Best-effort: ungated at its natural period, its phase drifting against the windows.
  void PlaceBestEffort(std::uint32_t j);
  void Unplace(std::uint32_t j);
  // Unplaces many at once: past a few, the profiles of their links are rebuilt once when next
  // read (one sort of the link's windows) instead of merged once per job that leaves.
  void UnplaceAll(std::span<const std::uint32_t> js);
  void SetOffset(std::uint32_t j, Nanos offset);  // a gated job slides (stage 3)

  // Stage 1 helpers: harmonic periods (harmonic_periods.cpp) ----------------------------------
  // Candidate periods, ascending: P itself, then the harmonic ones T_i·k and T_i/k (exact) of
  // the periods on the shape's links, all within P ≤ T ≤ max_stretch·P.
  void CandidatePeriods(const JobShape& shape, std::vector<Nanos>& out) const;
  // Least common multiple of the gated periods on the link (0: none, or beyond the cap).
  [[nodiscard]] Nanos Hyperperiod(LinkId link) const;

  // The interval structure (occupancy.cpp) ----------------------------------------------------
  // Free offset ranges in [0, T) for the shape at period T, against all gated jobs but itself.
  // If only_link is set, that link alone is considered.
  void FreeRanges(const JobShape& shape, Nanos period, std::vector<FreeRange>& out,
                  std::int64_t only_link = -1) const;
  // The free range containing offset φ (which must be free), or nullopt-like: unbounded=true.
  [[nodiscard]] bool RangeContaining(const JobShape& shape, Nanos period, Nanos offset,
                                     FreeRange& out, std::int64_t only_link = -1) const;

  Topology topology;
  PlannerOptions options;
  std::vector<ResolvedJob> jobs;
  std::vector<Slot> slots;
  struct Occupant {
    std::uint32_t job;
    double height;  // the job's rectangle height on this link
    bool operator==(const Occupant&) const = default;
  };
  std::vector<std::vector<Occupant>> link_jobs;              // gated jobs per link
  std::vector<std::vector<std::uint32_t>> link_best_effort;  // best-effort jobs per link
  std::vector<std::vector<std::pair<Nanos, int>>> chains;    // per link: (period, count)
  std::unordered_map<JobId, std::uint32_t> index;
  std::vector<std::uint32_t> free_indices;  // indices of removed jobs, reused by add_job
  std::mt19937_64* rng = nullptr;           // set by the offline search: randomized choices

  // evaluate()'s memo of each link's contention model, by link: a change touches a few links,
  // and rebuilding the model of every link with best-effort traffic dominated the cost of a
  // snapshot on large clusters. An entry is reused only when its inputs are equal.
  // The stretches are computed when first asked for (NaN until then): a new job's entry asks
  // for its own, and on a link with m drifting jobs each costs a pass over the other m.
  struct ContentionMemo {
    bool valid = false;
    double capacity = 0.0;
    std::vector<GatedArc> arcs;
    std::vector<RandomLoad> random;
    std::optional<LinkContention> model;
    double overload = 0.0;
    std::vector<double> gated_stretch;   // per arc
    std::vector<double> random_stretch;  // per random load
  };
  mutable std::vector<ContentionMemo> contention_memo;

  // evaluate()'s memo of each shared link's cushions (late slack of each gated job on it): they
  // depend on the link's gated windows alone, and a change touches a few links, while the
  // free-range query behind each cushion dominated a snapshot of hundreds of jobs.
  struct WindowKey {
    JobId job;  // not the index: a rebuilt workspace (adopt, plan_all) keeps the memo valid
    Nanos period, offset, w, gap;
    double height;
    bool operator==(const WindowKey&) const = default;
  };
  struct SlackMemo {
    bool valid = false;
    double capacity = 0.0;
    std::vector<WindowKey> windows;  // the link's gated jobs, in link_jobs order
    std::vector<Nanos> slack;        // per gated job, same order
  };
  mutable std::vector<SlackMemo> slack_memo;

  // Reevaluate()'s memo: the last evaluation of this workspace, by job index and by link, and
  // what it was computed from. A round changes a few jobs' slots; only the links they are on
  // (and the entries that read those links) are evaluated again (evaluate.cpp).
  struct EvalMemo {
    struct JobKey {  // everything of job j that an evaluation reads
      bool alive = false;
      JobId id = 0;
      SlotState state = SlotState::kUnplaced;
      Nanos period = 0;
      Nanos offset = 0;
      JobShape shape;
      bool operator==(const JobKey&) const = default;
    };
    bool valid = false;
    std::vector<JobKey> jobs;      // by job index
    std::vector<JobPlan> entries;  // by job index (alive jobs only are read)
    std::vector<Nanos> slack;      // by job index: least cushion over its shared links
    std::vector<char> shares;      // by job index: shares a link with another gated job
    std::vector<double> extra;     // by job index: contention slowdown, max over its links
    std::vector<LinkPlan> links;   // by link
    std::vector<std::vector<Occupant>> link_jobs;              // as evaluated
    std::vector<std::vector<std::uint32_t>> link_best_effort;  // as evaluated
  };
  mutable EvalMemo eval_memo;

 private:
  struct Blocked {
    Nanos lo;
    Nanos hi;
    std::int32_t owner;
  };
  void Block(Nanos start, Nanos len, Nanos period, std::int32_t owner) const;
  void BlockLink(const JobShape& shape, std::size_t k, Nanos period) const;
  mutable std::vector<Blocked> blocked_;
  mutable bool all_blocked_ = false;
  mutable std::vector<std::pair<Nanos, double>> events_;
  struct Profile {  // a link's load over [0, q): (start, load) per segment
    Nanos q = 0;    // the link's hyperperiod; 0: stale (rebuilt at the next query)
    std::vector<std::pair<Nanos, double>> seg;
    bool coalesced = false;  // no two consecutive segments of the same load (AddWindows' output)
    // The highest load of each kPeakRun consecutive segments (empty: not yet computed since the
    // last change): BlockLink skips the runs that no window of the job it places could overload.
    std::vector<double> peaks;
  };
  static constexpr std::size_t kPeakRun = 8;
  static const std::vector<double>& Peaks(Profile& prof);
  mutable std::vector<Profile> profiles_;
  // The link's load over its hyperperiod from all its gated windows (profiles_[l], rebuilt when
  // stale).
  const Profile& LinkProfile(LinkId l) const;
  void WindowEvents(std::uint32_t j, double height, Nanos q) const;
  // out = in + job j's windows (its slot, width w + gap) at `height` (negative: taken out).
  void AddWindows(const Profile& in, std::uint32_t j, double height, Profile& out) const;
  void UpdateProfile(LinkId l, std::uint32_t j, double height, double sign) const;
};

// The most neighbours a job's arrival re-packs (RepackAround) or its departure re-examines
// (OnlinePlanner::RemoveJob), the first in placement order. Each re-placement sweeps the load
// profiles of the job's links, which grow with the jobs there: on a spine crossed by 300 jobs an
// unbounded repack made one arrival cost 7-14 ms (bench_planner, BmClusterAddRemove/300). A
// larger group is the offline search's (controller.offline_interval_ms), which plans the whole
// cluster again.
inline constexpr std::size_t kMaxLocalMoves = 32;

// Nanos helpers. lcm_capped returns 0 when the result would exceed kMaxHyperperiod.
inline constexpr Nanos kMaxHyperperiod = 10'000'000'000'000;  // ~2.8 hours
Nanos LcmCapped(Nanos a, Nanos b);
inline Nanos Mod(Nanos x, Nanos m) {
  const Nanos r = x % m;
  return r < 0 ? r + m : r;
}

// Stage entry points used by the planners (one file each).
// stage1_utilization.cpp: the placement order, and the smallest candidate period that fits.
std::vector<std::uint32_t> PlacementOrder(const Workspace& ws,
                                          const std::vector<std::uint32_t>& js);
struct Fit {
  Nanos period = 0;
  std::vector<FreeRange> ranges;
};
bool FirstFit(const Workspace& ws, const JobShape& shape, Fit& fit, Nanos max_period = 0);
// stage2_latency.cpp: the stage-2 cost of a slot and the decision for one job.
double StretchCost(const JobShape& shape, Nanos period);
double MoveCost(const Workspace& ws, std::uint32_t j, Nanos period, Nanos offset);
// The stage-2 cost of running the job ungated at P instead: its own expected slowdown from
// the windows it would meet, plus what it would cost them (both priority-weighted).
double UngatedCost(const Workspace& ws, const JobShape& shape);
// Whether gating the job (not placed) pays for its jitter headroom at all: that headroom, and
// that of the gated peers whose gates only it would make needed, cost less than `ungated`
// (UngatedCost). With no one to take turns with (ungated 0) it is gated: its entry opens it.
// Cost: O(1) where its own headroom decides; else a pass over its links' gated jobs, and for a
// peer alone on a link that does not overflow, that peer's links and their drifting jobs.
bool HeadroomPays(const Workspace& ws, const JobShape& shape, double ungated);
// The longest period worth gating the job at, given UngatedCost: a stretch beyond the jitter
// headroom must cost less than running ungated.
Nanos StretchBound(const Workspace& ws, const JobShape& shape, double ungated);
// Places job j (stage 1 + 2): stays, moves, or becomes best-effort. Returns true if it changed
// from its previous position.
bool PlaceJob(Workspace& ws, std::uint32_t j);
// stage3_cushion.cpp: slide movable jobs to spread the cushion; late slack of a gated job.
void RelaxCushions(Workspace& ws, const std::vector<std::uint32_t>& js, int sweeps);
Nanos LateSlack(const Workspace& ws, std::uint32_t j, std::int64_t only_link = -1);
// evaluate.cpp: the Plan (job entries, link entries, score) of the workspace, or one entry.
Plan Evaluate(const Workspace& ws);
// The same plan as Evaluate, evaluating again only the links whose jobs changed since the last
// Reevaluate of this workspace and the entries that read them (Workspace::eval_memo).
Plan Reevaluate(const Workspace& ws);
JobPlan JobEntry(const Workspace& ws, std::uint32_t j);
// Whether gated job j keeps the traffic of a drifting job of this shape out of its window on
// link l (it yields to j), and whether j's gate protects nothing (its entry then opens it).
bool ProtectsFrom(const Workspace& ws, std::uint32_t j, const JobShape& other, LinkId l);
bool NeedsNoGate(const Workspace& ws, std::uint32_t j);
// Whether the gated windows on link l could overflow it together (their heights add up to more
// than it): then they take turns, whatever else is there.
bool GatedOverflow(const Workspace& ws, LinkId l);
// Makes the job's present slot its "previous" position (it is running there now).
void MarkRunning(Workspace& ws, std::uint32_t j);

}  // namespace metronome::planner::detail
