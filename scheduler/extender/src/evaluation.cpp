#include "evaluation.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "metronome/planner/what_if.h"

namespace metronome::extender {

namespace {

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

}  // namespace

bool Evaluate(const Extender::Snapshot& snap, const ExtenderConfig& config,
              const models::ModelTable* models, const Args& args, std::vector<Verdict>& out,
              bool explain, bool& no_job, bool& no_profile) {
  return Evaluation(snap, config, models, args).Run(out, explain, no_job, no_profile);
}

int ScoreOf(double cost, const ExtenderConfig& config) {
  const double scale = config.cost_at_zero > 0 ? config.cost_at_zero : 1.0;
  const double s = static_cast<double>(kMaxScore) * std::max(0.0, 1.0 - cost / scale);
  return std::clamp(static_cast<int>(std::lround(s)), 0, kMaxScore);
}

}  // namespace metronome::extender
