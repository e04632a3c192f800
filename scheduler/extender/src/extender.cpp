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

#include "args_scanner.hpp"
#include "metronome/planner/what_if.h"
#include "snapshot.hpp"

namespace metronome::extender {

namespace {

using Json = nlohmann::json;
constexpr int kMaxScore = 10;  // kube-scheduler's MaxExtenderPriority

struct Args {
  size_t pod_hash = 0;  // of the Pod's text: kube-scheduler sends the same Pod to both verbs
  PodInfo pod;
  std::string pod_warnings;
  bool full_nodes = false;                    // "Nodes" was sent (nodeCacheCapable: false)
  std::vector<std::string_view> node_items;   // the Node objects' text as received (full_nodes)
  std::vector<std::string> names;             // candidate names, in request order
  std::vector<std::string_view> label_texts;  // metadata.labels of each Node (full_nodes)
};

Args ParseArgs(std::string_view body, const ExtenderConfig& config) {
  ScannedArgs scanned = ScanArgs(body);
  Args a;
  if (scanned.pod.empty()) throw BadRequest("ExtenderArgs.Pod is missing");
  a.pod_hash = std::hash<std::string_view>{}(scanned.pod);
  const Json pod = Json::parse(scanned.pod, nullptr, false);
  if (pod.is_discarded()) throw BadRequest("ExtenderArgs.Pod is not JSON");
  try {
    a.pod = ParsePod(pod, config.priority, &a.pod_warnings);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(std::string("ExtenderArgs.Pod: ") + e.what());
  }
  if (scanned.has_nodes) {
    a.full_nodes = true;
    a.names.reserve(scanned.nodes.size());
    a.node_items.reserve(scanned.nodes.size());
    a.label_texts.reserve(scanned.nodes.size());
    for (ScannedNode& n : scanned.nodes) {
      a.names.push_back(std::move(n.name));
      a.node_items.push_back(n.raw);
      a.label_texts.push_back(n.labels);
    }
  } else if (scanned.has_names) {
    a.names = std::move(scanned.names);
  }
  return a;
}

// Candidates the snapshot does not place yet: never seen, or seen without a rack that the
// request's Node object now gives.
std::map<std::string, NodeLabels> Unknown(const Extender::Snapshot& snap, const Args& args,
                                          const ExtenderConfig& config) {
  std::map<std::string, NodeLabels> unknown;
  for (size_t i = 0; i < args.names.size(); ++i) {
    const std::string& n = args.names[i];
    const bool seen = snap.node_ids.count(n) != 0;
    if (seen && snap.unplaced.count(n) == 0) continue;
    NodeLabels labels = args.full_nodes ? DecodeLabels(args.label_texts[i]) : NodeLabels{};
    if (!seen || !LabelOf(&labels, config.rack_labels).empty()) unknown[n] = std::move(labels);
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
      try {
        without->adopt(jobs, snap_.plan);
      } catch (const std::exception& e) {
        spdlog::warn("extender: cannot take job {} out of the plan: {}", pod.job, e.what());
        return false;
      }
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
      std::vector<pl::WhatIfResult> results;
      try {
        results = pl::what_if(*planner, job, candidates);
      } catch (const std::exception& e) {
        spdlog::warn("extender: what-if for job {} failed: {}", pod.job, e.what());
        continue;  // no opinion on these candidates
      }
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
        if (explain && r.hurts_higher_priority) Explain(*planner, job, candidates[k], v);
      }
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

  // Says why a candidate fails: the higher-priority jobs gated on the links it would cross
  // (from the snapshot's per-link lists; a second what-if would double the cost of filter).
  void Explain(const pl::OnlinePlanner& planner, const pl::Job& job,
               const std::vector<pl::NodeId>& nodes, Verdict& out) const {
    constexpr size_t kMaxNamed = 3;
    std::vector<std::string> named;
    std::set<pl::JobId> seen;
    std::string links;
    size_t more = 0;
    for (const pl::LinkId l : planner.topology().links_crossed(nodes)) {
      bool any = false;
      for (const pl::JobId id : snap_.link_gated[l]) {
        const int prio = snap_.job_priorities.at(id);
        if (prio <= job.priority) break;  // sorted by priority
        any = true;
        if (!seen.insert(id).second) continue;
        if (named.size() < kMaxNamed) {
          named.push_back(snap_.job_names.at(id) + " (priority " + std::to_string(prio) + ")");
        } else {
          ++more;
        }
      }
      if (any) links += (links.empty() ? "" : ", ") + planner.topology().link(l).name;
    }
    std::string list;
    for (const std::string& n : named) list += (list.empty() ? "" : ", ") + n;
    if (more > 0) list += " and " + std::to_string(more) + " more";
    out.reason = "metronome: no free window for job " + args_.pod.job +
                 "; its traffic would break the timetable of higher-priority job(s) " +
                 (list.empty() ? std::string("on its links") : list) +
                 (links.empty() ? std::string() : " on " + links);
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

}  // namespace

class Extender::LatencyRecorder {
 public:
  void Observe(std::chrono::nanoseconds took) {
    const double seconds = std::chrono::duration<double>(took).count();
    const auto& bounds = LatencyHistogram::kBounds;
    const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
    counts_[static_cast<size_t>(bucket)].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, took.count())),
                      std::memory_order_relaxed);
  }

  LatencyHistogram Read() const {
    LatencyHistogram h;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      h.counts[i] = counts_[i].load(std::memory_order_relaxed);
      h.count += h.counts[i];
    }
    h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return h;
  }

 private:
  std::array<std::atomic<uint64_t>, LatencyHistogram::kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

namespace {

// Times one call: the last-latency gauge and the verb's histogram.
class Timer {
 public:
  Timer(std::atomic<uint64_t>& last_us, Extender::LatencyRecorder& histogram)
      : last_us_(last_us), histogram_(histogram) {}
  ~Timer() {
    const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start_);
    last_us_ =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    histogram_.Observe(took);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  std::atomic<uint64_t>& last_us_;
  Extender::LatencyRecorder& histogram_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

// The last few filter evaluations: kube-scheduler calls prioritize right after filter for the
// same pod with the nodes that passed, so prioritize can reuse the costs instead of running the
// what-if again. Keyed by the Pod's text and the snapshot it was evaluated against.
struct Extender::Decisions {
  struct Entry {
    size_t pod_hash = 0;
    std::shared_ptr<const Snapshot> snapshot;
    bool scored = false;
    std::unordered_map<std::string, Verdict> verdicts;
  };
  static constexpr size_t kEntries = 32;
  std::mutex mu;
  std::deque<Entry> entries;  // most recent first

  void Put(Entry e) {
    std::lock_guard lock(mu);
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->pod_hash == e.pod_hash) {
        entries.erase(it);
        break;
      }
    }
    entries.push_front(std::move(e));
    if (entries.size() > kEntries) entries.pop_back();
  }

  // The verdicts for `names`, when all were evaluated against `snapshot` for this pod.
  bool Get(size_t pod_hash, const Snapshot* snapshot, const std::vector<std::string>& names,
           bool& scored, std::vector<Verdict>& out) {
    std::lock_guard lock(mu);
    for (const Entry& e : entries) {
      if (e.pod_hash != pod_hash || e.snapshot.get() != snapshot) continue;
      out.assign(names.size(), Verdict{});
      for (size_t i = 0; i < names.size(); ++i) {
        const auto v = e.verdicts.find(names[i]);
        if (v == e.verdicts.end()) return false;
        out[i] = v->second;
      }
      scored = e.scored;
      return true;
    }
    return false;
  }
};

Extender::Extender(ExtenderConfig config, std::shared_ptr<const models::ModelTable> models)
    : config_(std::move(config)),
      models_(std::move(models)),
      decisions_(std::make_unique<Decisions>()),
      filter_latency_(std::make_unique<LatencyRecorder>()),
      prioritize_latency_(std::make_unique<LatencyRecorder>()) {
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
  Timer timer(last_latency_us_, *filter_latency_);
  ++filter_requests_;
  try {
    Args args = ParseArgs(body, config_);
    auto snap = Current();
    if (auto unknown = Unknown(*snap, args, config_); !unknown.empty()) snap = Learn(unknown);

    std::vector<Verdict> verdicts;
    bool no_job = false;
    bool no_profile = false;
    const bool scored =
        Evaluation(*snap, config_, models_.get(), args).Run(verdicts, true, no_job, no_profile);
    if (no_job) ++pods_without_job_;
    if (no_profile) ++pods_without_profile_;
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

    std::vector<Verdict> verdicts;
    bool no_job = false;
    bool no_profile = false;
    bool scored = false;
    if (decisions_->Get(args.pod_hash, snap.get(), args.names, scored, verdicts)) {
      ++reused_decisions_;
    } else {
      scored =
          Evaluation(*snap, config_, models_.get(), args).Run(verdicts, false, no_job, no_profile);
      if (no_job) ++pods_without_job_;
      if (no_profile) ++pods_without_profile_;
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

ExtenderStats Extender::stats() const {
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
