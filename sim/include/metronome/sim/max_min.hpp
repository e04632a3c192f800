// Max-min fair sharing of link bandwidth among concurrent transfers (the fluid model's core).
//
// Each flow crosses a set of links and may have its own rate cap. The allocation is the unique
// max-min fair one, found by progressive filling (water-filling): every unfrozen flow's rate
// rises at the same pace; when a link runs out of capacity, the flows crossing it freeze at
// their current rate; a flow that reaches its cap freezes too. Repeats until all are frozen.
//
// Cost: O((F·d + L) log(F·d + L)) for F flows crossing d links each on average, L links —
// each link's fair share is kept in a heap and updated lazily when one of its flows freezes.
//
// SolveByClass models a fabric that serves traffic classes by strict priority (InfiniBand
// service levels on a high-priority VL arbitration table, RoCE DSCP into strict-priority
// queues): the highest class gets its max-min allocation first, each lower class shares what
// the classes above left on each link.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace metronome::sim {

inline constexpr double kUnlimited = std::numeric_limits<double>::infinity();

struct FlowSpec {
  std::span<const std::uint32_t> links;  // link indices; no duplicates
  double cap = kUnlimited;               // the flow's own limit (bytes/s)
  int traffic_class = 0;                 // SolveByClass: higher classes are served first
};

// Reusable working memory, so that the simulator allocates nothing per event.
class MaxMinSolver {
 public:
  // Fills rates[i] for flows[i]. capacity is indexed by link. A flow with no links and no cap
  // gets kUnlimited. Capacities must be > 0.
  void Solve(std::span<const double> capacity, std::span<const FlowSpec> flows,
             std::vector<double>& rates);
  // The same by strict priority between traffic classes, max-min within each. A flow that
  // crosses a link its betters filled gets 0.
  void SolveByClass(std::span<const double> capacity, std::span<const FlowSpec> flows,
                    std::vector<double>& rates);

 private:
  struct HeapEntry {
    double share;
    std::uint32_t link;
    std::uint32_t version;
  };
  std::vector<double> remaining_;
  std::vector<std::uint32_t> unfrozen_;
  std::vector<std::uint32_t> version_;
  std::vector<std::vector<std::uint32_t>> flows_on_link_;
  std::vector<std::uint32_t> touched_;
  std::vector<HeapEntry> heap_;
  std::vector<char> frozen_;
  std::vector<char> dirty_;
  std::vector<std::uint32_t> dirty_links_;
  // SolveByClass's scratch.
  std::vector<double> left_;
  std::vector<FlowSpec> class_flows_;
  std::vector<std::uint32_t> class_index_;
  std::vector<double> class_rates_;
};

// Convenience wrapper for tests and one-off use.
std::vector<double> MaxMinRates(std::span<const double> capacity,
                                const std::vector<std::vector<std::uint32_t>>& flow_links,
                                std::span<const double> caps = {});

}  // namespace metronome::sim
