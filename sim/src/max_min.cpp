#include "metronome/sim/max_min.hpp"

#include <algorithm>
#include <limits>

namespace metronome::sim {

namespace {
// Min-heap on share; ties by link index for determinism.
bool HeapLess(double sa, std::uint32_t la, double sb, std::uint32_t lb) {
  return sa > sb || (sa == sb && la > lb);
}
}  // namespace

void MaxMinSolver::Solve(std::span<const double> capacity, std::span<const FlowSpec> flows,
                         std::vector<double>& rates) {
  const std::size_t n_links = capacity.size();
  rates.assign(flows.size(), 0.0);
  if (remaining_.size() < n_links) {
    remaining_.resize(n_links, 0.0);
    unfrozen_.resize(n_links, 0);
    version_.resize(n_links, 0);
    flows_on_link_.resize(n_links);
    dirty_.resize(n_links, 0);
  }
  frozen_.assign(flows.size(), 0);
  touched_.clear();
  heap_.clear();

  // Flows sorted by cap, so that capped flows freeze in order.
  for (std::uint32_t f = 0; f < flows.size(); ++f) {
    for (std::uint32_t l : flows[f].links) {
      if (unfrozen_[l] == 0 && flows_on_link_[l].empty()) {
        touched_.push_back(l);
        remaining_[l] = capacity[l];
      }
      ++unfrozen_[l];
      flows_on_link_[l].push_back(f);
    }
  }
  std::vector<std::uint32_t> capped;
  for (std::uint32_t f = 0; f < flows.size(); ++f) {
    if (flows[f].cap < kUnlimited) capped.push_back(f);
  }
  std::sort(capped.begin(), capped.end(), [&](std::uint32_t a, std::uint32_t b) {
    return flows[a].cap < flows[b].cap || (flows[a].cap == flows[b].cap && a < b);
  });

  auto cmp = [](const HeapEntry& a, const HeapEntry& b) {
    return HeapLess(a.share, a.link, b.share, b.link);
  };
  auto push = [&](std::uint32_t l) {
    ++version_[l];
    if (unfrozen_[l] == 0) return;
    heap_.push_back({std::max(0.0, remaining_[l]) / unfrozen_[l], l, version_[l]});
    std::push_heap(heap_.begin(), heap_.end(), cmp);
  };
  for (std::uint32_t l : touched_) push(l);

  // Freezing a flow changes the fair share of every link it crosses; the heap is refreshed
  // once per link after a whole batch of flows froze, not once per flow.
  auto freeze = [&](std::uint32_t f, double rate) {
    frozen_[f] = 1;
    rates[f] = rate;
    for (std::uint32_t l : flows[f].links) {
      remaining_[l] -= rate;
      --unfrozen_[l];
      if (!dirty_[l]) {
        dirty_[l] = 1;
        dirty_links_.push_back(l);
      }
    }
  };
  auto flush = [&] {
    for (std::uint32_t l : dirty_links_) {
      dirty_[l] = 0;
      push(l);
    }
    dirty_links_.clear();
  };

  std::size_t next_capped = 0;
  std::size_t left = flows.size();
  while (left > 0) {
    // Drop stale heap entries.
    while (!heap_.empty() && heap_.front().version != version_[heap_.front().link]) {
      std::pop_heap(heap_.begin(), heap_.end(), cmp);
      heap_.pop_back();
    }
    while (next_capped < capped.size() && frozen_[capped[next_capped]]) ++next_capped;
    // NOLINTBEGIN(bugprone-narrowing-conversions): clang-tidy 14 reports `c ? x : infinity`
    // as a narrowing from double to double.
    const double link_share = heap_.empty() ? kUnlimited : heap_.front().share;
    const double cap_share =
        next_capped < capped.size() ? flows[capped[next_capped]].cap : kUnlimited;
    // NOLINTEND(bugprone-narrowing-conversions)
    if (link_share == kUnlimited && cap_share == kUnlimited) {
      // Flows that cross no link and have no cap.
      for (std::uint32_t f = 0; f < flows.size(); ++f) {
        if (!frozen_[f]) {
          frozen_[f] = 1;
          rates[f] = kUnlimited;
          --left;
        }
      }
      break;
    }
    if (cap_share <= link_share) {
      freeze(capped[next_capped], cap_share);
      flush();
      --left;
      continue;
    }
    const std::uint32_t l = heap_.front().link;
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    heap_.pop_back();
    // Freeze every unfrozen flow on the bottleneck link at its fair share.
    for (std::uint32_t f : flows_on_link_[l]) {
      if (frozen_[f]) continue;
      freeze(f, link_share);
      --left;
    }
    flush();
  }

  for (std::uint32_t l : touched_) {
    flows_on_link_[l].clear();
    unfrozen_[l] = 0;
  }
}

void MaxMinSolver::SolveByClass(std::span<const double> capacity, std::span<const FlowSpec> flows,
                                std::vector<double>& rates) {
  bool one_class = true;
  for (const FlowSpec& f : flows) {
    one_class = one_class && f.traffic_class == flows[0].traffic_class;
  }
  if (one_class) {
    Solve(capacity, flows, rates);
    return;
  }
  rates.assign(flows.size(), 0.0);
  left_.assign(capacity.begin(), capacity.end());
  // Classes from the highest down; within one, max-min on what the classes above left.
  int cls = std::numeric_limits<int>::max();
  for (;;) {
    int next = std::numeric_limits<int>::min();
    for (const FlowSpec& f : flows) {
      if (f.traffic_class < cls) next = std::max(next, f.traffic_class);
    }
    if (next == std::numeric_limits<int>::min()) break;
    cls = next;
    class_flows_.clear();
    class_index_.clear();
    for (std::uint32_t i = 0; i < flows.size(); ++i) {
      if (flows[i].traffic_class != cls) continue;
      bool starved = false;
      for (const std::uint32_t l : flows[i].links) starved = starved || left_[l] <= 0.0;
      if (starved) continue;  // its betters filled a link it crosses: rate 0
      class_flows_.push_back(flows[i]);
      class_index_.push_back(i);
    }
    if (class_flows_.empty()) continue;
    Solve(left_, class_flows_, class_rates_);
    for (std::size_t k = 0; k < class_index_.size(); ++k) {
      const double r = class_rates_[k];
      rates[class_index_[k]] = r;
      for (const std::uint32_t l : class_flows_[k].links) {
        left_[l] -= r;
        // What rounding leaves of a link its class filled is no capacity for the next class.
        if (left_[l] <= capacity[l] * 1e-12) left_[l] = 0.0;
      }
    }
  }
}

std::vector<double> MaxMinRates(std::span<const double> capacity,
                                const std::vector<std::vector<std::uint32_t>>& flow_links,
                                std::span<const double> caps) {
  std::vector<FlowSpec> specs(flow_links.size());
  for (std::size_t i = 0; i < flow_links.size(); ++i) {
    specs[i].links = flow_links[i];
    if (i < caps.size()) specs[i].cap = caps[i];
  }
  MaxMinSolver solver;
  std::vector<double> rates;
  solver.Solve(capacity, specs, rates);
  return rates;
}

}  // namespace metronome::sim
