// The fluid engine: jobs, their phases and gates, placement and the max-min rates
// (docs/simulator.md); the figures of a run are results.cpp's.
#include "metronome/sim/simulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <random>
#include <stdexcept>

#include "engine_job.hpp"
#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"
#include "metronome/sim/flow_network.hpp"
#include "metronome/sim/placement.hpp"

namespace metronome::sim {

namespace {

using engine::Job;
using engine::kInf;
using engine::LinkTotals;
using engine::State;

constexpr double kEps = 1e-9;  // seconds: events closer than this are simultaneous

std::uint64_t SplitMix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::int64_t ToNs(double s) {
  return std::llround(s * 1e9);
}

// The clock the simulated shims and scheduler read (TimeScheduler's now_ns, the gates' time):
// simulated seconds from a CLOCK_REALTIME reading, so that their arithmetic meets the sizes of
// the real system's clock (a yield set taken from the service's epoch 0 at a time near 0 hid
// that the gate could not use it at a real one: docs/decisions/0024).
constexpr std::int64_t kClockBaseNs = 1'800'000'000'000'000'000;  // January 2027
std::int64_t ClockNs(double s) {
  return kClockBaseNs + ToNs(s);
}
double FromClockNs(std::int64_t ns) {
  return static_cast<double>(ns - kClockBaseNs) * 1e-9;
}

class Engine {
 public:
  Engine(const Scenario& s, const PolicyConfig& p, const RunOptions& o)
      : scenario_(s),
        policy_(p),
        options_(o),
        cluster_(Cluster::FromScenario(s)),
        network_(Capacities(cluster_), policy_.sharing) {
    models_ = DefaultModelLookup();
    free_gpus_.resize(cluster_.nodes.size());
    for (std::size_t n = 0; n < cluster_.nodes.size(); ++n) free_gpus_[n] = cluster_.nodes[n].gpus;
    std::mt19937_64 skew_rng(SplitMix(s.seed ^ 0x5eedc10cull));
    std::uniform_real_distribution<double> skew(-s.noise.clock_skew_us, s.noise.clock_skew_us);
    for (std::size_t n = 0; n < cluster_.nodes.size(); ++n) {
      skew_ns_.push_back(s.noise.clock_skew_us > 0 ? std::llround(skew(skew_rng) * 1e3) : 0);
    }
    placement_rng_.seed(SplitMix(s.seed ^ 0x91ace11ull));
    jobs_.resize(s.jobs.size());
    for (std::size_t i = 0; i < s.jobs.size(); ++i) {
      Job& j = jobs_[i];
      j.spec = &s.jobs[i];
      j.index = i;
      j.rng.seed(SplitMix(s.seed * 1000003ull + i + 1));
      j.slow_rng.seed(SplitMix(s.seed * 2000003ull + i + 5));
      std::mt19937_64 prng(SplitMix(s.seed * 7919ull + i + 17));
      if (s.noise.start_jitter_s > 0) {
        j.start_delay = std::uniform_real_distribution<double>(0.0, s.noise.start_jitter_s)(prng);
      }
      if (s.noise.profile_error > 0) {
        j.profile_factor = 1.0 + std::uniform_real_distribution<double>(
                                     -s.noise.profile_error, s.noise.profile_error)(prng);
      }
      total_iterations_ += static_cast<double>(s.jobs[i].iterations);
    }
    link_rate_.assign(cluster_.links.size(), 0.0);
    link_flows_.assign(cluster_.links.size(), 0);
    link_settled_.assign(cluster_.links.size(), 0.0);
    totals_.transfer_s.assign(cluster_.links.size(), 0.0);
    totals_.overlap_s.assign(cluster_.links.size(), 0.0);
    totals_.bytes.assign(cluster_.links.size(), 0.0);
    link_users_.assign(cluster_.links.size(), 0);
    totals_.busy_s.assign(cluster_.links.size(), 0.0);
    link_busy_since_.assign(cluster_.links.size(), 0.0);
    scheduler_ = MakeTimeScheduler(policy_, cluster_, jobs_.size());
    relay_s_ = scheduler_ ? policy_.turn_relay_ms * 1e-3 : -1.0;
  }

  RunResult Run() {
    const auto wall0 = std::chrono::steady_clock::now();
    std::vector<std::size_t> order(jobs_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return jobs_[a].spec->arrival_s < jobs_[b].spec->arrival_s;
    });
    std::size_t next_arrival = 0;
    std::size_t done = 0;
    double last_progress = -1.0;
    while (done < jobs_.size()) {
      // NOLINTBEGIN(bugprone-narrowing-conversions): clang-tidy 14 reports `c ? x : infinity`
      // as a narrowing from double to double.
      double t_next =
          next_arrival < order.size() ? jobs_[order[next_arrival]].spec->arrival_s : kInf;
      // NOLINTEND(bugprone-narrowing-conversions)
      DropStaleEvents();
      if (!events_due_.empty()) t_next = std::min(t_next, events_due_.top().t);
      if (t_next == kInf) {
        throw std::runtime_error("job '" + jobs_[queue_.front()].spec->name +
                                 "' can never be placed (not enough free GPUs)");
      }
      now_ = std::max(now_, t_next);
      ++events_;
      bool placement_needed = false;
      while (next_arrival < order.size() &&
             jobs_[order[next_arrival]].spec->arrival_s <= now_ + kEps) {
        Job& j = jobs_[order[next_arrival++]];
        j.state = State::kQueued;
        queue_.push_back(j.index);
        placement_needed = true;
      }
      // Phase transitions due now, in job index order (deterministic).
      due_.clear();
      for (DropStaleEvents(); !events_due_.empty() && events_due_.top().t <= now_ + kEps;
           DropStaleEvents()) {
        due_.push_back(events_due_.top().job);
        events_due_.pop();
      }
      std::sort(due_.begin(), due_.end());
      for (std::size_t i : due_) {
        if (Advance(jobs_[i])) {
          ++done;
          placement_needed = true;
        }
        Schedule(jobs_[i]);
      }
      if (placement_needed) PlaceQueued();
      if (scheduler_ && scheduler_->YieldsVersion() != yields_version_) SplitPhasesInFlight();
      UpdateRates();
      if (options_.progress) {
        const double frac = done_iterations_ / std::max(1.0, total_iterations_);
        if (frac - last_progress >= 0.002) {
          options_.progress(frac);
          last_progress = frac;
        }
      }
    }
    // Flush link accounting.
    for (std::uint32_t l = 0; l < link_users_.size(); ++l) {
      SettleLink(l);
      if (link_users_[l] > 0) totals_.busy_s[l] += now_ - link_busy_since_[l];
    }
    RunResult r = CollectResults(policy_.name, jobs_, cluster_, totals_);
    r.summary.events = events_;
    if (scheduler_) r.scheduler = scheduler_->Stats();
    r.summary.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return r;
  }

 private:
  // Moves a job past its current phase end. Returns true when the job finished.
  bool Advance(Job& j) {
    switch (j.state) {
      case State::kCompute:
        EnterGate(j);
        return false;
      case State::kGate:
        if (HoldForTurn(j)) return false;
        j.sum_gate += now_ - j.gate_enter;
        StartComm(j);
        return false;
      case State::kLaunch:
        StartCompute(j);
        return false;
      case State::kComm:
        if (j.stop_at > 0) return NextCollective(j);
        return EndIteration(j);
      case State::kYield:
        AddFlow(j);
        return false;
      case State::kLocalComm:
        return EndIteration(j);
      default:
        return false;
    }
  }

  void StartCompute(Job& j) {
    j.state = State::kCompute;
    j.iter_start = now_;
    double factor = 1.0;
    const double jitter = j.spec->compute_jitter.value_or(scenario_.noise.compute_jitter);
    if (jitter > 0) factor = std::max(0.1, 1.0 + jitter * j.jitter(j.rng));
    j.compute_this = j.compute_s * factor;
    j.phase_end = now_ + j.compute_this;
  }

  void EnterGate(Job& j) {
    j.gate_enter = now_;
    j.obs = IterationObservation{};
    j.obs.compute_ns = ToNs(j.compute_this);
    const Timetable* tt =
        scheduler_ && !j.links.empty() ? scheduler_->GateTimetable(j.index) : nullptr;
    if (tt == nullptr) {
      if (!HoldForTurn(j)) StartComm(j);
      return;
    }
    const YieldSet* yields = scheduler_->GateYields(j.index);
    if (yields == nullptr) yields = &kNoYields;
    // The phase's first collective yields for its own share (the rest yield one by one).
    const double collectives = Collectives(j);
    const auto gradient = static_cast<std::uint64_t>(Gradient(j));
    const auto first_bytes = static_cast<std::uint64_t>(Gradient(j) / collectives);
    const auto first_need = PacedNeed(*yields, j.pace, first_bytes, gradient);
    const std::int64_t rest = PhaseRest(*yields, j.pace, first_bytes, 0, gradient);
    if (!AlwaysOpen(*tt)) {  // the report's gated share counts the phases a gate could hold
      j.sum_period += static_cast<double>(tt->period_ns) * 1e-9;
      ++j.gated_phases;
    }
    // Every rank runs the shim's gate on its own node's clock; the all-reduce starts when the
    // last rank is released.
    const std::int64_t now_ns = ClockNs(now_);
    std::int64_t release_ns = now_ns;
    bool first = true;
    // The shim's gate memory, one per job (its ranks see the same timetable and lateness).
    const bool realign = MustRealign(j.gate_memory);
    bool first_realigned = false;
    for (std::uint32_t n : j.nodes) {
      const std::int64_t local = now_ns + skew_ns_[n];
      // The shim's gate with its default wait cap (METRONOME_MAX_WAIT_MS).
      const GateDecision d = DecideRankedGate(*tt, *yields, local, kDefaultMaxWaitCapNs, realign,
                                              first_need, nullptr, rest);
      if (d.yielded) j.obs.yielded = true;
      if (first) {
        j.obs.lateness_ns = d.lateness_ns;
        j.obs.late = CountsLate(d, *tt);
        first_realigned = d.realigned;
        first = false;
      }
      if (d.action == GateAction::kWaitUntil) {
        release_ns = std::max(release_ns, d.until_ns - skew_ns_[n]);
        j.obs.waited = true;
      } else if (d.action == GateAction::kFailOpen) {
        j.obs.failed_open = true;
      }
    }
    if (j.obs.failed_open) ++j.fail_opens;
    Remember(j.gate_memory, first_realigned);
    j.obs.realigned = first_realigned;
    const double release = FromClockNs(release_ns);
    if (release <= now_ + kEps) {
      if (!HoldForTurn(j)) StartComm(j);
      return;
    }
    j.state = State::kGate;
    j.phase_end = release;
    if (j.obs.yielded) {
      ++j.yields;
      j.sum_yield += release - now_;
    }
  }

  // The latest release over the job's ranks of the yield of a collective inside its phase
  // (each rank's shim decides on its own node's clock; the all-reduce goes when the last does).
  double YieldRelease(const Job& j, const YieldSet& y, std::int64_t need, std::int64_t rest) const {
    const std::int64_t now_ns = ClockNs(now_);
    std::int64_t release_ns = now_ns;
    for (std::uint32_t n : j.nodes) {
      const GateDecision d =
          DecideYield(y, now_ns + skew_ns_[n], need, kDefaultMaxWaitCapNs, nullptr, rest);
      if (d.action == GateAction::kWaitUntil) {
        release_ns = std::max(release_ns, d.until_ns - skew_ns_[n]);
      }
    }
    return FromClockNs(release_ns);
  }

  // One collective of a yielding phase ended: the next one yields to the higher-ranked windows.
  bool NextCollective(Job& j) {
    j.remaining = j.stop_at;
    j.rate_t = now_;
    const auto bytes = CollectiveGradient(j);
    UpdatePace(j.pace, bytes, ToNs(now_ - j.collective_start));
    j.stop_at -= j.collective_bytes;
    if (j.stop_at < 1e-6 * j.collective_bytes) j.stop_at = 0.0;
    j.collective_start = now_;
    const YieldSet* y = scheduler_->GateYields(j.index);
    if (y == nullptr) return false;
    // What the phase's collectives before this one carried (j.remaining is what is left).
    const auto gradient = static_cast<std::uint64_t>(Gradient(j));
    const auto issued =
        static_cast<std::uint64_t>(Gradient(j) * std::max(0.0, 1.0 - j.remaining / j.volume));
    const double release = YieldRelease(j, *y, PacedNeed(*y, j.pace, bytes, gradient),
                                        PhaseRest(*y, j.pace, bytes, issued, gradient));
    if (release <= now_ + kEps) return false;
    RemoveFlow(j);
    j.state = State::kYield;
    j.phase_end = release;
    j.pause_s += release - now_;
    ++j.yields;
    j.sum_yield += release - now_;
    return false;
  }

  // The gate let the phase go; it still holds for a partner's turn where the shared decision
  // says so (common/turn.hpp), on the edges relayed to the job by now, and asks again when the
  // next one arrives (WakeForTurn) or the decision's time runs out. True while it holds.
  bool HoldForTurn(Job& j) {
    if (relay_s_ < 0 || j.links.empty()) return false;
    const TurnSet* turns = scheduler_->GateTurns(j.index);
    if (turns == nullptr) return false;
    TurnSet seen = *turns;
    for (std::uint32_t i = 0; i < seen.count; ++i) {
      const Job& p = jobs_[seen.partners[i].job];
      seen.partners[i].begun_ns = SeenEdge(p.begun);
      seen.partners[i].ended_ns = SeenEdge(p.ended);
    }
    const TurnDecision d = DecideTurn(seen, ClockNs(j.gate_enter), ClockNs(now_),
                                      kDefaultMaxWaitCapNs, j.turns_in_a_row);
    if (!d.hold) return false;
    if (!j.held_for_turn) {
      j.held_for_turn = true;
      j.turn_hold_start = now_;
      ++j.yields;
    }
    j.state = State::kGate;
    j.phase_end = FromClockNs(d.until_ns);
    // A partner's phase end that is on its way asks again when it arrives (later ones:
    // WakeForTurn).
    for (std::uint32_t i = 0; i < seen.count; ++i) {
      const double end = jobs_[seen.partners[i].job].ended[0];
      if (end >= 0 && end + relay_s_ > now_ + kEps) {
        j.phase_end = std::min(j.phase_end, end + relay_s_);
      }
    }
    return true;
  }

  // The latest of a job's two last edges relayed by now (scheduler clock; 0: none).
  [[nodiscard]] std::int64_t SeenEdge(const double (&edges)[2]) const {
    for (const double t : edges) {
      if (t >= 0 && t + relay_s_ <= now_ + kEps) return ClockNs(t);
    }
    return 0;
  }

  // The job's phase ended: a partner holding for its turn asks again when that is relayed.
  void WakeForTurn(const Job& j) {
    for (const std::size_t i : running_) {
      Job& b = jobs_[i];
      if (b.state != State::kGate || !b.held_for_turn || b.phase_end <= now_ + relay_s_) continue;
      const TurnSet* turns = scheduler_->GateTurns(b.index);
      if (turns == nullptr) continue;
      for (std::uint32_t k = 0; k < turns->count; ++k) {
        if (turns->partners[k].job != j.index) continue;
        b.phase_end = now_ + relay_s_;
        Schedule(b);
        break;
      }
    }
  }

  static void Edge(double (&edges)[2], double t) {
    edges[1] = edges[0];
    edges[0] = t;
  }

  void StartComm(Job& j) {
    j.turns_in_a_row = j.held_for_turn ? j.turns_in_a_row + 1 : 0;
    if (j.held_for_turn) {
      j.sum_yield += now_ - j.turn_hold_start;
      j.held_for_turn = false;
    }
    j.comm_start = now_;
    if (j.links.empty()) {
      j.state = State::kLocalComm;
      j.phase_end = now_ + j.volume / cluster_.intra_node_bytes_per_s;
      return;
    }
    Edge(j.begun, now_);
    j.remaining = j.volume;
    const Noise& noise = scenario_.noise;
    if (noise.slow_phase_p > 0 &&
        std::uniform_real_distribution<double>(0.0, 1.0)(j.slow_rng) < noise.slow_phase_p) {
      j.remaining *=
          std::uniform_real_distribution<double>(1.0, noise.slow_phase_factor)(j.slow_rng);
    }
    // A job that yields runs its phase as the collectives DDP would call (kBucketBytes of
    // gradient each), each issued in parts by the shim when the job sets a chunk size
    // (METRONOME_CHUNK_KIB; common's ChunkParts), and pauses between them for higher-ranked
    // windows (NextCollective).
    j.collective_bytes = 0.0;
    j.stop_at = 0.0;
    j.pause_s = 0.0;
    j.phase_bytes = j.remaining;
    if (scheduler_ && scheduler_->GateYields(j.index) != nullptr) SplitPhase(j);
    AddFlow(j);
  }

  // The phase in flight as its collectives: the one on the wire ends at its boundary, where
  // the next one yields (NextCollective). A phase of one collective, or in its last, stays as
  // it is. A phase that no set held starts as one transfer (the same on the wire while nothing
  // pauses it, and far fewer events); it is split when a set arrives.
  void SplitPhase(Job& j) {
    const double collectives = Collectives(j);
    if (collectives <= 1 || j.collective_bytes > 0) return;
    const double part = j.phase_bytes / collectives;
    const double done = j.phase_bytes - j.remaining;
    const double boundary = (std::floor(done / part + 1e-9) + 1.0) * part;
    if (boundary >= j.phase_bytes * (1 - 1e-9)) return;
    j.collective_bytes = part;
    j.stop_at = j.phase_bytes - boundary;
    // When the one on the wire started, at its rate so far (its pace counts from there).
    j.collective_start = j.rate > 0 ? now_ - (done - (boundary - part)) / j.rate : now_;
  }

  // Some job's yield set may have changed (a plan, a shim that starts or stops gating): each
  // phase in flight as one transfer that now has a set is split, so that its next collective
  // yields, as the shim's next part would (it issues every part through the gate, which reads
  // the set in force then).
  void SplitPhasesInFlight() {
    yields_version_ = scheduler_->YieldsVersion();
    for (const std::size_t i : running_) {
      Job& j = jobs_[i];
      if (j.state != State::kComm || j.collective_bytes > 0 || j.links.empty()) continue;
      if (scheduler_->GateYields(j.index) == nullptr) continue;
      j.remaining = std::max(0.0, j.remaining - j.rate * (now_ - j.rate_t));
      j.rate_t = now_;
      SplitPhase(j);
      if (j.collective_bytes > 0) Schedule(j);
    }
  }

  static double Gradient(const Job& j) {
    if (j.spec->gpus <= 1) return j.volume;
    return j.volume * j.spec->gpus / (2.0 * (j.spec->gpus - 1));
  }
  // The all-reduce calls of one phase as the shim issues them: its gradient in DDP buckets (at
  // least one), each in the parts the job's chunk size makes of it.
  static double Collectives(const Job& j) {
    if (j.spec->gpus <= 1) return 1.0;
    const double buckets = std::max(1.0, std::ceil(Gradient(j) / engine::kBucketBytes));
    const auto bucket = static_cast<std::uint64_t>(Gradient(j) / buckets);
    return buckets * static_cast<double>(ChunkParts(bucket, j.spec->chunk_bytes));
  }
  // The gradient bytes of the collective in flight (the phase's, when it is one collective).
  static std::uint64_t CollectiveGradient(const Job& j) {
    const double share = j.collective_bytes > 0 ? j.collective_bytes / j.volume : 1.0;
    return static_cast<std::uint64_t>(Gradient(j) * share);
  }

  void AddFlow(Job& j) {
    j.collective_start = now_;
    j.state = State::kComm;
    j.rate = 0.0;
    j.rate_t = now_;
    j.phase_end = kInf;
    network_.Add(static_cast<std::uint32_t>(j.index), j.links, TrafficClass(j.spec->priority));
  }

  void RemoveFlow(Job& j) {
    network_.Remove(static_cast<std::uint32_t>(j.index));
    j.rate = 0.0;
  }

  bool EndIteration(Job& j) {
    if (j.state == State::kComm) {
      RemoveFlow(j);
      Edge(j.ended, now_);
      if (relay_s_ >= 0) WakeForTurn(j);
    }
    if (j.collective_bytes > 0) {
      UpdatePace(j.pace, CollectiveGradient(j), ToNs(now_ - j.collective_start));
    }
    j.sum_comm += now_ - j.comm_start;
    j.obs.comm_ns = ToNs(now_ - j.comm_start);
    j.obs.hold_ns = ToNs(j.comm_start - j.gate_enter);
    j.obs.pause_ns = ToNs(j.pause_s);
    j.sum_iter += now_ - j.iter_start;
    ++j.iter;
    done_iterations_ += 1.0;
    if (scheduler_) scheduler_->IterationDone(j.index, j.obs, ClockNs(now_));
    if (j.iter >= j.spec->iterations) {
      Finish(j);
      return true;
    }
    StartCompute(j);
    return false;
  }

  void Finish(Job& j) {
    j.state = State::kDone;
    j.finish_s = now_;
    j.phase_end = kInf;
    if (scheduler_) {
      j.best_effort = scheduler_->BestEffort(j.index);
      if (const Timetable* tt = scheduler_->CurrentTimetable(j.index)) j.last_tt = *tt;
    }
    for (const auto& [n, g] : j.placement.node_gpus) free_gpus_[n] += g;
    for (std::uint32_t l : j.links) {
      if (--link_users_[l] == 0) totals_.busy_s[l] += now_ - link_busy_since_[l];
    }
    running_.erase(std::find(running_.begin(), running_.end(), j.index));
    if (scheduler_) scheduler_->JobFinished(j.index, ClockNs(now_));
  }

  void ResolveFigures(Job& j) {
    const JobSpec& s = *j.spec;
    double compute_ms = s.compute_ms;
    double gradient_mb = s.gradient_mb;
    if (compute_ms <= 0 || gradient_mb <= 0) {
      // Heterogeneous placement: the job runs at the pace of its slowest GPU.
      double slowest = 0.0;
      for (const auto& [n, g] : j.placement.node_gpus) {
        const ModelFigures f = models_(s.model, cluster_.nodes[n].gpu);
        slowest = std::max(slowest, f.compute_ms);
        if (gradient_mb <= 0) gradient_mb = f.gradient_mb;
      }
      if (compute_ms <= 0) compute_ms = slowest;
    }
    j.compute_s = compute_ms * 1e-3;
    const double n = static_cast<double>(s.gpus);
    const double size = gradient_mb * 1e6;
    j.volume = n > 1 ? 2.0 * (n - 1.0) / n * size : 0.0;
    j.bottleneck_bytes_per_s = kInf;
    for (std::uint32_t l : j.links) {
      j.bottleneck_bytes_per_s =
          std::min(j.bottleneck_bytes_per_s, cluster_.links[l].capacity_bytes_per_s);
    }
    if (j.links.empty()) j.bottleneck_bytes_per_s = cluster_.intra_node_bytes_per_s;
    j.natural_s = j.compute_s + j.volume / j.bottleneck_bytes_per_s;
  }

  void PlaceQueued() {
    for (auto it = queue_.begin(); it != queue_.end();) {
      Job& j = jobs_[*it];
      const std::vector<int>* free_gpus = &free_gpus_;
      if (!j.spec->gpu.empty()) {
        // Node selector: nodes of other GPU types look full.
        masked_ = free_gpus_;
        for (std::size_t n = 0; n < masked_.size(); ++n) {
          if (cluster_.nodes[n].gpu != j.spec->gpu) masked_[n] = 0;
        }
        free_gpus = &masked_;
      }
      std::optional<Placement> p;
      if (!j.spec->nodes.empty()) {
        p = PlacePinned(cluster_, *free_gpus, *j.spec);
      } else if (policy_.placement == static_cast<int>(PlacementKind::kScored) && scheduler_) {
        p = PlaceScored(j, *free_gpus);
      } else {
        p = PlaceJob(static_cast<PlacementKind>(policy_.placement), cluster_, *free_gpus, *j.spec,
                     placement_rng_);
      }
      if (!p) {
        ++it;
        continue;
      }
      it = queue_.erase(it);
      Start(j, std::move(*p));
    }
  }

  std::optional<Placement> PlaceScored(Job& j, const std::vector<int>& free_gpus) {
    std::vector<Placement> candidates = PackCandidates(cluster_, free_gpus, *j.spec);
    if (candidates.empty()) return std::nullopt;
    // At least as network-aware as Pack: only the candidates that cross no more links than
    // Pack's own choice (the first) are scored; the time scheduler then picks among them.
    const std::size_t fewest = cluster_.LinksCrossed(candidates.front().Nodes()).size();
    std::erase_if(candidates, [&](const Placement& c) {
      return cluster_.LinksCrossed(c.Nodes()).size() > fewest;
    });
    if (candidates.size() == 1) return std::move(candidates.front());
    std::vector<ActiveJob> views;
    for (const Placement& c : candidates) {
      j.placement = c;
      j.nodes = c.Nodes();
      j.links = cluster_.LinksCrossed(j.nodes);
      ResolveFigures(j);
      views.push_back(View(j));
    }
    const std::vector<double> cost = scheduler_->ScorePlacements(views);
    std::size_t best = 0;
    for (std::size_t i = 1; i < cost.size(); ++i) {
      if (cost[i] < cost[best] - 1e-9) best = i;
    }
    return std::move(candidates[best]);
  }

  ActiveJob View(const Job& j) const {
    ActiveJob a;
    a.index = j.index;
    a.priority = j.spec->priority;
    a.nodes = j.nodes;
    a.links = j.links;
    a.compute_ns = ToNs(j.compute_s * j.profile_factor);
    a.jitter_ns =
        ToNs(j.compute_s * j.spec->compute_jitter.value_or(scenario_.noise.compute_jitter));
    a.comm_ns = ToNs(j.volume / j.bottleneck_bytes_per_s);
    a.beta_bytes_per_s = j.bottleneck_bytes_per_s;
    a.volume_bytes = j.volume;
    a.gradient_bytes = j.spec->gpus > 1 ? j.volume * j.spec->gpus / (2.0 * (j.spec->gpus - 1)) : 0;
    for (const auto& [n, g] : j.placement.node_gpus) a.rank_nodes.insert(a.rank_nodes.end(), g, n);
    a.start_delay_ns = ToNs(j.start_delay);
    return a;
  }

  void Start(Job& j, Placement p) {
    j.placement = std::move(p);
    for (const auto& [n, g] : j.placement.node_gpus) free_gpus_[n] -= g;
    j.nodes = j.placement.Nodes();
    j.links = cluster_.LinksCrossed(j.nodes);
    ResolveFigures(j);
    for (std::uint32_t l : j.links) {
      if (link_users_[l]++ == 0) link_busy_since_[l] = now_;
    }
    j.start_s = now_;
    running_.push_back(j.index);
    if (scheduler_) scheduler_->JobStarted(View(j), ClockNs(now_));
    if (j.start_delay > 0) {
      // Launching: an idle phase that ends in the first compute phase.
      j.state = State::kLaunch;
      j.phase_end = now_ + j.start_delay;
    } else {
      StartCompute(j);
    }
    Schedule(j);
  }

  static std::vector<double> Capacities(const Cluster& c) {
    std::vector<double> capacity;
    capacity.reserve(c.links.size());
    for (const auto& l : c.links) capacity.push_back(l.capacity_bytes_per_s);
    return capacity;
  }

  // The job's next phase end in the event queue (none while it waits for bandwidth or is done);
  // the entry it had before is stale from now on.
  void Schedule(Job& j) {
    ++j.event_seq;
    const double t = j.state == State::kComm ? j.CommEnd() : j.phase_end;
    if (t < kInf) events_due_.push(Event{t, j.index, j.event_seq});
  }

  void DropStaleEvents() {
    while (!events_due_.empty() &&
           events_due_.top().seq != jobs_[events_due_.top().job].event_seq) {
      events_due_.pop();
    }
  }

  // Adds what a link carried since its last change to its totals.
  void SettleLink(std::uint32_t l) {
    const double dt = now_ - link_settled_[l];
    if (link_flows_[l] > 0) {
      totals_.bytes[l] += link_rate_[l] * dt;
      totals_.transfer_s[l] += dt;
      if (link_flows_[l] >= 2) totals_.overlap_s[l] += dt;
    }
    link_settled_[l] = now_;
  }

  // The rates after this event's transfer starts and ends: only the transfers whose rate changed
  // settle the bytes they moved and get a new completion time.
  void UpdateRates() {
    network_.Resolve();
    for (const std::uint32_t l : network_.ChangedLinks()) {
      SettleLink(l);
      link_rate_[l] = network_.LinkRate(l);
      link_flows_[l] = network_.LinkFlows(l);
    }
    for (const std::uint32_t id : network_.ChangedFlows()) {
      Job& j = jobs_[id];
      j.remaining = std::max(0.0, j.remaining - j.rate * (now_ - j.rate_t));
      j.rate_t = now_;
      j.rate = network_.Rate(id);
      Schedule(j);
    }
  }

  const Scenario& scenario_;
  PolicyConfig policy_;
  RunOptions options_;
  Cluster cluster_;
  ModelLookup models_;
  std::unique_ptr<TimeScheduler> scheduler_;
  std::vector<Job> jobs_;
  std::vector<int> free_gpus_;
  std::vector<int> masked_;
  std::vector<std::int64_t> skew_ns_;
  std::mt19937_64 placement_rng_;
  std::deque<std::size_t> queue_;
  std::vector<std::size_t> running_;
  std::vector<std::size_t> due_;
  // Phase ends by time; an entry whose seq is not its job's event_seq any more is stale.
  struct Event {
    double t;
    std::size_t job;
    std::uint64_t seq;
    bool operator>(const Event& o) const { return t > o.t; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_due_;
  FlowNetwork network_;
  // Each link's rate and transfer count since link_settled_ (the network's, as of then).
  std::vector<double> link_rate_;
  std::vector<int> link_flows_;
  std::vector<double> link_settled_;
  std::vector<int> link_users_;
  LinkTotals totals_;  // the figures per link
  std::vector<double> link_busy_since_;
  double now_ = 0.0;
  double relay_s_ = -1.0;             // how late partners hear of a phase edge (< 0: no turns)
  std::uint64_t yields_version_ = 0;  // the scheduler's, when phases in flight were last split
  std::uint64_t events_ = 0;
  double done_iterations_ = 0.0;
  double total_iterations_ = 0.0;
};

}  // namespace

RunResult Simulate(const Scenario& scenario, const PolicyConfig& policy,
                   const RunOptions& options) {
  Engine engine(scenario, policy, options);
  return engine.Run();
}

}  // namespace metronome::sim
