// Kubernetes objects (as kube::Cache holds them) into the extender's ClusterState.
#include <gtest/gtest.h>

#include "metronome/extender/extender.hpp"
#include "metronome/extender/kube_inputs.hpp"

namespace metronome::extender {
namespace {

Json Node(const std::string& name, const std::string& zone) {
  return {{"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"topology.kubernetes.io/zone", zone}}}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}

Json Pod(const std::string& name, const std::string& job, const std::string& node,
         const std::string& phase) {
  Json p = {{"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", "default"},
              {"labels", {{"training.kubeflow.org/job-name", job}}}}},
            {"spec", {{"schedulerName", "metronome"}}},
            {"status", {{"phase", phase}}}};
  if (!node.empty()) p["spec"]["nodeName"] = node;
  return p;
}

TEST(KubeInputs, NodesProfilesAndPlacedPodsFillTheState) {
  const std::map<std::string, Json> nodes = {{"n1", Node("n1", "rack-a")},
                                             {"n2", Node("n2", "rack-b")}};
  const std::map<std::string, Json> profiles = {
      {"default/bert",
       {{"metadata", {{"name", "bert"}, {"namespace", "default"}}},
        {"spec",
         {{"jobName", "bert-finetune"},
          {"model", "bert"},
          {"gpuType", "A100"},
          {"priority", "high"}}},
        {"status",
         {{"measuredPeriodMs", 250.0}, {"measuredCommMs", 80.0}, {"bytesPerPhase", 440000000}}}}},
      {"default/cnn",
       {{"metadata", {{"name", "cnn"}, {"namespace", "default"}}},
        {"spec", {{"jobName", "custom-cnn"}, {"periodMs", 240}, {"gradientMB", 97.5}}}}},
      {"default/bad", {{"metadata", {{"name", "bad"}}}, {"spec", {{"jobName", "x"}}}}}};
  std::map<std::string, Json> pods = {
      {"default/a", Pod("a", "bert-finetune", "n1", "Running")},
      {"default/b", Pod("b", "bert-finetune", "n2", "Pending")},
      {"default/c", Pod("c", "bert-finetune", "", "Pending")},      // not bound yet
      {"default/d", Pod("d", "bert-finetune", "n2", "Succeeded")},  // finished
      {"default/e", Pod("e", "", "n1", "Running")},                 // no job
      {"default/f", {{"kind", "Pod"}, {"metadata", {{"generateName", "f-"}}}}},
      {"default/h", Pod("h", "bert-finetune", "n1", "Running")}};
  // A phase that is no string (a broken server or proxy) reads as none, not a throw.
  pods.at("default/h")["status"]["phase"] = 5;
  ClusterState s;
  s.measured["custom-cnn"] = {300'000'000, 90'000'000, 0};  // the registry's stays
  const KubeInputStats stats = ApplyKubeInputs(s, nodes, profiles, pods);
  EXPECT_EQ(stats.profiles_skipped, 1);
  EXPECT_EQ(stats.pods_skipped, 1);
  ASSERT_EQ(s.node_labels.size(), 2u);
  EXPECT_EQ(s.node_labels["n2"]["topology.kubernetes.io/zone"], "rack-b");
  ASSERT_EQ(s.declared.size(), 2u);
  EXPECT_EQ(s.declared["bert-finetune"].model, "bert");
  EXPECT_EQ(s.declared["bert-finetune"].priority, "high");
  EXPECT_EQ(s.declared["custom-cnn"].gradient_mb, 97.5);
  EXPECT_EQ(s.measured["bert-finetune"].period_ns, 250'000'000);
  EXPECT_EQ(s.measured["bert-finetune"].bytes_per_phase, 440'000'000u);
  EXPECT_EQ(s.measured["custom-cnn"].period_ns, 300'000'000);
  EXPECT_EQ(s.placed_pods["bert-finetune"], (std::vector<std::string>{"n1", "n2", "n1"}));
  EXPECT_EQ(s.placed_pods.size(), 1u);

  // And the extender takes it: a new bert-finetune pod scores n1 and n2 (beside its pods) high.
  Extender ext;
  ext.UpdateState(s);
  Json args = {{"Pod", Pod("g", "bert-finetune", "", "Pending")},
               {"Nodes", nullptr},
               {"NodeNames", {"n1", "n2"}}};
  const ExtenderResponse r = ext.HandlePrioritize(args.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ext.Stats().pods_without_profile, 0u);
}

}  // namespace
}  // namespace metronome::extender
