// The filter and prioritize verbs (see extender.hpp).
#include "metronome/extender/extender.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "metronome/planner/what_if.h"
#include "snapshot.hpp"

namespace metronome::extender {

namespace {

using Json = nlohmann::json;
constexpr int kMaxScore = 10;  // kube-scheduler's MaxExtenderPriority

// A request that does not follow ExtenderArgs: answered 400.
class BadRequest : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Args {
  PodInfo pod;
  std::string pod_warnings;
  bool full_nodes = false;                   // "Nodes" was sent (nodeCacheCapable: false)
  Json node_items;                           // the Node objects as received (full_nodes)
  std::vector<std::string> names;            // candidate names, in request order
  std::map<std::string, NodeLabels> labels;  // from the Node objects
};

Args ParseArgs(std::string_view body, const ExtenderConfig& config) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) throw BadRequest("the body is not JSON");
  if (!j.is_object()) throw BadRequest("ExtenderArgs must be a JSON object");
  Args a;
  const auto pod = j.find("Pod");
  if (pod == j.end() || pod->is_null()) throw BadRequest("ExtenderArgs.Pod is missing");
  try {
    a.pod = ParsePod(*pod, config.priority, &a.pod_warnings);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(std::string("ExtenderArgs.Pod: ") + e.what());
  }
  const auto nodes = j.find("Nodes");
  const auto names = j.find("NodeNames");
  if (nodes != j.end() && !nodes->is_null()) {
    if (!nodes->is_object()) throw BadRequest("ExtenderArgs.Nodes must be a NodeList object");
    const auto items = nodes->find("items");
    if (items != nodes->end() && !items->is_null() && !items->is_array()) {
      throw BadRequest("ExtenderArgs.Nodes.items must be a list");
    }
    a.full_nodes = true;
    a.node_items = items != nodes->end() && items->is_array() ? std::move(*items) : Json::array();
    a.names.reserve(a.node_items.size());
    for (size_t i = 0; i < a.node_items.size(); ++i) {
      const Json& n = a.node_items[i];
      const Json* meta = n.is_object() && n.contains("metadata") ? &n["metadata"] : nullptr;
      if (meta == nullptr || !meta->is_object() || !meta->contains("name") ||
          !(*meta)["name"].is_string() || (*meta)["name"].get_ref<const std::string&>().empty()) {
        throw BadRequest("ExtenderArgs.Nodes.items[" + std::to_string(i) +
                         "] has no metadata.name");
      }
      const std::string& name = (*meta)["name"].get_ref<const std::string&>();
      a.names.push_back(name);
      if (const auto l = meta->find("labels"); l != meta->end() && l->is_object()) {
        NodeLabels& labels = a.labels[name];
        for (const auto& [k, v] : l->items()) {
          if (v.is_string()) labels.emplace(k, v.get<std::string>());
        }
      }
    }
  } else if (names != j.end() && !names->is_null()) {
    if (!names->is_array()) throw BadRequest("ExtenderArgs.NodeNames must be a list of names");
    a.names.reserve(names->size());
    for (size_t i = 0; i < names->size(); ++i) {
      const Json& n = (*names)[i];
      if (!n.is_string() || n.get_ref<const std::string&>().empty()) {
        throw BadRequest("ExtenderArgs.NodeNames[" + std::to_string(i) + "] is not a name");
      }
      a.names.push_back(n.get<std::string>());
    }
  }
  return a;
}

// Candidates the snapshot does not place yet: never seen, or seen without a rack that the
// request's Node object now gives.
std::map<std::string, NodeLabels> Unknown(const Extender::Snapshot& snap, const Args& args,
                                          const ExtenderConfig& config) {
  std::map<std::string, NodeLabels> unknown;
  for (const std::string& n : args.names) {
    const auto l = args.labels.find(n);
    const bool seen = snap.node_ids.count(n) != 0;
    if (!seen || (snap.unplaced.count(n) != 0 && l != args.labels.end() &&
                  !LabelOf(&l->second, config.rack_labels).empty())) {
      unknown[n] = l != args.labels.end() ? l->second : NodeLabels{};
    }
  }
  return unknown;
}

ExtenderResponse Error400(const std::string& message) {
  return {400, Json{{"error", "bad_request"}, {"message", message}}.dump()};
}

// One candidate's verdict.
struct Verdict {
  bool known = false;  // a what-if was made
  double cost = 0.0;
  bool hurts_higher = false;
  std::string reason;
};

// The planner's what-if for every candidate of one request.
class Evaluation {
 public:
  Evaluation(const Extender::Snapshot& snap, const ExtenderConfig& config,
             const models::ModelTable* models, const Args& args)
      : snap_(snap), config_(config), models_(models), args_(args) {}

  // False when the pod's job or profile is unknown (neutral answers).
  bool Run(std::vector<Verdict>& out, bool explain, bool& no_job, bool& no_profile) {
    out.assign(args_.names.size(), Verdict{});
    const PodInfo& pod = args_.pod;
    if (pod.job.empty()) {
      no_job = true;
      return false;
    }
    int priority = pod.priority;
    const auto declared = snap_.declared.find(pod.job);
    if (pod.priority_source == "default" && declared != snap_.declared.end()) {
      if (const auto p = ParsePriorityWord(declared->second.priority); p) priority = *p;
    }

    // The nodes the job's other pods hold; the job itself is taken out of the plan when it is
    // already in it (a re-created pod): it is evaluated as if it arrived now.
    std::vector<pl::NodeId> others;
    if (const auto it = snap_.job_nodes.find(pod.job); it != snap_.job_nodes.end()) {
      for (const std::string& n : it->second) {
        if (const auto id = snap_.node_ids.find(n); id != snap_.node_ids.end()) {
          others.push_back(id->second);
        }
      }
    }
    const pl::OnlinePlanner* planner = &snap_.planner;
    std::unique_ptr<pl::OnlinePlanner> without;
    if (const auto self = snap_.job_ids.find(pod.job); self != snap_.job_ids.end()) {
      without =
          std::make_unique<pl::OnlinePlanner>(snap_.planner.topology(), snap_.planner.options());
      std::vector<pl::Job> jobs;
      for (const pl::Job& j : snap_.jobs) {
        if (j.id != self->second) jobs.push_back(j);
      }
      without->adopt(jobs, snap_.plan);
      planner = without.get();
    }
    const int ranks = pod.ranks ? *pod.ranks : static_cast<int>(others.size()) + 1;

    // Candidates grouped by what changes the profile: the GPU type and the NIC rate.
    std::map<std::pair<std::string, double>, std::vector<size_t>> groups;
    std::vector<pl::NodeId> ids(args_.names.size(), 0);
    for (size_t i = 0; i < args_.names.size(); ++i) {
      const auto id = snap_.node_ids.find(args_.names[i]);
      if (id == snap_.node_ids.end()) continue;  // not learnable: no opinion
      ids[i] = id->second;
      std::string gpu = pod.gpu_type;
      if (gpu.empty() && declared != snap_.declared.end()) gpu = declared->second.gpu_type;
      if (gpu.empty()) gpu = snap_.node_gpu[id->second];
      if (gpu.empty()) gpu = config_.default_gpu;
      double nic = snap_.node_nic[id->second];
      if (nic <= 0) nic = config_.default_nic_bytes_per_s;
      groups[{gpu, nic}].push_back(i);
    }
    const double weight = pl::priority_weight(priority);
    bool any_profile = false;
    for (const auto& [key, members] : groups) {
      const auto profile = Profile(key.first, key.second, ranks);
      if (!profile) continue;
      any_profile = true;
      pl::Job job;
      job.id = 0;
      for (const auto& [id, name] : snap_.job_names) job.id = std::max(job.id, id);
      job.id += 1'000'000;  // not any job's id
      job.priority = priority;
      job.profile = *profile;
      std::vector<std::vector<pl::NodeId>> candidates;
      candidates.reserve(members.size());
      for (const size_t i : members) {
        std::vector<pl::NodeId> nodes = others;
        nodes.push_back(ids[i]);
        candidates.push_back(std::move(nodes));
      }
      const auto results = pl::what_if(*planner, job, candidates);
      std::vector<size_t> to_explain;
      for (size_t k = 0; k < members.size(); ++k) {
        const pl::WhatIfResult& r = results[k];
        Verdict& v = out[members[k]];
        v.known = true;
        v.hurts_higher = r.hurts_higher_priority;
        double load = 0.0;
        const auto links = planner->topology().links_crossed(candidates[k]);
        for (const pl::LinkId l : links) load += snap_.link_load[l];
        if (!links.empty()) load /= static_cast<double>(links.size());
        v.cost = std::max(0.0, r.job_slowdown) + std::max(0.0, r.neighbour_slowdown) / weight +
                 config_.load_weight * load;
        if (explain && r.hurts_higher_priority) to_explain.push_back(k);
      }
      if (!to_explain.empty()) Explain(*planner, job, candidates, members, to_explain, out);
    }
    if (!any_profile) {
      no_profile = true;
      return false;
    }
    return true;
  }

 private:
  // The job's natural profile on a GPU type behind a NIC of `nic` bytes/s.
  std::optional<pl::JobProfile> Profile(const std::string& gpu, double nic, int ranks) const {
    const PodInfo& pod = args_.pod;
    const auto from_period = [&](double period_ms, double gradient_mb) {
      const double volume = RingVolume(gradient_mb * 1024.0 * 1024.0, ranks);
      pl::JobProfile p;
      p.beta_bps = nic;
      p.period_ns = std::max<pl::Nanos>(1, std::llround(period_ms * 1e6));
      p.comm_ns = std::clamp<pl::Nanos>(std::llround(volume / nic * 1e9), 1, p.period_ns);
      return p;
    };
    const auto from_model = [&](const std::string& model) -> std::optional<pl::JobProfile> {
      if (models_ == nullptr) return std::nullopt;
      try {
        const double compute_ms = models_->computeMs(model, gpu);
        const double volume = RingVolume(static_cast<double>(models_->gradientBytes(model)), ranks);
        return pl::JobProfile::from_volume(std::llround(compute_ms * 1e6), volume, nic);
      } catch (const std::exception&) {
        return std::nullopt;  // unknown model or GPU key
      }
    };
    if (pod.period_ms && pod.gradient_mb) return from_period(*pod.period_ms, *pod.gradient_mb);
    if (!pod.model.empty()) {
      if (auto p = from_model(pod.model)) return p;
    }
    if (const auto d = snap_.declared.find(pod.job); d != snap_.declared.end()) {
      if (d->second.period_ms && d->second.gradient_mb) {
        return from_period(*d->second.period_ms, *d->second.gradient_mb);
      }
      if (!d->second.model.empty()) {
        if (auto p = from_model(d->second.model)) return p;
      }
    }
    if (const auto m = snap_.measured.find(pod.job);
        m != snap_.measured.end() && m->second.period_ns > 0) {
      pl::JobProfile p;
      p.period_ns = m->second.period_ns;
      p.comm_ns = std::clamp<pl::Nanos>(m->second.comm_ns, 1, p.period_ns);
      p.beta_bps = nic;
      if (m->second.bytes_per_phase > 0) {
        p.beta_bps = std::min(nic, static_cast<double>(m->second.bytes_per_phase) * 1e9 /
                                       static_cast<double>(p.comm_ns));
      }
      p.beta_bps = std::max(p.beta_bps, 1.0);
      return p;
    }
    return std::nullopt;
  }

  // Names the higher-priority jobs (and links) a failed candidate would contend with.
  void Explain(const pl::OnlinePlanner& planner, const pl::Job& job,
               const std::vector<std::vector<pl::NodeId>>& candidates,
               const std::vector<size_t>& members, const std::vector<size_t>& which,
               std::vector<Verdict>& out) const {
    std::vector<std::vector<pl::NodeId>> subset;
    for (const size_t k : which) subset.push_back(candidates[k]);
    pl::WhatIfOptions o;
    o.list_affected = true;
    const auto results = pl::what_if(planner, job, subset, o);
    const pl::Topology& topo = planner.topology();
    for (size_t s = 0; s < which.size(); ++s) {
      std::set<std::string> jobs;
      for (const pl::AffectedJob& a : results[s].affected) {
        const auto prio = snap_.job_priorities.find(a.id);
        if (a.slowdown_after > a.slowdown_before && prio != snap_.job_priorities.end() &&
            prio->second > job.priority) {
          jobs.insert(snap_.job_names.at(a.id) + " (priority " + std::to_string(prio->second) +
                      ")");
        }
      }
      std::string links;
      for (const pl::LinkId l : topo.links_crossed(subset[s])) {
        links += (links.empty() ? "" : ", ") + topo.link(l).name;
      }
      std::string list;
      for (const std::string& j : jobs) list += (list.empty() ? "" : ", ") + j;
      out[members[which[s]]].reason =
          "metronome: no free window for job " + args_.pod.job + " on " +
          (links.empty() ? std::string("its links") : "link(s) " + links) +
          "; its traffic would break the timetable of higher-priority job(s) " +
          (list.empty() ? std::string("on those links") : list);
    }
  }

  const Extender::Snapshot& snap_;
  const ExtenderConfig& config_;
  const models::ModelTable* models_;
  const Args& args_;
};

int ScoreOf(double cost, const ExtenderConfig& config) {
  const double scale = config.cost_at_zero > 0 ? config.cost_at_zero : 1.0;
  const double s = static_cast<double>(kMaxScore) * std::max(0.0, 1.0 - cost / scale);
  return std::clamp(static_cast<int>(std::lround(s)), 0, kMaxScore);
}

class Timer {
 public:
  explicit Timer(std::atomic<uint64_t>& sink) : sink_(sink) {}
  ~Timer() {
    sink_ = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::steady_clock::now() - start_)
                                      .count());
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  std::atomic<uint64_t>& sink_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

Extender::Extender(ExtenderConfig config, std::shared_ptr<const models::ModelTable> models)
    : config_(std::move(config)), models_(std::move(models)) {
  if (!models_) {
    try {
      models_ = std::make_shared<const models::ModelTable>(models::ModelTable::loadDefault());
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
      if (snapshot_->node_ids.count(name) != 0 && snapshot_->unplaced.count(name) == 0) continue;
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
  Timer timer(last_latency_us_);
  ++filter_requests_;
  try {
    Args args = ParseArgs(body, config_);
    auto snap = Current();
    if (auto unknown = Unknown(*snap, args, config_); !unknown.empty()) snap = Learn(unknown);

    std::vector<Verdict> verdicts;
    bool no_job = false;
    bool no_profile = false;
    Evaluation(*snap, config_, models_.get(), args).Run(verdicts, true, no_job, no_profile);
    if (no_job) ++pods_without_job_;
    if (no_profile) ++pods_without_profile_;
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
    Json passed_items = Json::array();
    Json passed_names = Json::array();
    for (size_t i = 0; i < args.names.size(); ++i) {
      if (verdicts[i].hurts_higher && !starve_guard) {
        failed[args.names[i]] = verdicts[i].reason;
        continue;
      }
      if (args.full_nodes) {
        passed_items.push_back(std::move(args.node_items[i]));
      } else {
        passed_names.push_back(args.names[i]);
      }
    }
    nodes_filtered_out_ += failed.size();
    Json result = {
        {"FailedNodes", failed}, {"FailedAndUnresolvableNodes", Json::object()}, {"Error", ""}};
    if (args.full_nodes) {
      result["Nodes"] = {{"metadata", Json::object()}, {"items", std::move(passed_items)}};
      result["NodeNames"] = nullptr;
    } else {
      result["Nodes"] = nullptr;
      result["NodeNames"] = std::move(passed_names);
    }
    return {200, result.dump()};
  } catch (const BadRequest& e) {
    ++bad_requests_;
    return Error400(std::string("filter: ") + e.what());
  } catch (const std::exception& e) {
    // Never reached by design; an internal error still answers (ignorable extender).
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
  Timer timer(last_latency_us_);
  ++prioritize_requests_;
  try {
    const Args args = ParseArgs(body, config_);
    auto snap = Current();
    if (auto unknown = Unknown(*snap, args, config_); !unknown.empty()) snap = Learn(unknown);

    std::vector<Verdict> verdicts;
    bool no_job = false;
    bool no_profile = false;
    const bool scored =
        Evaluation(*snap, config_, models_.get(), args).Run(verdicts, false, no_job, no_profile);
    if (no_job) ++pods_without_job_;
    if (no_profile) ++pods_without_profile_;
    Json list = Json::array();
    for (size_t i = 0; i < args.names.size(); ++i) {
      // No opinion (not a Metronome job, no profile, unknown node): the same score for all, so
      // that the other plugins decide.
      const int score = scored && verdicts[i].known ? ScoreOf(verdicts[i].cost, config_) : 0;
      list.push_back({{"Host", args.names[i]}, {"Score", score}});
    }
    return {200, list.dump()};
  } catch (const BadRequest& e) {
    ++bad_requests_;
    return Error400(std::string("prioritize: ") + e.what());
  } catch (const std::exception& e) {
    spdlog::error("extender: prioritize failed: {}", e.what());
    return {500, Json{{"error", "internal"}, {"message", e.what()}}.dump()};
  }
}

ExtenderStats Extender::stats() const {
  ExtenderStats s;
  s.filter_requests = filter_requests_;
  s.prioritize_requests = prioritize_requests_;
  s.bad_requests = bad_requests_;
  s.nodes_filtered_out = nodes_filtered_out_;
  s.never_starve_passes = never_starve_passes_;
  s.pods_without_job = pods_without_job_;
  s.pods_without_profile = pods_without_profile_;
  s.snapshot_rebuilds = snapshot_rebuilds_;
  s.last_latency_us = last_latency_us_;
  std::lock_guard lock(mu_);
  s.state_version = snapshot_ ? snapshot_->version : 0;
  return s;
}

}  // namespace metronome::extender
