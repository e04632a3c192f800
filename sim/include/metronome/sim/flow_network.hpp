// The transfers in flight and their max-min fair rates, kept up to date as transfers start and
// end (the simulator's network).
//
// A transfer's max-min rate depends only on the transfers it reaches through shared links: its
// component of the flow-link graph. A start or an end therefore re-solves only the components
// of the links it touched (max_min.hpp on that component), not the whole cluster: on a cluster
// of thousands of nodes, where most all-reduces stay inside a rack or share a few rack uplinks,
// that is tens of flows instead of thousands. The rates are exactly those of a solve of all
// flows at once (the progressive filling of one component never looks at another's links).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "metronome/sim/max_min.hpp"

namespace metronome::sim {

class FlowNetwork {
 public:
  // capacity by link (bytes/s, > 0). by_class: links serve traffic classes by strict priority
  // (MaxMinSolver::SolveByClass), else one max-min share for all.
  FlowNetwork(std::vector<double> capacity, bool by_class);

  // Starts transfer `id` (the caller's number: the tables grow to it) across `links` (sorted,
  // unique, non-empty; the span must stay valid until Remove). One already active is ended
  // first. Its rate is 0 until Resolve.
  void Add(std::uint32_t id, std::span<const std::uint32_t> links, int traffic_class);
  // Ends transfer `id`; nothing when it is not active.
  void Remove(std::uint32_t id);

  // Re-solves the components touched by Add and Remove since the last call. Afterwards
  // ChangedFlows() lists the active transfers whose rate changed (an added one whose rate is
  // still 0 is not among them) and ChangedLinks() the links whose total rate or transfer count
  // may have.
  void Resolve();
  [[nodiscard]] const std::vector<std::uint32_t>& ChangedFlows() const { return changed_flows_; }
  [[nodiscard]] const std::vector<std::uint32_t>& ChangedLinks() const { return changed_links_; }

  [[nodiscard]] double Rate(std::uint32_t id) const;
  [[nodiscard]] double LinkRate(std::uint32_t link) const { return link_rate_[link]; }
  [[nodiscard]] int LinkFlows(std::uint32_t link) const;
  // The flows re-solved since construction (the cost of the incremental updates).
  [[nodiscard]] std::uint64_t FlowsSolved() const { return flows_solved_; }

 private:
  struct Flow {
    std::span<const std::uint32_t> links;
    int traffic_class = 0;
    double rate = 0.0;
    bool active = false;
  };
  Flow& At(std::uint32_t id);
  void Touch(std::uint32_t link);
  void SolveComponent(std::uint32_t seed_link);

  std::vector<double> capacity_;
  bool by_class_;
  std::vector<Flow> flows_;                          // by id
  std::vector<std::vector<std::uint32_t>> on_link_;  // active ids crossing each link
  std::vector<double> link_rate_;
  std::vector<std::uint32_t> dirty_links_;  // touched since the last Resolve
  std::vector<char> link_mark_;             // dirty, or already in a component this round
  std::vector<char> flow_mark_;
  std::vector<std::uint32_t> changed_flows_;
  std::vector<std::uint32_t> changed_links_;
  // One component's working set.
  std::vector<std::uint32_t> component_flows_;
  std::vector<std::uint32_t> component_links_;
  std::vector<FlowSpec> specs_;
  std::vector<double> rates_;
  MaxMinSolver solver_;
  std::uint64_t flows_solved_ = 0;
};

}  // namespace metronome::sim
