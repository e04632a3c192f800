// The Kubernetes side's pure parts: the extender's ClusterState from the service's view, the
// extender's rack labels, the LinkSchedules written from a plan, and the extender's counters as
// Prometheus families.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "metronome/common/clock.hpp"
#include "metronome/service/kubernetes.hpp"
#include "metronome/service/metrics.hpp"

namespace metronome::service {
namespace {

ClusterView View() {
  ClusterView v;
  v.plan_version = 7;
  v.topology.links = {{"spine", 50e9}};
  TopologyConfig::RackSpec rack{"rack-a", 12.5e9, {{"gpu-a1", 25e9}, {"gpu-a2", 25e9}}};
  v.topology.racks = {rack};
  v.topology.two_tier = TopologyConfig::TwoTier{2, 4, 1e9, 2e9};
  v.topology.unknown_nodes_link = "spine";
  extender::JobSnapshot a;
  a.name = "hp";
  a.priority = 2;
  a.nodes = {"gpu-a1", "gpu-a2"};
  a.profile.period_ns = 200 * kMs;
  a.profile.comm_ns = 150 * kMs;
  a.profile.bytes_per_phase = 1'000'000;
  a.planned = true;
  a.timetable.period_ns = 210 * kMs;
  a.timetable.offset_ns = 5 * kMs;
  a.timetable.window_ns = 160 * kMs;
  a.timetable.late_slack_ns = 20 * kMs;
  extender::JobSnapshot b;
  b.name = "new";
  b.nodes = {"n7"};
  v.jobs = {a, b};
  return v;
}

// The TrafficProfiles of the jobs the service has measured get their figures; those of jobs it
// does not know or has not measured, and objects that do not parse, none.
TEST(Kubernetes, TrafficProfileStatusesOfTheMeasuredJobs) {
  const auto profile = [](const std::string& name, const std::string& job) {
    return nlohmann::json{{"metadata", {{"name", name}, {"namespace", "team-a"}}},
                          {"spec", {{"jobName", job}, {"model", "bert"}}}};
  };
  const std::map<std::string, nlohmann::json> objects = {
      {"team-a/hp-profile", profile("hp-profile", "hp")},
      {"team-a/new-profile", profile("new-profile", "new")},  // not measured yet
      {"team-a/gone", profile("gone", "finished-job")},
      {"team-a/broken", {{"metadata", {{"name", "broken"}}}, {"spec", {{"periodMs", 3}}}}}};
  const auto statuses = TrafficProfileStatusesOf(View(), objects);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].namespace_name, "team-a");
  EXPECT_EQ(statuses[0].name, "hp-profile");
  EXPECT_DOUBLE_EQ(statuses[0].measured_period_ms, 200.0);
  EXPECT_DOUBLE_EQ(statuses[0].measured_comm_ms, 150.0);
  EXPECT_EQ(statuses[0].bytes_per_phase, 1'000'000u);
  EXPECT_EQ(statuses[0].reporting_ranks, 2);
}

TEST(Kubernetes, ClusterStateMirrorsTheView) {
  const extender::ClusterState s = ToClusterState(View());
  EXPECT_EQ(s.version, 7u);
  ASSERT_EQ(s.network.links.size(), 1u);
  EXPECT_EQ(s.network.links[0].name, "spine");
  EXPECT_DOUBLE_EQ(s.network.links[0].capacity_bytes_per_s, 50e9);
  ASSERT_EQ(s.network.racks.size(), 1u);
  EXPECT_EQ(s.network.racks[0].name, "rack-a");
  EXPECT_DOUBLE_EQ(s.network.racks[0].uplink_bytes_per_s, 12.5e9);
  ASSERT_EQ(s.network.racks[0].nodes.size(), 2u);
  EXPECT_EQ(s.network.racks[0].nodes[1].name, "gpu-a2");
  EXPECT_DOUBLE_EQ(s.network.racks[0].nodes[1].nic_bytes_per_s, 25e9);
  ASSERT_TRUE(s.network.two_tier);
  EXPECT_EQ(s.network.two_tier->racks, 2u);
  EXPECT_EQ(s.network.two_tier->nodes_per_rack, 4u);
  EXPECT_DOUBLE_EQ(s.network.two_tier->nic_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(s.network.two_tier->uplink_bytes_per_s, 2e9);
  EXPECT_EQ(s.network.unknown_nodes_link, "spine");
  ASSERT_EQ(s.jobs.size(), 2u);
  const auto& hp = s.jobs[0];
  EXPECT_EQ(hp.name, "hp");
  EXPECT_EQ(hp.priority, 2);
  EXPECT_EQ(hp.nodes, (std::vector<std::string>{"gpu-a1", "gpu-a2"}));
  EXPECT_EQ(hp.profile.period_ns, 200 * kMs);
  EXPECT_EQ(hp.profile.comm_ns, 150 * kMs);
  EXPECT_EQ(hp.profile.bytes_per_phase, 1'000'000u);
  EXPECT_TRUE(hp.planned);
  EXPECT_FALSE(hp.best_effort);
  EXPECT_EQ(hp.timetable.period_ns, 210 * kMs);
  EXPECT_EQ(hp.timetable.offset_ns, 5 * kMs);
  EXPECT_EQ(hp.timetable.window_ns, 160 * kMs);
  EXPECT_EQ(hp.timetable.late_slack_ns, 20 * kMs);
  EXPECT_FALSE(s.jobs[1].planned);
  EXPECT_EQ(s.jobs[1].timetable.period_ns, 0);
}

TEST(Kubernetes, RackLabelsPreferMetronomeRack) {
  KubernetesConfig k;
  EXPECT_EQ(ExtenderConfigFor(k).rack_labels,
            (std::vector<std::string>{"metronome.dev/rack", "topology.kubernetes.io/zone"}));
  k.rack_label = "example.com/rack";
  EXPECT_EQ(ExtenderConfigFor(k).rack_labels,
            (std::vector<std::string>{"metronome.dev/rack", "example.com/rack"}));
  k.rack_label = "metronome.dev/rack";
  EXPECT_EQ(ExtenderConfigFor(k).rack_labels, (std::vector<std::string>{"metronome.dev/rack"}));
}

TEST(Kubernetes, LinkSchedulesFromThePlan) {
  const nlohmann::json links = nlohmann::json::parse(R"([
    {"link": "rack-a/up", "capacity_bytes_per_s": 12.5e9, "hyperperiod_ns": 210000000,
     "planned_utilization": 0.76, "measured_utilization": 0.7, "min_cushion_ns": 30000000,
     "jobs": ["hp"]},
    {"link": "gpu-a1/up", "capacity_bytes_per_s": 25e9, "hyperperiod_ns": 0,
     "planned_utilization": 1.4, "measured_utilization": 0.0, "min_cushion_ns": -1,
     "jobs": ["hp", "ghost"]},
    {"link": "r1n3/up", "capacity_bytes_per_s": 1e9, "jobs": []},
    {"link": "spine", "capacity_bytes_per_s": 50e9, "jobs": []}])");
  const auto out = LinkSchedulesOf(View(), links);
  ASSERT_EQ(out.size(), 4u);
  const auto& [rack, rack_status] = out[0];
  EXPECT_EQ(rack.name, "rack-a-up");
  EXPECT_EQ(rack.kind, "rack-uplink");
  EXPECT_EQ(rack.nodes, (std::vector<std::string>{"gpu-a1", "gpu-a2"}));
  EXPECT_DOUBLE_EQ(rack.capacity_gbps, 100.0);
  EXPECT_EQ(rack_status.plan_version, 7);
  EXPECT_DOUBLE_EQ(rack_status.hyperperiod_ms, 210.0);
  EXPECT_DOUBLE_EQ(rack_status.planned_utilization, 0.76);
  ASSERT_TRUE(rack_status.measured_utilization);
  EXPECT_DOUBLE_EQ(*rack_status.measured_utilization, 0.7);
  EXPECT_DOUBLE_EQ(rack_status.min_cushion_ms, 30.0);
  ASSERT_EQ(rack_status.jobs.size(), 1u);
  const auto& j = rack_status.jobs[0];
  EXPECT_EQ(j.name, "hp");
  EXPECT_EQ(j.priority, 2);
  EXPECT_DOUBLE_EQ(j.period_ms, 210.0);
  EXPECT_DOUBLE_EQ(j.offset_ms, 5.0);
  EXPECT_DOUBLE_EQ(j.window_ms, 160.0);
  EXPECT_DOUBLE_EQ(j.late_slack_ms, 20.0);
  EXPECT_DOUBLE_EQ(j.stretch, 0.05);

  EXPECT_EQ(out[1].first.kind, "node-uplink");
  EXPECT_EQ(out[1].first.nodes, (std::vector<std::string>{"gpu-a1"}));
  EXPECT_DOUBLE_EQ(out[1].second.planned_utilization, 1.0);  // clamped
  EXPECT_DOUBLE_EQ(out[1].second.min_cushion_ms, 0.0);
  EXPECT_EQ(out[1].second.jobs.size(), 1u);  // a job no longer known is left out
  EXPECT_EQ(out[2].first.kind, "node-uplink");
  EXPECT_EQ(out[2].first.nodes, (std::vector<std::string>{"r1n3"}));
  EXPECT_EQ(out[3].first.kind, "explicit");
  EXPECT_TRUE(out[3].first.nodes.empty());
  EXPECT_TRUE(LinkSchedulesOf(View(), nlohmann::json::object()).empty());
}

// Lines of the exposition that start with `prefix`.
std::vector<std::string> Lines(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

// What a new leader takes from the LinkSchedules: each gated job's timetable once (it is listed
// on every link it crosses); best-effort and unplanned entries are not slots; an absurd entry is
// skipped and counted, and loses nothing else.
TEST(Kubernetes, LastPlanFromTheLinkSchedules) {
  const auto job = [](const std::string& name, double period, double offset, double window) {
    return nlohmann::json{{"name", name},       {"periodMs", period}, {"offsetMs", offset},
                          {"windowMs", window}, {"lateSlackMs", 2.5}, {"priority", 1}};
  };
  nlohmann::json be = job("drifter", 300, 0, 300);
  be["bestEffort"] = true;
  nlohmann::json tiny = job("tiny", 1e-7, 0, 5e-8);  // a period that rounds to 0 ns
  tiny["lateSlackMs"] = 0;
  const nlohmann::json list = {
      {"items",
       {{{"status", {{"jobs", {job("a", 210.000001, 5.25, 160), job("b", 210.000001, 170, 30)}}}}},
        {{"status", {{"jobs", {job("a", 210.000001, 5.25, 160), be, job("unplanned", 0, 0, 0)}}}}},
        {{"status",
          {{"jobs",
            {job("huge", 1e300, 0, 1), job("negative", 100, -1, 10), job("wide", 100, 0, 100),
             job("nan", 100, 0, std::nan("")), job("backwards", -100, 0, 10), tiny}}}}},
        {{"status", {{"jobs", "not a list"}}}},
        {{"metadata", {{"name", "no-status"}}}}}}};
  size_t skipped = 0;
  const auto plan = LastPlanOf(list, &skipped);
  ASSERT_EQ(plan.size(), 2u);
  const Timetable& a = plan.at("a");
  EXPECT_EQ(a.period_ns, 210'000'001);
  EXPECT_EQ(a.offset_ns, 5'250'000);
  EXPECT_EQ(a.window_ns, 160 * kMs);
  EXPECT_EQ(a.late_slack_ns, 2'500'000);
  EXPECT_EQ(a.max_wait_ns, a.period_ns - a.window_ns);
  EXPECT_EQ(plan.at("b").offset_ns, 170 * kMs);
  // huge, negative, wide, nan, backwards, tiny, and the status
  // whose jobs are no list
  EXPECT_EQ(skipped, 7u);
  EXPECT_TRUE(LastPlanOf(nlohmann::json::array()).empty());
  EXPECT_TRUE(LastPlanOf(nlohmann::json{{"items", 3}}).empty());
}

TEST(Kubernetes, ExtenderCountersAreCollectedAtEachScrape) {
  Metrics metrics;
  extender::Extender ext(ExtenderConfigFor({}), nullptr);
  const int id = metrics.AddCollector([&] { return ExtenderMetricFamilies(ext.Stats()); });
  EXPECT_EQ(ext.HandleFilter("{").status, 400);
  EXPECT_EQ(ext.HandlePrioritize(R"({"Pod": {"metadata": {"name": "p"}}, "NodeNames": []})").status,
            200);
  EXPECT_EQ(ext.HandlePrioritize(R"({"Pod": {"metadata": {"name": "q", "annotations":)"
                                 R"( {"metronome.dev/ranks": "x"}}}, "NodeNames": []})")
                .status,
            200);
  const std::string text = metrics.Serialize();
  EXPECT_EQ(metrics.CounterTotal("metronome_extender_requests_total"), 3);
  EXPECT_EQ(metrics.CounterTotal("metronome_extender_bad_annotations_total"), 1);
  EXPECT_EQ(metrics.CounterTotal("metronome_extender_bad_requests_total"), 1);
  EXPECT_EQ(Lines(text, "metronome_extender_bad_requests_total{verb=\"filter\"} 1").size(), 1u);
  EXPECT_EQ(Lines(text, "metronome_extender_neutral_answers_total{reason=\"no_job\"} 2").size(),
            1u);
  // Buckets are cumulative, one per bound plus +Inf, which holds every call.
  const auto buckets =
      Lines(text, "metronome_extender_request_duration_seconds_bucket{verb=\"prioritize\"");
  ASSERT_EQ(buckets.size(), extender::LatencyHistogram::kBounds.size() + 1);
  double last = 0;
  for (const std::string& b : buckets) {
    const double v = std::stod(b.substr(b.rfind(' ') + 1));
    EXPECT_GE(v, last) << b;
    last = v;
  }
  EXPECT_NE(buckets.back().find("le=\"+Inf\"} 2"), std::string::npos) << buckets.back();
  EXPECT_EQ(
      Lines(text, "metronome_extender_request_duration_seconds_count{verb=\"filter\"} 1").size(),
      1u);

  metrics.RemoveCollector(id);
  EXPECT_TRUE(Lines(metrics.Serialize(), "metronome_extender_").empty());
}

}  // namespace
}  // namespace metronome::service
