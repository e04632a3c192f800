// Building the planner snapshot from a ClusterState (see snapshot.hpp).
#include "snapshot.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include <spdlog/spdlog.h>

#include "metronome/controller/topology.hpp"
#include "metronome/planner/model.hpp"
#include "profile_input.hpp"

namespace metronome::extender {

namespace {

std::string Normalize(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) out.push_back(static_cast<char>(std::toupper(c)));
  }
  return out;
}

}  // namespace

std::string LabelOf(const NodeLabels* labels, const std::vector<std::string>& keys) {
  if (labels == nullptr) return {};
  for (const std::string& key : keys) {
    const auto it = labels->find(key);
    if (it != labels->end() && !it->second.empty()) return it->second;
  }
  return {};
}

std::string MatchGpu(const std::string& label_value, const models::ModelTable* models) {
  if (models == nullptr || label_value.empty()) return {};
  const std::string value = Normalize(label_value);
  std::string best;
  for (const std::string& key : models->GpuKeys()) {
    const std::string k = Normalize(key);
    if (!k.empty() && value.find(k) != std::string::npos && k.size() > Normalize(best).size()) {
      best = key;
    }
  }
  return best;
}

std::shared_ptr<const Extender::Snapshot> BuildSnapshot(
    const ClusterState& state, const std::map<std::string, NodeLabels>& extra_labels,
    const ExtenderConfig& config, const models::ModelTable* models) {
  // The scheduler's topology, as its planner has it; then the nodes that only labels place.
  const controller::TopologyConfig& net = state.network;
  pl::Topology t = controller::BuildTopology(net);
  std::vector<double> nic;  // by NodeId
  std::unordered_map<std::string, pl::NodeId> node_ids;
  for (pl::NodeId n = 0; n < t.NodeCount(); ++n) {
    node_ids.emplace(t.NodeName(n), n);
    const std::optional<pl::LinkId> up = t.NodeUplink(n);
    nic.push_back(up ? t.GetLink(*up).capacity_bps : 0.0);
  }
  std::unordered_map<std::string, pl::RackId> racks;
  for (pl::RackId r = 0; r < t.RackCount(); ++r) racks.emplace(t.RackName(r), r);
  std::optional<pl::LinkId> unknown_link;
  for (pl::LinkId l = 0; l < t.LinkCount() && !net.unknown_nodes_link.empty(); ++l) {
    if (t.GetLink(l).name == net.unknown_nodes_link) {
      unknown_link = l;
      break;
    }
  }

  // Every other node we know of: placed by its rack label, else behind the unknown-nodes link.
  const auto labels_of = [&](const std::string& name) -> const NodeLabels* {
    if (const auto it = state.node_labels.find(name); it != state.node_labels.end()) {
      return &it->second;
    }
    if (const auto it = extra_labels.find(name); it != extra_labels.end()) return &it->second;
    return nullptr;
  };
  std::set<std::string> others;
  std::unordered_set<std::string> unplaced;
  for (const auto& [name, labels] : state.node_labels) others.insert(name);
  for (const auto& [name, labels] : extra_labels) others.insert(name);
  for (const auto& j : state.jobs) others.insert(j.nodes.begin(), j.nodes.end());
  for (const auto& [job, nodes] : state.placed_pods) others.insert(nodes.begin(), nodes.end());
  for (const std::string& name : others) {
    if (name.empty() || node_ids.count(name) != 0) continue;
    const std::string rack_name = LabelOf(labels_of(name), config.rack_labels);
    if (rack_name.empty()) {
      node_ids.emplace(name, t.AddNode(name, std::nullopt, unknown_link));
      nic.push_back(0.0);
      unplaced.insert(name);
      continue;
    }
    auto rit = racks.find(rack_name);
    if (rit == racks.end()) {
      const pl::LinkId up = t.AddLink(rack_name + "/up", config.default_rack_uplink_bytes_per_s);
      rit = racks.emplace(rack_name, t.AddRack(rack_name, up)).first;
    }
    const pl::LinkId link = t.AddLink(name + "/up", config.default_nic_bytes_per_s);
    node_ids.emplace(name, t.AddNode(name, rit->second, link));
    nic.push_back(config.default_nic_bytes_per_s);
  }

  auto snap = std::make_shared<Extender::Snapshot>(t);
  snap->version = state.version;
  snap->nodes = {std::move(node_ids), unknown_link};
  snap->planning = state.planning;
  snap->node_nic = std::move(nic);
  snap->unplaced = std::move(unplaced);
  snap->node_gpu.assign(t.NodeCount(), std::string());
  for (const auto& [name, id] : snap->nodes.ids) {
    snap->node_gpu[id] = MatchGpu(LabelOf(labels_of(name), config.gpu_labels), models);
  }
  snap->measured = state.measured;
  snap->declared = state.declared;

  // The jobs: a job the scheduler planned with the profile and the window its planner gave it,
  // any other with a known profile as that planner would take it, unplanned.
  const pl::Topology& topo = snap->planner.GetTopology();
  // The scheduler's jobs and their plan entries, by the registry's id (thousands of jobs: no
  // search per job).
  std::unordered_map<uint64_t, const pl::Job*> planned_jobs;
  std::unordered_map<uint64_t, const pl::JobPlan*> plan_entries;
  for (const auto& part : state.plan) {
    if (!part) continue;
    for (const pl::Job& j : part->jobs) planned_jobs.emplace(j.id, &j);
    for (const pl::JobPlan& p : part->plan->jobs) plan_entries.emplace(p.id, &p);
  }
  pl::JobId next_id = 1;
  const auto add_job = [&](const std::string& name, int priority,
                           const std::vector<std::string>& nodes, const MeasuredProfile& profile,
                           const JobSnapshot* registered) {
    controller::PlanJob input;
    input.name = name;
    input.priority = priority;
    input.nodes = nodes;
    input.profile = profile;
    pl::Job job = controller::ToPlannerJob(input, topo, snap->nodes, snap->planning);
    job.id = next_id++;
    if (registered != nullptr) {
      const auto it = planned_jobs.find(registered->id);
      const auto entry = plan_entries.find(registered->id);
      if (it != planned_jobs.end() && entry != plan_entries.end()) {
        job.profile = it->second->profile;
        pl::JobPlan p = *entry->second;
        p.id = job.id;
        snap->plan.jobs.push_back(p);
      }
    }
    snap->job_names[job.id] = name;
    snap->job_priorities[job.id] = job.priority;
    snap->job_ids[name] = job.id;
    snap->jobs.push_back(std::move(job));
  };

  for (const JobSnapshot& j : state.jobs) {
    std::vector<std::string> nodes = j.nodes;
    if (const auto it = state.placed_pods.find(j.name); it != state.placed_pods.end()) {
      nodes.insert(nodes.end(), it->second.begin(), it->second.end());
    }
    snap->job_nodes[j.name] = nodes;
    if (j.profile.period_ns > 0 && j.profile.comm_ns >= 0) {
      snap->measured[j.name] = j.profile;
      add_job(j.name, j.priority, nodes, ProfileFromMeasured(j.profile), &j);
    }
  }
  // Jobs whose pods are bound but whose shims have not registered yet: their earlier measured
  // or declared profile stands in, so that new pods already avoid their links.
  for (const auto& [name, nodes] : state.placed_pods) {
    if (snap->job_nodes.count(name) != 0) continue;
    snap->job_nodes[name] = nodes;
    int priority = kPriorityNormal;
    std::optional<MeasuredProfile> profile;
    if (const auto m = state.measured.find(name);
        m != state.measured.end() && m->second.period_ns > 0) {
      profile = ProfileFromMeasured(m->second);
    }
    if (const auto d = state.declared.find(name); d != state.declared.end()) {
      if (const auto p = ParsePriorityWord(d->second.priority); p) priority = *p;
      const std::string gpu = d->second.gpu_type.empty() ? config.default_gpu : d->second.gpu_type;
      if (!profile) {
        profile = ProfileFromDeclared(d->second, gpu, config.default_nic_bytes_per_s,
                                      static_cast<int>(nodes.size()), models);
      }
    }
    if (profile) add_job(name, priority, nodes, *profile, nullptr);
  }

  // The planner refuses unusable jobs (validate()); one bad entry must not blind the extender.
  pl::Problem all;
  all.topology = topo;
  all.jobs = snap->jobs;
  if (!pl::Validate(all).empty()) {
    std::vector<pl::Job> usable;
    for (pl::Job& job : snap->jobs) {
      pl::Problem probe;
      probe.topology = topo;
      probe.jobs = {job};
      if (const auto defects = pl::Validate(probe); !defects.empty()) {
        spdlog::warn("extender: job {} left out of the what-if: {}", snap->job_names[job.id],
                     defects.front());
        continue;
      }
      usable.push_back(std::move(job));
    }
    snap->jobs = std::move(usable);
  }
  try {
    snap->planner.Adopt(snap->jobs, snap->plan);
  } catch (const std::exception& e) {
    spdlog::error("extender: the planner refused the current plan ({}); scoring without it",
                  e.what());
    snap->jobs.clear();
    snap->plan = {};
    snap->planner.Adopt({}, snap->plan);
  }
  const pl::Plan current = snap->planner.Snapshot();
  // (adopt() replaced the planner's workspace: `topo` no longer refers to it.)
  snap->link_load.assign(snap->planner.GetTopology().LinkCount(), 0.0);
  for (const pl::LinkPlan& l : current.links) {
    if (l.link < snap->link_load.size()) snap->link_load[l.link] = l.served_load;
  }
  snap->link_gated.assign(snap->planner.GetTopology().LinkCount(), {});
  std::unordered_map<pl::JobId, const pl::JobPlan*> current_entries;
  for (const pl::JobPlan& p : current.jobs) current_entries.emplace(p.id, &p);
  for (const pl::Job& job : snap->jobs) {
    const auto p = current_entries.find(job.id);
    if (p == current_entries.end() || p->second->best_effort) continue;
    for (const pl::LinkId l : pl::JobLinks(snap->planner.GetTopology(), job)) {
      snap->link_gated[l].push_back(job.id);
    }
  }
  for (auto& jobs : snap->link_gated) {
    std::sort(jobs.begin(), jobs.end(), [&](pl::JobId a, pl::JobId b) {
      return snap->job_priorities[a] > snap->job_priorities[b];
    });
  }
  return snap;
}

}  // namespace metronome::extender
