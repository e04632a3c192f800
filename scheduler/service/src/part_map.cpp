#include "part_map.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace metronome::service {

PartMap::PartMap(size_t parts) : jobs_per_part_(std::max<size_t>(parts, 1), 0) {}

std::optional<size_t> PartMap::PartOf(uint64_t job) const {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.part;
}

std::set<size_t> PartMap::PartsOf(uint64_t job, const std::vector<uint32_t>& links) const {
  std::set<size_t> parts;
  if (const auto part = PartOf(job)) parts.insert(*part);
  for (const uint32_t l : links) {
    const auto it = links_.find(l);
    if (it != links_.end()) parts.insert(it->second.part);
  }
  return parts;
}

void PartMap::Claim(uint64_t job, const std::vector<uint32_t>& links, size_t part) {
  const std::set<size_t> parts = PartsOf(job, links);
  if (part >= Parts() || parts.size() > 1 || (parts.size() == 1 && *parts.begin() != part)) {
    throw std::logic_error("PartMap::Claim: job " + std::to_string(job) + " spans other parts");
  }
  auto [it, fresh] = jobs_.try_emplace(job);
  Held& held = it->second;
  if (fresh) {
    held.part = part;
    ++jobs_per_part_[part];
  }
  for (const uint32_t l : links) {
    const auto at = std::lower_bound(held.links.begin(), held.links.end(), l);
    if (at != held.links.end() && *at == l) continue;
    held.links.insert(at, l);
    Link& link = links_[l];
    link.part = part;
    link.jobs.insert(job);
  }
}

std::vector<uint64_t> PartMap::MoveConnected(size_t from, uint64_t job,
                                             const std::vector<uint32_t>& links, size_t into) {
  std::vector<uint64_t> moved;
  std::vector<uint32_t> start = links;
  const auto own = jobs_.find(job);
  if (own != jobs_.end() && own->second.part == from) {
    // The job itself, also where no link reaches it (planned on none: its ranks on one node).
    own->second.part = into;
    --jobs_per_part_[from];
    ++jobs_per_part_[into];
    moved.push_back(job);
    start.insert(start.end(), own->second.links.begin(), own->second.links.end());
  }
  std::sort(start.begin(), start.end());
  start.erase(std::unique(start.begin(), start.end()), start.end());
  std::vector<uint32_t> frontier;
  for (const uint32_t l : start) {
    const auto it = links_.find(l);
    if (it != links_.end() && it->second.part == from) frontier.push_back(l);
  }
  // Every link reached changes part as it is reached, so none is visited twice.
  for (const uint32_t l : frontier) links_.at(l).part = into;
  while (!frontier.empty()) {
    const uint32_t l = frontier.back();
    frontier.pop_back();
    for (const uint64_t j : links_.at(l).jobs) {
      Held& held = jobs_.at(j);
      if (held.part != from) continue;
      held.part = into;
      --jobs_per_part_[from];
      ++jobs_per_part_[into];
      moved.push_back(j);
      for (const uint32_t next : held.links) {
        Link& link = links_.at(next);
        if (link.part != from) continue;
        link.part = into;
        frontier.push_back(next);
      }
    }
  }
  return moved;
}

void PartMap::Release(uint64_t job) {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (const uint32_t l : it->second.links) {
    const auto link = links_.find(l);
    link->second.jobs.erase(job);
    if (link->second.jobs.empty()) links_.erase(link);
  }
  --jobs_per_part_[it->second.part];
  jobs_.erase(it);
}

}  // namespace metronome::service
