// Max-min fairness on cases small enough to compute by hand.
#include <gtest/gtest.h>

#include "metronome/sim/max_min.hpp"

namespace metronome::sim {
namespace {

TEST(MaxMin, EqualFlowsSplitOneLinkEvenly) {
  const std::vector<double> cap = {10.0};
  const auto r = MaxMinRates(cap, {{0}, {0}, {0}, {0}});
  for (double x : r) EXPECT_DOUBLE_EQ(x, 2.5);
}

// Link 0 (cap 10) carries flows a, b; link 1 (cap 4) carries a, c. Link 1 is the bottleneck:
// a = c = 2; then b takes what link 0 has left: 10 − 2 = 8.
TEST(MaxMin, BottleneckFreezesFirstAndOthersTakeTheRest) {
  const std::vector<double> cap = {10.0, 4.0};
  const auto r = MaxMinRates(cap, {{0, 1}, {0}, {1}});
  EXPECT_DOUBLE_EQ(r[0], 2.0);
  EXPECT_DOUBLE_EQ(r[1], 8.0);
  EXPECT_DOUBLE_EQ(r[2], 2.0);
}

// The classic parking lot: links 0 and 1 (cap 1 each); flow a crosses both, b only 0, c only 1.
// Every flow gets 1/2.
TEST(MaxMin, ParkingLot) {
  const std::vector<double> cap = {1.0, 1.0};
  const auto r = MaxMinRates(cap, {{0, 1}, {0}, {1}});
  for (double x : r) EXPECT_DOUBLE_EQ(x, 0.5);
}

// Three links in a chain with capacities 6, 9, 3. Flows: a on {0,1}, b on {1,2}, c on {0},
// d on {2}. Link 2: b = d = 1.5. Then link 0 (6, flows a, c) → 3 each; link 1 has 9 − 1.5 = 7.5
// left for a alone, more than 3, so a = 3 (limited by link 0).
TEST(MaxMin, ThreeLinkChain) {
  const std::vector<double> cap = {6.0, 9.0, 3.0};
  const auto r = MaxMinRates(cap, {{0, 1}, {1, 2}, {0}, {2}});
  EXPECT_DOUBLE_EQ(r[0], 3.0);
  EXPECT_DOUBLE_EQ(r[1], 1.5);
  EXPECT_DOUBLE_EQ(r[2], 3.0);
  EXPECT_DOUBLE_EQ(r[3], 1.5);
}

TEST(MaxMin, CappedFlowLeavesItsShareToOthers) {
  const std::vector<double> cap = {10.0};
  const std::vector<double> caps = {1.0, kUnlimited, kUnlimited};
  const auto r = MaxMinRates(cap, {{0}, {0}, {0}}, caps);
  EXPECT_DOUBLE_EQ(r[0], 1.0);
  EXPECT_DOUBLE_EQ(r[1], 4.5);
  EXPECT_DOUBLE_EQ(r[2], 4.5);
}

TEST(MaxMin, FlowWithoutLinksIsUnlimitedAndLinksAreFullyUsed) {
  const std::vector<double> cap = {7.0, 3.0};
  const auto r = MaxMinRates(cap, {{}, {0}, {0, 1}});
  EXPECT_EQ(r[0], kUnlimited);
  EXPECT_DOUBLE_EQ(r[2], 3.0);
  EXPECT_DOUBLE_EQ(r[1], 4.0);
}

TEST(MaxMin, SolverIsReusableAcrossCalls) {
  MaxMinSolver solver;
  const std::vector<double> cap = {10.0, 4.0};
  std::vector<std::uint32_t> l0 = {0}, l01 = {0, 1};
  std::vector<FlowSpec> specs = {{l0}, {l01}};
  std::vector<double> rates;
  solver.Solve(cap, specs, rates);
  EXPECT_DOUBLE_EQ(rates[0], 6.0);
  EXPECT_DOUBLE_EQ(rates[1], 4.0);
  specs.pop_back();
  solver.Solve(cap, specs, rates);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_DOUBLE_EQ(rates[0], 10.0);
}

// Strict priority between traffic classes: on one link (cap 10) the class-2 flow takes it all
// and the class-0 flows get nothing; where the class-2 flow is held to 4 by another link
// (cap 4), the two class-0 flows share the 6 it leaves.
TEST(MaxMin, TrafficClassesAreServedByStrictPriority) {
  MaxMinSolver solver;
  const std::vector<double> cap = {10.0, 4.0};
  std::vector<std::uint32_t> l0 = {0}, l01 = {0, 1};
  std::vector<double> rates;
  std::vector<FlowSpec> specs = {{l0, kUnlimited, 2}, {l0, kUnlimited, 0}, {l0, kUnlimited, 0}};
  solver.SolveByClass(cap, specs, rates);
  EXPECT_DOUBLE_EQ(rates[0], 10.0);
  EXPECT_DOUBLE_EQ(rates[1], 0.0);
  EXPECT_DOUBLE_EQ(rates[2], 0.0);
  specs[0].links = l01;
  solver.SolveByClass(cap, specs, rates);
  EXPECT_DOUBLE_EQ(rates[0], 4.0);
  EXPECT_DOUBLE_EQ(rates[1], 3.0);
  EXPECT_DOUBLE_EQ(rates[2], 3.0);
  // One class: plain max-min.
  for (FlowSpec& f : specs) f.traffic_class = 1;
  solver.SolveByClass(cap, specs, rates);
  EXPECT_DOUBLE_EQ(rates[0], 10.0 / 3.0);
  EXPECT_DOUBLE_EQ(rates[1], 10.0 / 3.0);
}

}  // namespace
}  // namespace metronome::sim
