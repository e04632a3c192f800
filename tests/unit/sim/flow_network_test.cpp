// FlowNetwork re-solves only the components a start or an end touched: its rates must be those of
// a solve of every transfer at once, after any sequence of starts and ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "metronome/sim/flow_network.hpp"

namespace metronome::sim {
namespace {

struct Active {
  std::vector<std::uint32_t> links;
  int traffic_class = 0;
};

std::vector<double> SolveAll(const std::vector<double>& capacity,
                             const std::map<std::uint32_t, Active>& active, bool by_class) {
  std::vector<FlowSpec> specs;
  specs.reserve(active.size());
  for (const auto& [id, a] : active) {
    specs.push_back(FlowSpec{a.links, kUnlimited, a.traffic_class});
  }
  MaxMinSolver solver;
  std::vector<double> rates;
  if (by_class) {
    solver.SolveByClass(capacity, specs, rates);
  } else {
    solver.Solve(capacity, specs, rates);
  }
  return rates;
}

void Churn(bool by_class, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Racks of nodes as the simulator numbers them: most transfers stay in one rack, some cross.
  std::vector<double> capacity(48);
  for (double& c : capacity) c = std::uniform_real_distribution(1.0, 10.0)(rng);
  FlowNetwork net(capacity, by_class);
  std::map<std::uint32_t, Active> active;
  std::map<std::uint32_t, double> before;
  std::uint64_t whole_solves = 0;  // the flows a solve of all of them would have solved
  for (int step = 0; step < 3000; ++step) {
    // One to three starts or ends between two resolves, as in one event of the engine.
    const int changes = std::uniform_int_distribution(1, 3)(rng);
    for (int c = 0; c < changes; ++c) {
      const auto id = static_cast<std::uint32_t>(std::uniform_int_distribution(0, 59)(rng));
      if (active.count(id) != 0) {
        net.Remove(id);
        active.erase(id);
        before.erase(id);  // started again, it starts from 0 as a new transfer does
        continue;
      }
      Active a;
      const int rack = std::uniform_int_distribution(0, 5)(rng);
      std::set<std::uint32_t> links;
      const int n = std::uniform_int_distribution(1, 3)(rng);
      for (int k = 0; k < n; ++k) {
        const bool cross = std::uniform_int_distribution(0, 4)(rng) == 0;
        const int r = cross ? std::uniform_int_distribution(0, 5)(rng) : rack;
        links.insert(static_cast<std::uint32_t>(r * 8 + std::uniform_int_distribution(0, 7)(rng)));
      }
      a.links.assign(links.begin(), links.end());
      a.traffic_class = by_class ? std::uniform_int_distribution(0, 2)(rng) : 0;
      active[id] = a;
      net.Add(id, active[id].links, a.traffic_class);
    }
    net.Resolve();
    const std::vector<double> want = SolveAll(capacity, active, by_class);
    std::set<std::uint32_t> changed(net.ChangedFlows().begin(), net.ChangedFlows().end());
    std::size_t k = 0;
    std::vector<double> link_sum(capacity.size(), 0.0);
    for (const auto& [id, a] : active) {
      ASSERT_EQ(net.Rate(id), want[k]) << "step " << step << " flow " << id;
      const auto was = before.find(id);
      const double old = was == before.end() ? 0.0 : was->second;
      if (old != want[k]) {
        EXPECT_TRUE(changed.count(id)) << "step " << step << " flow " << id;
      }
      for (const std::uint32_t l : a.links) link_sum[l] += want[k];
      ++k;
    }
    for (std::uint32_t l = 0; l < capacity.size(); ++l) {
      EXPECT_NEAR(net.LinkRate(l), link_sum[l], 1e-9 * capacity[l]) << "link " << l;
    }
    whole_solves += active.size();
    before.clear();
    k = 0;
    for (const auto& [id, a] : active) before[id] = want[k++];
  }
  // Not a whole re-solve each time: the components touched hold under half the flows (42 %).
  EXPECT_LT(net.FlowsSolved(), whole_solves / 2);
}

TEST(FlowNetwork, RatesEqualASolveOfAllTransfersAfterAnyChurn) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) Churn(false, seed);
}

TEST(FlowNetwork, ByClassRatesEqualASolveOfAllTransfers) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) Churn(true, seed);
}

TEST(FlowNetwork, EndingAnInactiveTransferChangesNothing) {
  FlowNetwork net({10.0}, false);
  const std::vector<std::uint32_t> one = {0};
  net.Add(1, one, 0);
  net.Remove(5);  // never started
  net.Remove(1);
  net.Remove(1);  // ended twice
  net.Resolve();
  EXPECT_EQ(net.LinkFlows(0), 0);
  EXPECT_EQ(net.Rate(5), 0.0);
}

TEST(FlowNetwork, AnEndedTransfersLinksReportNoRate) {
  FlowNetwork net({10.0, 10.0}, false);
  const std::vector<std::uint32_t> both = {0, 1};
  net.Add(7, both, 0);
  net.Resolve();
  EXPECT_EQ(net.Rate(7), 10.0);
  EXPECT_EQ(net.LinkFlows(0), 1);
  net.Remove(7);
  net.Resolve();
  EXPECT_EQ(net.Rate(7), 0.0);
  EXPECT_EQ(net.LinkRate(0), 0.0);
  EXPECT_EQ(net.LinkFlows(1), 0);
  EXPECT_EQ(net.ChangedLinks().size(), 2U);
}

}  // namespace
}  // namespace metronome::sim
