#include "evaluation.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "metronome/planner/what_if.hpp"
#include "profile_input.hpp"

namespace metronome::extender {

namespace {

// The planner's what-if for every candidate of one request.
class Evaluation {
 public:
  Evaluation(const Extender::Snapshot& snap, const ExtenderConfig& config,
             const models::ModelTable* models, const Args& args)
      : snap_(snap), config_(config), models_(models), args_(args) {}

  // False when the pod's job or profile is unknown (neutral answers).
  bool Run(std::vector<Verdict>& out, bool explain, Shortfall& why) {
    out.assign(args_.names.size(), Verdict{});
    const PodInfo& pod = args_.pod;
    if (pod.job.empty()) {
      why.no_job = true;
      return false;
    }
    int priority = pod.priority;
    const auto declared = snap_.declared.find(pod.job);
    if (pod.priority_source == "default" && declared != snap_.declared.end()) {
      if (const auto p = ParsePriorityWord(declared->second.priority); p) priority = *p;
    }

    // The nodes the job's other pods hold; the job itself is taken out of the plan when it is
    // already in it (a re-created pod): it is evaluated as if it arrived now.
    std::vector<std::string> others;
    if (const auto it = snap_.job_nodes.find(pod.job); it != snap_.job_nodes.end()) {
      for (const std::string& n : it->second) {
        if (snap_.nodes.ids.count(n) != 0) others.push_back(n);
      }
    }
    const pl::OnlinePlanner* planner = &snap_.planner;
    std::unique_ptr<pl::OnlinePlanner> without;
    if (const auto self = snap_.job_ids.find(pod.job); self != snap_.job_ids.end()) {
      without =
          std::make_unique<pl::OnlinePlanner>(snap_.planner.GetTopology(), snap_.planner.Options());
      std::vector<pl::Job> jobs;
      for (const pl::Job& j : snap_.jobs) {
        if (j.id != self->second) jobs.push_back(j);
      }
      try {
        without->Adopt(jobs, snap_.plan);
      } catch (const std::exception& e) {
        spdlog::warn("extender: cannot take job {} out of the plan: {}", pod.job, e.what());
        why.refused = true;
        return false;
      }
      planner = without.get();
    }
    const int ranks = pod.ranks ? *pod.ranks : static_cast<int>(others.size()) + 1;

    // Each candidate as the scheduler's planner would take the job there: its profile on the
    // node's GPU type and NIC (Input), converted as the controller converts it
    // (controller::ToPlannerProfile) on the links it would cross. Candidates whose planner job
    // is the same share one what-if.
    const pl::Topology& topology = planner->GetTopology();
    std::vector<pl::NodeId> other_ids;
    other_ids.reserve(others.size());
    for (const std::string& n : others) other_ids.push_back(snap_.nodes.ids.at(n));
    pl::JobId id = 0;
    for (const auto& [j, name] : snap_.job_names) id = std::max(id, j);
    id += 1'000'000;  // not any job's id
    const auto same = [](const pl::JobProfile& a, const pl::JobProfile& b) {
      return a.period_ns == b.period_ns && a.comm_ns == b.comm_ns && a.beta_bps == b.beta_bps &&
             a.jitter_ns == b.jitter_ns;
    };
    struct Group {
      pl::Job job;
      std::vector<size_t> members;
      std::vector<std::vector<pl::NodeId>> candidates;
      std::vector<std::vector<pl::LinkId>> links;
    };
    std::vector<Group> groups;
    std::map<std::pair<std::string, double>, std::optional<MeasuredProfile>> inputs;
    for (size_t i = 0; i < args_.names.size(); ++i) {
      const auto node = snap_.nodes.ids.find(args_.names[i]);
      if (node == snap_.nodes.ids.end()) continue;  // not learnable: no opinion
      std::string gpu = pod.gpu_type;
      if (gpu.empty() && declared != snap_.declared.end()) gpu = declared->second.gpu_type;
      if (gpu.empty()) gpu = snap_.node_gpu[node->second];
      if (gpu.empty()) gpu = config_.default_gpu;
      double nic = snap_.node_nic[node->second];
      if (nic <= 0) nic = config_.default_nic_bytes_per_s;
      auto [input, fresh] = inputs.try_emplace({gpu, nic});
      if (fresh) {
        input->second = Input(gpu, nic, ranks);
        // A period under the timetables' least is no rhythm (the scheduler does not plan it):
        // the planner is not asked.
        if (input->second && input->second->period_ns < TimetableLimits{}.min_period_ns) {
          input->second.reset();
          why.refused = true;
        }
      }
      if (!input->second) continue;
      std::vector<pl::NodeId> nodes = other_ids;
      nodes.push_back(node->second);
      std::vector<pl::LinkId> links = topology.LinksCrossed(nodes);
      pl::Job job;
      job.id = id;
      job.priority = priority;
      job.profile =
          controller::ToPlannerProfile(*input->second, static_cast<std::size_t>(ranks),
                                       controller::Bottleneck(topology, links), snap_.planning);
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const Group& x) { return same(x.job.profile, job.profile); });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{job, {}, {}, {}});
      g->members.push_back(i);
      g->candidates.push_back(std::move(nodes));
      g->links.push_back(std::move(links));
    }
    if (groups.empty()) {
      why.no_profile = true;
      return false;
    }
    const double weight = pl::PriorityWeight(priority);
    std::vector<const std::vector<pl::LinkId>*> crossed(out.size(), nullptr);
    // The snapshot's own planner is shared by the requests served at once; a copy without the
    // job is this request's.
    std::unique_lock<std::mutex> shared(snap_.planner_mu, std::defer_lock);
    if (planner == &snap_.planner) shared.lock();
    for (const Group& g : groups) {
      std::vector<pl::WhatIfResult> results;
      try {
        results = pl::WhatIf(*planner, g.job, g.candidates);
      } catch (const std::exception& e) {
        spdlog::warn("extender: what-if for job {} failed: {}", pod.job, e.what());
        why.refused = true;
        continue;  // no opinion on these candidates
      }
      for (size_t k = 0; k < g.members.size(); ++k) {
        const pl::WhatIfResult& r = results[k];
        Verdict& v = out[g.members[k]];
        v.known = true;
        v.hurts_higher = r.hurts_higher_priority;
        const std::vector<pl::LinkId>& links = g.links[k];
        double load = 0.0;
        for (const pl::LinkId l : links) load += snap_.link_load[l];
        if (!links.empty()) load /= static_cast<double>(links.size());
        v.cost = std::max(0.0, r.job_slowdown) + std::max(0.0, r.neighbour_slowdown) / weight +
                 config_.load_weight * load;
        crossed[g.members[k]] = &links;
      }
    }
    // The reasons, unless every candidate fails and the filter passes them all (never starve).
    const bool all_fail =
        std::all_of(out.begin(), out.end(), [](const Verdict& v) { return v.hurts_higher; });
    if (explain && !(all_fail && config_.never_starve)) {
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i].hurts_higher) Explain(topology, priority, *crossed[i], out[i]);
      }
    }
    return true;
  }

 private:
  // The job's profile on a GPU type behind a NIC of `nic` bytes/s (profile_input.hpp): the
  // pod's annotations, else its TrafficProfile, else what an earlier run measured.
  std::optional<MeasuredProfile> Input(const std::string& gpu, double nic, int ranks) const {
    const PodInfo& pod = args_.pod;
    if (pod.period_ms && pod.gradient_mb) {
      return ProfileFromPeriod(*pod.period_ms, *pod.gradient_mb, nic, ranks);
    }
    if (auto p = ProfileFromModel(pod.model, gpu, nic, ranks, models_)) return p;
    if (const auto d = snap_.declared.find(pod.job); d != snap_.declared.end()) {
      if (auto p = ProfileFromDeclared(d->second, gpu, nic, ranks, models_)) return p;
    }
    if (const auto m = snap_.measured.find(pod.job);
        m != snap_.measured.end() && m->second.period_ns > 0) {
      return ProfileFromMeasured(m->second);
    }
    return std::nullopt;
  }

  // Says why a candidate fails: the higher-priority jobs gated on the links it would cross
  // (from the snapshot's per-link lists; a second what-if would double the cost of filter).
  void Explain(const pl::Topology& topology, int priority, const std::vector<pl::LinkId>& crossed,
               Verdict& out) const {
    constexpr size_t kMaxNamed = 3;
    std::vector<std::string> named;
    std::set<pl::JobId> seen;
    std::string links;
    size_t more = 0;
    for (const pl::LinkId l : crossed) {
      bool any = false;
      for (const pl::JobId id : snap_.link_gated[l]) {
        const int prio = snap_.job_priorities.at(id);
        if (prio <= priority) break;  // sorted by priority
        any = true;
        if (!seen.insert(id).second) continue;
        if (named.size() < kMaxNamed) {
          named.push_back(snap_.job_names.at(id) + " (priority " + std::to_string(prio) + ")");
        } else {
          ++more;
        }
      }
      if (any) links += (links.empty() ? "" : ", ") + topology.GetLink(l).name;
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
              bool explain, Shortfall& why) {
  return Evaluation(snap, config, models, args).Run(out, explain, why);
}

int ScoreOf(double cost, const ExtenderConfig& config) {
  const double scale = config.cost_at_zero > 0 ? config.cost_at_zero : 1.0;
  const double s = static_cast<double>(kMaxScore) * std::max(0.0, 1.0 - cost / scale);
  return std::clamp(static_cast<int>(std::lround(s)), 0, kMaxScore);
}

}  // namespace metronome::extender
