// Helpers for the planner tests: small hand-built instances and the feasibility check that
// every test applies to every plan it produces.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "metronome/planner/checker.hpp"
#include "metronome/planner/model.hpp"
#include "metronome/planner/plan.hpp"

namespace metronome::planner::testing {

inline constexpr Nanos kMs = 1'000'000;
inline constexpr double kCap = 1e9;  // 1 GB/s links

// n explicit links of capacity kCap named L0, L1, ...
inline Topology Links(int n, double capacity = kCap) {
  Topology t;
  for (int i = 0; i < n; ++i) {
    std::string name = "L";  // append, not operator+: GCC 12 -Wrestrict false positive
    name.append(std::to_string(i));
    t.AddLink(name, capacity);
  }
  return t;
}

// A job on explicit links: natural period P, communication c (both ms), β as a share of kCap.
inline Job MakeJob(JobId id, int priority, Nanos period_ms, Nanos comm_ms,
                   std::initializer_list<LinkId> on, double beta_share = 1.0) {
  Job j;
  j.id = id;
  j.priority = priority;
  j.extra_links = on;
  j.profile.period_ns = period_ms * kMs;
  j.profile.comm_ns = comm_ms * kMs;
  j.profile.beta_bps = beta_share * kCap;
  return j;
}

inline const JobPlan& Entry(const Plan& plan, JobId id) {
  const JobPlan* e = plan.Find(id);
  if (e == nullptr) {
    throw std::runtime_error(std::string("no entry for job ").append(std::to_string(id)));
  }
  return *e;
}

// Every plan a test produces goes through the independent checker.
#define EXPECT_FEASIBLE(problem, plan)                                       \
  do {                                                                       \
    const auto report_ = ::metronome::planner::CheckPlan((problem), (plan)); \
    EXPECT_TRUE(report_.ok) << report_.Summary();                            \
  } while (0)

}  // namespace metronome::planner::testing
