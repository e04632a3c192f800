// The registry's part in taking turns (common/turn.hpp, controller/turns.hpp): whom each job
// takes turns with, pushed to its shims, and each job's phase edges relayed to the shims of the
// jobs that take turns with it, on the endpoint thread as they arrive (no planner in between:
// the relay has about 2 ms before its edges come too late to pay).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "metronome/common/clock.hpp"
#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/controller/turns.hpp"
#include "registry.hpp"

namespace metronome::service {

std::set<std::string> Registry::TurnIdentities(const JobState& job) const {
  std::set<std::string> out;
  for (const auto& [r, rank] : job.ranks) {
    if ((rank.features & proto::kFeatureTurns) != 0) out.insert(rank.identity);
  }
  return out;
}

void Registry::PushTurns(JobState& job) {
  const proto::TurnPush p{job.name, job.turns_version, job.sends_edges, job.turns};
  for (const std::string& identity : TurnIdentities(job)) {
    Queue(identity, p);
    metrics_.TurnPushes().Increment();
  }
}

void Registry::RefreshTurns(int64_t now) {
  const auto t0 = std::chrono::steady_clock::now();
  turns_refresh_.Refreshed(now);
  // Figures only for the jobs on a link with exactly one other (TwoJobLinks asks for them).
  controller::TwoJobLinks index(
      link_capacity_,
      [&](const JobState& job,
          std::span<const std::string> links) -> std::optional<controller::TurnFigures> {
        // A job none of whose ranks takes turns sends no edges and holds for none: nobody's
        // partner (its link still counts it, so no other pair forms there).
        const bool takes_turns = std::any_of(job.ranks.begin(), job.ranks.end(), [](const auto& r) {
          return (r.second.features & proto::kFeatureTurns) != 0;
        });
        if (!takes_turns) return std::nullopt;
        double bottleneck = 0.0;
        for (const std::string& l : links) {
          const auto c = link_capacity_.find(l);
          if (c != link_capacity_.end() && c->second > 0.0) {
            bottleneck = bottleneck == 0.0 ? c->second : std::min(bottleneck, c->second);
          }
        }
        return controller::FiguresForTurns(job, bottleneck, config_.planning);
      });
  // A planned job's links are in its state; an unplanned one's from the topology, kept with the
  // observers (RefreshObservers looks them up too) or here for this refresh.
  std::vector<std::vector<std::string>> looked_up;
  looked_up.reserve(jobs_.size());
  for (auto& [name, job] : jobs_) {
    if (job.planned) {
      index.Add(job, job.links);
      continue;
    }
    const auto observer = observers_.find(name);
    if (observer != observers_.end()) {
      if (!observer->second) observer->second = LinksOf(job);
      index.Add(job, *observer->second);
    } else {
      index.Add(job, looked_up.emplace_back(LinksOf(job)));
    }
  }
  std::vector<TurnSet> sets;  // in the order of jobs_
  sets.reserve(jobs_.size());
  edge_listeners_.clear();
  for (const auto& [name, job] : jobs_) {
    const TurnSet& t = sets.emplace_back(index.TurnsFor(job));
    for (uint32_t i = 0; i < t.count; ++i) edge_listeners_[t.partners[i].job].push_back(job.id);
  }
  auto set = sets.begin();
  for (auto& [name, job] : jobs_) {
    const TurnSet& t = *set++;
    const bool sends = edge_listeners_.contains(job.id);
    if (job.turns_version > 0 && !controller::TurnsMoved(t, job.turns) &&
        sends == job.sends_edges) {
      continue;
    }
    if (job.turns_version == 0 && t.count == 0 && !sends) continue;  // never took turns
    job.turns = t;
    job.sends_edges = sends;
    ++job.turns_version;
    spdlog::debug("registry: job={} takes turns with {} partner(s), sends edges: {} (v{})", name,
                  t.count, sends, job.turns_version);
    PushTurns(job);
  }
  metrics_.TurnsRefreshDuration().Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Registry::HandleEdge(ClientState& client, const proto::PhaseEdge& m, int64_t now) {
  const JobState* sender = Sender(client, m.job_id, m.rank, "phase edge");
  if (sender == nullptr) return;
  if (!config_.controller.turns) {
    metrics_.TurnEdges("off").Increment();
    Reject(&client, client.identity, proto::ErrorCode::kUnexpected, "unexpected",
           "phase edges are not relayed (controller.turns is false)");
    return;
  }
  if (m.at_ns > SaturatingAdd(now, kEdgeAheadLimitNs)) {
    metrics_.TurnEdges("ahead").Increment();
    Reject(&client, client.identity, proto::ErrorCode::kInvalid, "edge_ahead",
           "phase edge dated " + std::to_string((m.at_ns - now) / 1'000'000) +
               " ms ahead of the scheduler's clock");
    return;
  }
  const JobState& job = *sender;
  // One rank speaks for the job: the lowest that sent an edge within the last second, or two of
  // the job's periods where those are longer (its edges come that far apart). After a step of
  // the clock back, the next rank to send speaks (a silent speaker would otherwise keep the
  // others quiet for as long as the step).
  EdgeSource& source = edge_sources_[job.id];
  const int64_t speaks_for = std::max<int64_t>(1'000'000'000, 2 * job.profile.period_ns);
  if (m.rank < source.rank || now - source.last_ns > speaks_for || now < source.last_ns) {
    source.rank = m.rank;
  }
  if (m.rank != source.rank) {
    metrics_.TurnEdges("other_rank").Increment();
    return;
  }
  source.last_ns = now;
  const auto listeners = edge_listeners_.find(job.id);
  if (listeners == edge_listeners_.end()) {
    metrics_.TurnEdges("no_partner").Increment();
    return;
  }
  metrics_.TurnEdges("relayed").Increment();
  metrics_.TurnEdgeAge().Observe(static_cast<double>(std::max<int64_t>(now - m.at_ns, 0)) * 1e-9);
  for (const uint64_t id : listeners->second) {
    const auto name = job_names_.find(id);
    if (name == job_names_.end()) continue;
    const auto listener = jobs_.find(name->second);
    if (listener == jobs_.end()) continue;
    const proto::TurnEdge edge{listener->second.name, job.id, m.begun, m.at_ns};
    for (const std::string& identity : TurnIdentities(listener->second)) {
      Queue(identity, edge);
      metrics_.TurnEdgesRelayed().Increment();
    }
  }
}

}  // namespace metronome::service
