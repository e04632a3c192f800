// The transfers in flight and their rates (max-min fair, or as a reference fabric shares),
// kept up to date as transfers start and end (the simulator's network).
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

// How a link divides its capacity among the transfers that cross it.
enum class Sharing {
  kMaxMin,   // one max-min fair share for all: what a fabric does by default
  kByClass,  // traffic classes by strict priority, max-min within a class (SolveByClass)
  // One transfer at a time, in the order they started; a later one gets only what the earlier
  // ones leave. Taking turns without a gate's idle gaps or its limits: a reference, not a fabric.
  kStartOrder,
  // Every transfer at its rate alone (the slowest link it crosses): no contention at all, the
  // bound of what removing collisions could win. A reference, not a fabric.
  kAlone,
};

class FlowNetwork {
 public:
  // capacity by link (bytes/s, > 0).
  FlowNetwork(std::vector<double> capacity, Sharing sharing);

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
    std::uint64_t started = 0;  // the count of Adds before it (kStartOrder's rank)
    double rate = 0.0;
    bool active = false;
  };
  Flow& At(std::uint32_t id);
  void Touch(std::uint32_t link);
  void SolveComponent(std::uint32_t seed_link);
  void SolveInStartOrder();

  std::vector<double> capacity_;
  Sharing sharing_;
  std::uint64_t adds_ = 0;
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
  std::vector<std::size_t> order_;  // kStartOrder: the component's transfers, earliest first
  MaxMinSolver solver_;
  std::uint64_t flows_solved_ = 0;
};

}  // namespace metronome::sim
