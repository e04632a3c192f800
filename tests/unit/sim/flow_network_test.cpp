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
  int started = 0;  // the count of starts before it
};

// The rates of all active transfers (in id order), solved at once.
std::vector<double> SolveAll(const std::vector<double>& capacity,
                             const std::map<std::uint32_t, Active>& active, Sharing sharing) {
  std::vector<FlowSpec> specs;
  specs.reserve(active.size());
  for (const auto& [id, a] : active) {
    // In start order: one class each, the earliest highest.
    const int cls = sharing == Sharing::kStartOrder ? -a.started : a.traffic_class;
    specs.push_back(FlowSpec{a.links, kUnlimited, cls});
  }
  MaxMinSolver solver;
  std::vector<double> rates;
  switch (sharing) {
    case Sharing::kMaxMin:
      solver.Solve(capacity, specs, rates);
      break;
    case Sharing::kByClass:
    case Sharing::kStartOrder:
      solver.SolveByClass(capacity, specs, rates);
      break;
    case Sharing::kAlone:
      for (const FlowSpec& f : specs) {
        double rate = kUnlimited;
        for (const std::uint32_t l : f.links) rate = std::min(rate, capacity[l]);
        rates.push_back(rate);
      }
      break;
  }
  return rates;
}

void Churn(Sharing sharing, std::uint64_t seed) {
  const bool by_class = sharing == Sharing::kByClass;
  std::mt19937_64 rng(seed);
  // Racks of nodes as the simulator numbers them: most transfers stay in one rack, some cross.
  std::vector<double> capacity(48);
  for (double& c : capacity) c = std::uniform_real_distribution(1.0, 10.0)(rng);
  FlowNetwork net(capacity, sharing);
  int starts = 0;
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
      a.started = starts++;
      active[id] = a;
      net.Add(id, active[id].links, a.traffic_class);
    }
    net.Resolve();
    const std::vector<double> want = SolveAll(capacity, active, sharing);
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
  for (std::uint64_t seed = 1; seed <= 4; ++seed) Churn(Sharing::kMaxMin, seed);
}

TEST(FlowNetwork, ByClassRatesEqualASolveOfAllTransfers) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) Churn(Sharing::kByClass, seed);
}

TEST(FlowNetwork, StartOrderRatesEqualASolveOfAllTransfers) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) Churn(Sharing::kStartOrder, seed);
}

TEST(FlowNetwork, AloneEveryTransferRunsAtItsSlowestLink) {
  for (std::uint64_t seed = 1; seed <= 2; ++seed) Churn(Sharing::kAlone, seed);
}

// A later transfer gets what the earlier ones leave of its links: nothing of a link an earlier
// one fills, the rest of one it does not; when the earlier one ends, the later ones take over.
TEST(FlowNetwork, StartOrderServesOneTransferAtATime) {
  FlowNetwork net({10.0, 4.0}, Sharing::kStartOrder);
  const std::vector<std::uint32_t> first = {0};
  const std::vector<std::uint32_t> both = {0, 1};
  const std::vector<std::uint32_t> second = {1};
  net.Add(3, both, 0);
  net.Add(1, first, 0);  // a lower id, started later
  net.Resolve();
  EXPECT_EQ(net.Rate(3), 4.0);  // its slower link
  EXPECT_EQ(net.Rate(1), 6.0);  // what the earlier one leaves of link 0
  net.Add(2, second, 0);
  net.Resolve();
  EXPECT_EQ(net.Rate(2), 0.0);  // link 1 is the earlier one's
  net.Remove(3);
  net.Resolve();
  EXPECT_EQ(net.Rate(1), 10.0);
  EXPECT_EQ(net.Rate(2), 4.0);
}

TEST(FlowNetwork, EndingAnInactiveTransferChangesNothing) {
  FlowNetwork net({10.0}, Sharing::kMaxMin);
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
  FlowNetwork net({10.0, 10.0}, Sharing::kMaxMin);
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
