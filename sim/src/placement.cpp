#include "metronome/sim/placement.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace metronome::sim {

namespace {

Placement FromMap(const std::map<std::uint32_t, int>& m) {
  Placement p;
  for (const auto& [node, g] : m) p.node_gpus.emplace_back(node, g);
  return p;
}

std::optional<Placement> Spread(const Cluster& cluster, std::vector<int> free_gpus,
                                const JobSpec& job, std::mt19937_64& rng) {
  std::map<std::uint32_t, int> taken;
  int left = job.gpus;
  while (left > 0) {
    const int pod = std::min(job.gpus_per_pod, left);
    double best = -1.0;
    std::uint32_t chosen = 0;
    int ties = 0;
    for (std::uint32_t n = 0; n < cluster.nodes.size(); ++n) {
      if (free_gpus[n] < pod) continue;
      const double score =
          static_cast<double>(free_gpus[n] - pod) / static_cast<double>(cluster.nodes[n].gpus);
      if (score > best + 1e-12) {
        best = score;
        chosen = n;
        ties = 1;
      } else if (score > best - 1e-12) {
        // Reservoir sampling over equal scores: each tied node is chosen with equal chance.
        ++ties;
        if (std::uniform_int_distribution<int>(1, ties)(rng) == 1) chosen = n;
      }
    }
    if (best < 0) return std::nullopt;
    free_gpus[chosen] -= pod;
    taken[chosen] += pod;
    left -= pod;
  }
  return FromMap(taken);
}

// Takes ranks from the given nodes, fullest-free first, in multiples of the pod size.
// Returns the nodes used, or nothing when they cannot hold the job.
std::optional<std::map<std::uint32_t, int>> TakeFrom(std::vector<std::uint32_t> nodes,
                                                     const std::vector<int>& free_gpus, int gpus,
                                                     int pod) {
  std::stable_sort(nodes.begin(), nodes.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return free_gpus[a] > free_gpus[b]; });
  std::map<std::uint32_t, int> taken;
  int left = gpus;
  for (std::uint32_t n : nodes) {
    if (left == 0) break;
    int can = (free_gpus[n] / pod) * pod;
    if (can == 0 && free_gpus[n] >= left) can = left;
    const int use = std::min(can, left);
    if (use > 0) {
      taken[n] = use;
      left -= use;
    }
  }
  if (left > 0) return std::nullopt;
  return taken;
}

std::vector<Placement> Candidates(const Cluster& cluster, const std::vector<int>& free_gpus,
                                  const JobSpec& job) {
  // One node: best fit.
  std::optional<std::uint32_t> best_node;
  for (std::uint32_t n = 0; n < cluster.nodes.size(); ++n) {
    if (free_gpus[n] >= job.gpus && (!best_node || free_gpus[n] < free_gpus[*best_node])) {
      best_node = n;
    }
  }
  if (best_node) return {FromMap({{*best_node, job.gpus}})};

  // One rack: fewest nodes, then least free capacity left (best fit).
  struct RackCandidate {
    std::map<std::uint32_t, int> taken;
    int rack_free = 0;
  };
  std::vector<RackCandidate> racks;
  for (const Cluster::Rack& rack : cluster.racks) {
    auto taken = TakeFrom(rack.nodes, free_gpus, job.gpus, job.gpus_per_pod);
    if (!taken) continue;
    int rack_free = 0;
    for (std::uint32_t n : rack.nodes) rack_free += free_gpus[n];
    racks.push_back({std::move(*taken), rack_free});
  }
  if (!racks.empty()) {
    std::stable_sort(racks.begin(), racks.end(),
                     [](const RackCandidate& a, const RackCandidate& b) {
                       return a.taken.size() < b.taken.size() ||
                              (a.taken.size() == b.taken.size() && a.rack_free < b.rack_free);
                     });
    std::vector<Placement> out;
    out.reserve(racks.size());
    for (const RackCandidate& r : racks) out.push_back(FromMap(r.taken));
    return out;
  }

  // Several racks: the racks with the most free GPUs first.
  std::vector<std::uint32_t> order(cluster.racks.size());
  std::iota(order.begin(), order.end(), 0u);
  std::vector<int> rack_free(cluster.racks.size(), 0);
  for (std::uint32_t r = 0; r < cluster.racks.size(); ++r) {
    for (std::uint32_t n : cluster.racks[r].nodes) rack_free[r] += free_gpus[n];
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return rack_free[a] > rack_free[b]; });
  auto span = [&](const std::vector<std::uint32_t>& rack_order) -> std::optional<Placement> {
    std::vector<std::uint32_t> nodes;
    int have = 0;
    for (std::uint32_t r : rack_order) {
      if (have >= job.gpus) break;
      if (rack_free[r] == 0) continue;
      // Within a rack, its fullest-free nodes first; racks in the given order.
      std::vector<std::uint32_t> rn = cluster.racks[r].nodes;
      std::stable_sort(rn.begin(), rn.end(), [&](std::uint32_t a, std::uint32_t b) {
        return free_gpus[a] > free_gpus[b];
      });
      nodes.insert(nodes.end(), rn.begin(), rn.end());
      have += rack_free[r];
    }
    std::map<std::uint32_t, int> taken;
    int left = job.gpus;
    for (std::uint32_t n : nodes) {
      if (left == 0) break;
      int can = (free_gpus[n] / job.gpus_per_pod) * job.gpus_per_pod;
      if (can == 0 && free_gpus[n] >= left) can = left;
      const int use = std::min(can, left);
      if (use > 0) {
        taken[n] = use;
        left -= use;
      }
    }
    if (left > 0) return std::nullopt;
    return FromMap(taken);
  };
  // Pack's choice: the racks with the most free GPUs. Then, as alternatives for a scored
  // placement, the same recipe started from each other rack (other sets of rack uplinks).
  std::vector<Placement> out;
  auto first = span(order);
  if (!first) return {};
  out.push_back(std::move(*first));
  for (std::uint32_t start : order) {
    if (rack_free[start] == 0 || start == order.front()) continue;
    std::vector<std::uint32_t> alt = {start};
    for (std::uint32_t r : order) {
      if (r != start) alt.push_back(r);
    }
    auto p = span(alt);
    if (!p) continue;
    bool seen = false;
    for (const Placement& q : out) seen = seen || q.node_gpus == p->node_gpus;
    if (!seen) out.push_back(std::move(*p));
  }
  return out;
}

}  // namespace

std::optional<Placement> PlaceJob(PlacementKind kind, const Cluster& cluster,
                                  const std::vector<int>& free_gpus, const JobSpec& job,
                                  std::mt19937_64& rng) {
  if (kind == PlacementKind::kSpread) return Spread(cluster, free_gpus, job, rng);
  std::vector<Placement> c = Candidates(cluster, free_gpus, job);
  if (c.empty()) return std::nullopt;
  return std::move(c.front());
}

std::vector<Placement> PackCandidates(const Cluster& cluster, const std::vector<int>& free_gpus,
                                      const JobSpec& job) {
  return Candidates(cluster, free_gpus, job);
}

std::optional<Placement> PlacePinned(const Cluster& cluster, const std::vector<int>& free_gpus,
                                     const JobSpec& job) {
  std::vector<std::uint32_t> nodes;
  for (const std::string& name : job.nodes) nodes.push_back(cluster.node_index.at(name));
  // Round-robin ranks over the pinned nodes, skipping full ones.
  std::map<std::uint32_t, int> taken;
  std::vector<int> room;
  room.reserve(nodes.size());
  for (std::uint32_t n : nodes) room.push_back(free_gpus[n]);
  int left = job.gpus;
  while (left > 0) {
    bool progress = false;
    for (std::size_t i = 0; i < nodes.size() && left > 0; ++i) {
      if (room[i] == 0) continue;
      --room[i];
      ++taken[nodes[i]];
      --left;
      progress = true;
    }
    if (!progress) return std::nullopt;
  }
  return FromMap(taken);
}

}  // namespace metronome::sim
