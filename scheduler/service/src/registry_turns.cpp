// The registry's part in taking turns (common/turn.hpp, controller/turns.hpp): whom each job
// takes turns with, pushed to its shims, and each job's phase edges relayed to the shims of the
// jobs that take turns with it, on the endpoint thread as they arrive (no planner in between:
// the relay has about 2 ms before its edges come too late to pay).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "metronome/common/clock.hpp"
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
  turns_refresh_.Refreshed(now);
  std::unordered_map<std::string, double> capacity;
  for (const controller::LinkSchedule& l : summary_.links) {
    capacity[l.name] = l.capacity_bytes_per_s;
  }
  controller::TwoJobLinks index(capacity);
  for (const auto& [name, job] : jobs_) {
    std::vector<std::string> links = job.planned ? job.links : LinksOf(job);
    double bottleneck = 0.0;
    for (const std::string& l : links) {
      const auto c = capacity.find(l);
      if (c != capacity.end() && c->second > 0.0) {
        bottleneck = bottleneck == 0.0 ? c->second : std::min(bottleneck, c->second);
      }
    }
    index.Add(job, std::move(links),
              controller::FiguresForTurns(job, bottleneck, config_.planning));
  }
  std::unordered_map<uint64_t, TurnSet> sets;
  edge_listeners_.clear();
  for (const auto& [name, job] : jobs_) {
    const TurnSet t = index.TurnsFor(job);
    for (uint32_t i = 0; i < t.count; ++i) edge_listeners_[t.partners[i].job].push_back(job.id);
    sets.emplace(job.id, t);
  }
  for (auto& [name, job] : jobs_) {
    const TurnSet& t = sets.at(job.id);
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
  const JobState& job = *sender;
  // One rank speaks for the job: the lowest that sent an edge in the last second.
  EdgeSource& source = edge_sources_[job.id];
  if (m.rank < source.rank || now - source.last_ns > 1'000'000'000) source.rank = m.rank;
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
