// The filter and prioritize verbs (see extender.hpp).
#include "metronome/extender/extender.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "call_records.hpp"
#include "evaluation.hpp"
#include "request.hpp"
#include "snapshot.hpp"

namespace metronome::extender {

namespace {

ExtenderResponse Error400(const std::string& message) {
  return {400, Json{{"error", "bad_request"}, {"message", message}}.dump()};
}

}  // namespace

Extender::Extender(ExtenderConfig config, std::shared_ptr<const models::ModelTable> models)
    : config_(std::move(config)),
      models_(std::move(models)),
      decisions_(std::make_unique<Decisions>()),
      filter_latency_(std::make_unique<LatencyRecorder>()),
      prioritize_latency_(std::make_unique<LatencyRecorder>()) {
  if (!models_) {
    try {
      models_ = std::make_shared<const models::ModelTable>(models::ModelTable::LoadDefault());
    } catch (const std::exception& e) {
      spdlog::warn("extender: no model table ({}); model annotations are ignored", e.what());
    }
  }
  snapshot_ = BuildSnapshot(state_, {}, config_, models_.get());
}

Extender::~Extender() = default;

void Extender::UpdateState(ClusterState state) {
  std::lock_guard update(update_mu_);
  ClusterState copy;
  std::map<std::string, NodeLabels> learned;
  {
    std::lock_guard lock(mu_);
    state_ = std::move(state);
    copy = state_;
    learned = learned_;
  }
  // Built outside mu_: requests keep using the previous snapshot meanwhile.
  auto built = BuildSnapshot(copy, learned, config_, models_.get());
  ++snapshot_rebuilds_;
  std::lock_guard lock(mu_);
  snapshot_ = std::move(built);
}

void Extender::UpdateNodeLabels(std::map<std::string, NodeLabels> labels) {
  std::lock_guard update(update_mu_);
  ClusterState copy;
  std::map<std::string, NodeLabels> learned;
  {
    std::lock_guard lock(mu_);
    state_.node_labels = std::move(labels);
    copy = state_;
    learned = learned_;
  }
  auto built = BuildSnapshot(copy, learned, config_, models_.get());
  ++snapshot_rebuilds_;
  std::lock_guard lock(mu_);
  snapshot_ = std::move(built);
}

std::shared_ptr<const Extender::Snapshot> Extender::Current() {
  std::lock_guard lock(mu_);
  return snapshot_;
}

std::shared_ptr<const Extender::Snapshot> Extender::Learn(
    const std::map<std::string, NodeLabels>& nodes) {
  std::lock_guard update(update_mu_);
  ClusterState copy;
  std::map<std::string, NodeLabels> learned;
  {
    std::lock_guard lock(mu_);
    bool changed = false;
    for (const auto& [name, labels] : nodes) {
      if (snapshot_->nodes.ids.count(name) != 0 && snapshot_->unplaced.count(name) == 0) continue;
      if (learned_.count(name) != 0 && learned_[name] == labels) continue;
      if (learned_.size() >= kMaxLearnedNodes) break;
      learned_[name] = labels;
      changed = true;
    }
    if (!changed) return snapshot_;
    copy = state_;
    learned = learned_;
  }
  auto built = BuildSnapshot(copy, learned, config_, models_.get());
  ++snapshot_rebuilds_;
  std::lock_guard lock(mu_);
  snapshot_ = built;
  return built;
}

ExtenderResponse Extender::HandleFilter(std::string_view body) {
  Timer timer(last_latency_us_, *filter_latency_);
  ++filter_requests_;
  try {
    Args args = ParseArgs(body, config_);
    auto snap = Current();
    if (auto unknown = Unknown(*snap, args, config_); !unknown.empty()) snap = Learn(unknown);

    CountUnreadAnnotations(args.pod, args.pod_hash, args.pod_warnings);
    std::vector<Verdict> verdicts;
    Shortfall why;
    const bool scored = Evaluate(*snap, config_, models_.get(), args, verdicts, true, why);
    CountShortfall(why.no_job, why.no_profile, why.refused);
    {
      Decisions::Entry e;
      e.pod_hash = args.pod_hash;
      e.snapshot = snap;
      e.scored = scored;
      e.verdicts.reserve(args.names.size());
      for (size_t i = 0; i < args.names.size(); ++i) e.verdicts.emplace(args.names[i], verdicts[i]);
      decisions_->Put(std::move(e));
    }
    size_t failing = 0;
    for (const Verdict& v : verdicts) failing += v.hurts_higher ? 1 : 0;
    const bool starve_guard = config_.never_starve && failing > 0 && failing == verdicts.size();
    if (starve_guard) {
      ++never_starve_passes_;
      spdlog::info(
          "extender: every node would break a higher-priority timetable for pod {}/{} "
          "(job {}); passing all (never starve)",
          args.pod.namespace_name, args.pod.name, args.pod.job);
    }
    Json failed = Json::object();
    Json passed_names = Json::array();
    std::string out = "{\"Nodes\":";
    if (args.full_nodes) {
      // The passing Node objects go back as received, copied once.
      size_t size = 0;
      for (const std::string_view item : args.node_items) size += item.size() + 1;
      out.reserve(size + 256);
      out += "{\"metadata\":{},\"items\":[";
    }
    bool first = true;
    for (size_t i = 0; i < args.names.size(); ++i) {
      if (verdicts[i].hurts_higher && !starve_guard) {
        failed[args.names[i]] = verdicts[i].reason;
        continue;
      }
      if (args.full_nodes) {
        if (!first) out.push_back(',');
        out.append(args.node_items[i]);
        first = false;
      } else {
        passed_names.push_back(args.names[i]);
      }
    }
    nodes_filtered_out_ += failed.size();
    if (args.full_nodes) {
      out += "]},\"NodeNames\":null";
    } else {
      out += "null,\"NodeNames\":" + passed_names.dump();
    }
    out +=
        ",\"FailedNodes\":" + failed.dump() + ",\"FailedAndUnresolvableNodes\":{},\"Error\":\"\"}";
    return {200, std::move(out)};
  } catch (const BadRequest& e) {
    ++filter_bad_requests_;
    return Error400(std::string("filter: ") + e.what());
  } catch (const std::exception& e) {
    // Never reached by design; an internal error still answers (ignorable extender).
    ++internal_errors_;
    spdlog::error("extender: filter failed: {}", e.what());
    return {200, Json{{"Nodes", nullptr},
                      {"NodeNames", nullptr},
                      {"FailedNodes", Json::object()},
                      {"FailedAndUnresolvableNodes", Json::object()},
                      {"Error", std::string("metronome extender: ") + e.what()}}
                     .dump()};
  }
}

ExtenderResponse Extender::HandlePrioritize(std::string_view body) {
  Timer timer(last_latency_us_, *prioritize_latency_);
  ++prioritize_requests_;
  try {
    const Args args = ParseArgs(body, config_);
    auto snap = Current();
    if (auto unknown = Unknown(*snap, args, config_); !unknown.empty()) snap = Learn(unknown);

    CountUnreadAnnotations(args.pod, args.pod_hash, args.pod_warnings);
    std::vector<Verdict> verdicts;
    bool scored = false;
    if (decisions_->Get(args.pod_hash, snap.get(), args.names, scored, verdicts)) {
      ++reused_decisions_;
    } else {
      Shortfall why;
      scored = Evaluate(*snap, config_, models_.get(), args, verdicts, false, why);
      CountShortfall(why.no_job, why.no_profile, why.refused);
    }
    Json list = Json::array();
    for (size_t i = 0; i < args.names.size(); ++i) {
      // No opinion (not a Metronome job, no profile, unknown node): the same score for all, so
      // that the other plugins decide.
      const int score = scored && verdicts[i].known ? ScoreOf(verdicts[i].cost, config_) : 0;
      list.push_back({{"Host", args.names[i]}, {"Score", score}});
    }
    return {200, list.dump()};
  } catch (const BadRequest& e) {
    ++prioritize_bad_requests_;
    return Error400(std::string("prioritize: ") + e.what());
  } catch (const std::exception& e) {
    ++internal_errors_;
    spdlog::error("extender: prioritize failed: {}", e.what());
    return {500, Json{{"error", "internal"}, {"message", e.what()}}.dump()};
  }
}

void Extender::CountShortfall(bool no_job, bool no_profile, bool refused) {
  if (no_job) ++pods_without_job_;
  if (no_profile) ++pods_without_profile_;
  if (refused) ++planner_refusals_;
}

void Extender::CountUnreadAnnotations(const PodInfo& pod, size_t pod_hash,
                                      const std::string& warnings) {
  if (warnings.empty()) return;
  ++bad_annotations_;
  if (last_warned_pod_.exchange(pod_hash) != pod_hash) {
    spdlog::warn("extender: pod {}/{}: {} (ignored)", pod.namespace_name, pod.name, warnings);
  }
}

ExtenderStats Extender::Stats() const {
  ExtenderStats s;
  s.filter_requests = filter_requests_;
  s.prioritize_requests = prioritize_requests_;
  s.filter_bad_requests = filter_bad_requests_;
  s.prioritize_bad_requests = prioritize_bad_requests_;
  s.bad_requests = s.filter_bad_requests + s.prioritize_bad_requests;
  s.internal_errors = internal_errors_;
  s.nodes_filtered_out = nodes_filtered_out_;
  s.never_starve_passes = never_starve_passes_;
  s.pods_without_job = pods_without_job_;
  s.pods_without_profile = pods_without_profile_;
  s.planner_refusals = planner_refusals_;
  s.bad_annotations = bad_annotations_;
  s.snapshot_rebuilds = snapshot_rebuilds_;
  s.reused_decisions = reused_decisions_;
  s.last_latency_us = last_latency_us_;
  s.filter_latency = filter_latency_->Read();
  s.prioritize_latency = prioritize_latency_->Read();
  std::lock_guard lock(mu_);
  s.state_version = snapshot_ ? snapshot_->version : 0;
  return s;
}

}  // namespace metronome::extender
