#include "metronome/sim/flow_network.hpp"

#include <algorithm>
#include <utility>

namespace metronome::sim {

FlowNetwork::FlowNetwork(std::vector<double> capacity, Sharing sharing)
    : capacity_(std::move(capacity)),
      sharing_(sharing),
      on_link_(capacity_.size()),
      link_rate_(capacity_.size(), 0.0),
      link_mark_(capacity_.size(), 0) {}

FlowNetwork::Flow& FlowNetwork::At(std::uint32_t id) {
  if (id >= flows_.size()) {
    flows_.resize(id + 1);
    flow_mark_.resize(id + 1, 0);
  }
  return flows_[id];
}

void FlowNetwork::Touch(std::uint32_t link) {
  if (link_mark_[link] != 0) return;
  link_mark_[link] = 1;
  dirty_links_.push_back(link);
}

void FlowNetwork::Add(std::uint32_t id, std::span<const std::uint32_t> links, int traffic_class) {
  Remove(id);
  Flow& f = At(id);
  f = Flow{links, traffic_class, adds_++, 0.0, true};
  for (const std::uint32_t l : links) {
    on_link_[l].push_back(id);
    Touch(l);
  }
}

void FlowNetwork::Remove(std::uint32_t id) {
  if (id >= flows_.size() || !flows_[id].active) return;
  Flow& f = flows_[id];
  for (const std::uint32_t l : f.links) {
    std::vector<std::uint32_t>& ids = on_link_[l];
    *std::find(ids.begin(), ids.end(), id) = ids.back();
    ids.pop_back();
    Touch(l);
  }
  f = Flow{};
}

double FlowNetwork::Rate(std::uint32_t id) const {
  return id < flows_.size() ? flows_[id].rate : 0.0;
}

int FlowNetwork::LinkFlows(std::uint32_t link) const {
  return static_cast<int>(on_link_[link].size());
}

void FlowNetwork::Resolve() {
  changed_flows_.clear();
  changed_links_.clear();
  // link_mark_: 1 = touched, 2 = in a component solved this round (or empty).
  for (const std::uint32_t l : dirty_links_) {
    if (link_mark_[l] == 2) continue;
    if (on_link_[l].empty()) {
      link_mark_[l] = 2;
      link_rate_[l] = 0.0;
      changed_links_.push_back(l);
      continue;
    }
    SolveComponent(l);
  }
  for (const std::uint32_t l : changed_links_) link_mark_[l] = 0;
  dirty_links_.clear();
}

void FlowNetwork::SolveComponent(std::uint32_t seed_link) {
  // The flows and links reachable from the seed through shared links.
  component_flows_.clear();
  component_links_.assign(1, seed_link);
  link_mark_[seed_link] = 2;
  for (std::size_t i = 0; i < component_links_.size(); ++i) {
    for (const std::uint32_t id : on_link_[component_links_[i]]) {
      if (flow_mark_[id] != 0) continue;
      flow_mark_[id] = 1;
      component_flows_.push_back(id);
      for (const std::uint32_t l : flows_[id].links) {
        if (link_mark_[l] == 2) continue;
        link_mark_[l] = 2;
        component_links_.push_back(l);
      }
    }
  }
  // In id order: the same component solves the same way whatever order its flows started in.
  std::sort(component_flows_.begin(), component_flows_.end());
  specs_.resize(component_flows_.size());
  for (std::size_t k = 0; k < component_flows_.size(); ++k) {
    const Flow& f = flows_[component_flows_[k]];
    specs_[k] = FlowSpec{f.links, kUnlimited, f.traffic_class};
  }
  switch (sharing_) {
    case Sharing::kMaxMin:
      solver_.Solve(capacity_, specs_, rates_);
      break;
    case Sharing::kByClass:
      solver_.SolveByClass(capacity_, specs_, rates_);
      break;
    case Sharing::kStartOrder:
      SolveInStartOrder();
      break;
    case Sharing::kAlone:
      rates_.assign(specs_.size(), 0.0);
      for (std::size_t k = 0; k < specs_.size(); ++k) {
        double rate = capacity_[specs_[k].links.front()];
        for (const std::uint32_t l : specs_[k].links) rate = std::min(rate, capacity_[l]);
        rates_[k] = rate;
      }
      break;
  }
  flows_solved_ += component_flows_.size();
  for (std::size_t k = 0; k < component_flows_.size(); ++k) {
    const std::uint32_t id = component_flows_[k];
    flow_mark_[id] = 0;
    if (flows_[id].rate != rates_[k]) {
      flows_[id].rate = rates_[k];
      changed_flows_.push_back(id);
    }
  }
  for (const std::uint32_t l : component_links_) {
    double sum = 0.0;
    for (const std::uint32_t id : on_link_[l]) sum += flows_[id].rate;
    link_rate_[l] = sum;
    changed_links_.push_back(l);
  }
}

void FlowNetwork::SolveInStartOrder() {
  // Strict priority with one class per transfer, the earliest highest: the component's ranks,
  // so that the classes stay small whatever the count of transfers ever started.
  order_.resize(specs_.size());
  for (std::size_t k = 0; k < order_.size(); ++k) order_[k] = k;
  std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    return flows_[component_flows_[a]].started < flows_[component_flows_[b]].started;
  });
  for (std::size_t rank = 0; rank < order_.size(); ++rank) {
    specs_[order_[rank]].traffic_class = static_cast<int>(order_.size() - rank);
  }
  solver_.SolveByClass(capacity_, specs_, rates_);
}

}  // namespace metronome::sim
