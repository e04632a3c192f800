// Reading job, priority and traffic hints from v1.Pod objects.
#include <gtest/gtest.h>

#include "metronome/extender/pod.hpp"

namespace metronome::extender {
namespace {

Json PodWith(Json labels, Json annotations, Json spec = Json::object()) {
  return {{"metadata",
           {{"name", "p"}, {"namespace", "ns"}, {"labels", labels}, {"annotations", annotations}}},
          {"spec", spec}};
}

TEST(ParsePod, JobFromLabelsInOrderThenAnnotation) {
  EXPECT_EQ(ParsePod(PodWith({{"job-name", "a"}, {"training.kubeflow.org/job-name", "b"}},
                             Json::object()))
                .job,
            "b");
  EXPECT_EQ(ParsePod(PodWith({{"job-name", "a"}, {"metronome.dev/job", "c"}}, Json::object())).job,
            "c");
  EXPECT_EQ(ParsePod(PodWith({{"job-name", "a"}}, Json::object())).job, "a");
  EXPECT_EQ(ParsePod(PodWith(Json::object(), {{"metronome.dev/job", "d"}})).job, "d");
  EXPECT_EQ(ParsePod(PodWith({{"app", "web"}}, Json::object())).job, "");
  // Labels and annotations may be absent altogether.
  EXPECT_EQ(ParsePod({{"metadata", {{"name", "bare"}}}}).job, "");
}

TEST(ParsePod, PriorityClassThenAnnotationThenSpecThenNormal) {
  const Json cls = {{"priorityClassName", "training-high"}, {"priority", 1000000}};
  PodInfo a = ParsePod(PodWith(Json::object(), {{"metronome.dev/priority", "low"}}, cls));
  EXPECT_EQ(a.priority, kPriorityHigh);
  EXPECT_EQ(a.priority_source, "priorityClass");

  const Json low_cls = {{"priorityClassName", "scavenger"}, {"priority", -10}};
  EXPECT_EQ(ParsePod(PodWith(Json::object(), Json::object(), low_cls)).priority, kPriorityLow);
  const Json mid_cls = {{"priorityClassName", "batch"}, {"priority", 100}};
  EXPECT_EQ(ParsePod(PodWith(Json::object(), Json::object(), mid_cls)).priority, kPriorityNormal);

  PodInfo b =
      ParsePod(PodWith(Json::object(), {{"metronome.dev/priority", "high"}}, {{"priority", 0}}));
  EXPECT_EQ(b.priority, kPriorityHigh);
  EXPECT_EQ(b.priority_source, "annotation");
  EXPECT_EQ(ParsePod(PodWith(Json::object(), {{"metronome.dev/priority", "7"}})).priority, 7);

  std::string warnings;
  PodInfo c = ParsePod(
      PodWith(Json::object(), {{"metronome.dev/priority", "urgent"}}, {{"priority", 2000}}), {},
      &warnings);
  EXPECT_EQ(c.priority, kPriorityHigh);
  EXPECT_EQ(c.priority_source, "spec.priority");
  EXPECT_NE(warnings.find("urgent"), std::string::npos);

  PodInfo d = ParsePod(PodWith(Json::object(), Json::object(), {{"priority", 0}}));
  EXPECT_EQ(d.priority, kPriorityNormal);
  EXPECT_EQ(d.priority_source, "default");

  PriorityMapping m;
  m.high_at_least = 50;
  EXPECT_EQ(ParsePod(PodWith(Json::object(), Json::object(), mid_cls), m).priority, kPriorityHigh);

  // What the API server vouches for: spec.priority alone, never the owner's annotation.
  EXPECT_EQ(a.admitted_priority, kPriorityHigh);
  EXPECT_EQ(b.admitted_priority, kPriorityNormal);
  EXPECT_EQ(c.admitted_priority, kPriorityHigh);
  EXPECT_EQ(ParsePod(PodWith(Json::object(), Json::object(), low_cls)).admitted_priority,
            kPriorityLow);
  EXPECT_EQ(
      ParsePod(PodWith(Json::object(), {{"metronome.dev/priority", "high"}})).admitted_priority,
      kPriorityNormal);
}

TEST(ParsePod, IdentityUidAndPhase) {
  Json pod = PodWith({{"job-name", "bert"}}, Json::object(), {{"nodeName", "gpu-3"}});
  pod["metadata"]["uid"] = "0d3c5a2e-7f1b-4c4e-9a51-3f0e6d2b8c11";
  pod["status"] = {{"phase", "Running"}};
  const PodInfo p = ParsePod(pod);
  EXPECT_EQ(p.namespace_name, "ns");
  EXPECT_EQ(p.uid, "0d3c5a2e-7f1b-4c4e-9a51-3f0e6d2b8c11");
  EXPECT_EQ(p.node_name, "gpu-3");
  EXPECT_EQ(p.phase, "Running");
  EXPECT_EQ(ParsePod(PodWith(Json::object(), Json::object())).phase, "");
}

TEST(ParsePod, TrafficHints) {
  std::string warnings;
  PodInfo p = ParsePod(PodWith(Json::object(), {{"metronome.dev/model", "bert"},
                                                {"metronome.dev/gpu-type", "V100"},
                                                {"metronome.dev/period-ms", "240.5"},
                                                {"metronome.dev/gradient-mb", "97.5"},
                                                {"metronome.dev/ranks", "8"}}),
                       {}, &warnings);
  EXPECT_EQ(p.model, "bert");
  EXPECT_EQ(p.gpu_type, "V100");
  EXPECT_EQ(p.period_ms, 240.5);
  EXPECT_EQ(p.gradient_mb, 97.5);
  EXPECT_EQ(p.ranks, 8);
  EXPECT_TRUE(warnings.empty()) << warnings;

  PodInfo bad = ParsePod(PodWith(Json::object(), {{"metronome.dev/period-ms", "fast"},
                                                  {"metronome.dev/gradient-mb", "-3"}}),
                         {}, &warnings);
  EXPECT_FALSE(bad.period_ms);
  EXPECT_FALSE(bad.gradient_mb);
  EXPECT_NE(warnings.find("period-ms"), std::string::npos);
  EXPECT_NE(warnings.find("gradient-mb"), std::string::npos);
}

TEST(ParsePod, NotAPodThrowsInvalidArgument) {
  EXPECT_THROW(ParsePod(Json::array()), std::invalid_argument);
  EXPECT_THROW(ParsePod({{"spec", Json::object()}}), std::invalid_argument);
  EXPECT_THROW(ParsePod({{"metadata", {{"generateName", "x-"}}}}), std::invalid_argument);
  EXPECT_THROW(ParsePod({{"metadata", {{"name", "x"}, {"labels", "nope"}}}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace metronome::extender
