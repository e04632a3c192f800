// The model table: the shipped models.yaml has the 13 models and 4 GPU types with provenance for
// every figure; lookups of unknown keys fail with a message naming the key and the known ones;
// malformed files are rejected with the place of the error.
#include "metronome/models/model_table.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace {

using metronome::models::ModelTable;
using metronome::models::ModelTableError;
using metronome::models::UnknownKeyError;

const std::vector<std::string> kModels = {"vgg11", "vgg16",   "vgg19", "resnet50",  "wideresnet101",
                                          "bert",  "roberta", "xlm",   "camembert", "gpt1",
                                          "gpt2",  "gpt3",    "dlrm"};
const std::vector<std::string> kGpus = {"A100", "V100", "T4", "RTX3090"};

std::filesystem::path WriteTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;  // not const: returned
  std::ofstream(path) << text;
  return path;
}

TEST(ModelTable, ShippedTableHasEveryModelAndGpu) {
  const ModelTable table = ModelTable::LoadDefault();
  EXPECT_EQ(table.ModelKeys(), kModels);
  for (const auto& gpu : kGpus) EXPECT_NO_THROW(table.GetGpu(gpu)) << gpu;
  for (const auto& key : kModels) {
    const auto& model = table.GetModel(key);
    EXPECT_FALSE(model.name.empty());
    EXPECT_FALSE(model.parameters.provenance.empty()) << key;
    EXPECT_FALSE(model.gradient_bytes.provenance.empty()) << key;
    for (const auto& gpu : kGpus) {
      const double ms = table.ComputeMs(key, gpu);
      EXPECT_GT(ms, 1.0) << key << " " << gpu;
      EXPECT_LT(ms, 5000.0) << key << " " << gpu;
      EXPECT_FALSE(model.compute_ms.at(gpu).provenance.empty());
    }
    // A faster GPU never takes longer: A100 < V100 < T4.
    EXPECT_LT(table.ComputeMs(key, "A100"), table.ComputeMs(key, "V100")) << key;
    EXPECT_LT(table.ComputeMs(key, "V100"), table.ComputeMs(key, "T4")) << key;
  }
}

TEST(ModelTable, PublicParameterCounts) {
  const ModelTable table = ModelTable::LoadDefault();
  auto millions = [&](const char* key) { return table.GetModel(key).parameters.value / 1e6; };
  EXPECT_NEAR(millions("resnet50"), 25.6, 0.1);
  EXPECT_NEAR(millions("vgg11"), 132.9, 0.1);
  EXPECT_NEAR(millions("vgg16"), 138.4, 0.1);
  EXPECT_NEAR(millions("vgg19"), 143.7, 0.1);
  EXPECT_NEAR(millions("wideresnet101"), 126.9, 0.1);
  EXPECT_NEAR(millions("roberta"), 125, 1);
  EXPECT_NEAR(millions("gpt2"), 124, 1);
  EXPECT_NEAR(millions("gpt1"), 117, 1);
  EXPECT_NEAR(millions("camembert"), 110, 1);
  EXPECT_NEAR(millions("gpt3"), 125, 1);
  EXPECT_FALSE(table.GetModel("resnet50").parameters.is_assumption);
  EXPECT_TRUE(table.GetModel("dlrm").parameters.is_assumption);
  // fp32 gradients: 4 bytes per parameter (DLRM states its own assumption).
  for (const auto& key : kModels) {
    if (key == "dlrm") continue;
    EXPECT_EQ(table.GradientBytes(key),
              static_cast<std::uint64_t>(table.GetModel(key).parameters.value) * 4)
        << key;
  }
}

TEST(ModelTable, UnknownKeysNameTheKeyAndTheKnownOnes) {
  const ModelTable table = ModelTable::LoadDefault();
  try {
    table.ComputeMs("resnet5O", "A100");
    FAIL() << "no exception";
  } catch (const UnknownKeyError& e) {
    EXPECT_EQ(e.Kind(), "model");
    EXPECT_EQ(e.Key(), "resnet5O");
    EXPECT_EQ(e.Known(), kModels);
    const std::string what = e.what();
    EXPECT_NE(what.find("'resnet5O'"), std::string::npos) << what;
    EXPECT_NE(what.find("resnet50"), std::string::npos) << what;
  }
  try {
    table.ComputeMs("resnet50", "H100");
    FAIL() << "no exception";
  } catch (const UnknownKeyError& e) {
    EXPECT_EQ(e.Kind(), "GPU");
    EXPECT_NE(std::string(e.what()).find("A100, V100, T4, RTX3090"), std::string::npos) << e.what();
  }
}

TEST(ModelTable, EnvironmentOverridesTheDefaultPath) {
  const auto path = WriteTemp("models-env-test.yaml", R"(
gpus: {G1: {name: test}}
models:
  tiny:
    name: Tiny
    parameters: {value: 10, source: test}
    gradient_bytes: {value: 40, assumption: fp32}
    compute_ms: {G1: {value: 5, assumption: test}}
)");
  ::setenv("METRONOME_MODELS", path.c_str(), 1);
  EXPECT_EQ(ModelTable::DefaultPath(), path);
  const ModelTable table = ModelTable::LoadDefault();
  ::unsetenv("METRONOME_MODELS");
  EXPECT_EQ(table.ModelKeys(), std::vector<std::string>{"tiny"});
  EXPECT_EQ(table.ComputeMs("tiny", "G1"), 5.0);
  EXPECT_EQ(table.GradientBytes("tiny"), 40u);
  std::filesystem::remove(path);
}

TEST(ModelTable, MalformedTablesAreRejectedWithThePlace) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    const auto path = WriteTemp("models-bad-test.yaml", text);
    try {
      ModelTable::Load(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ModelTableError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  };
  const std::string head = "gpus: {G1: {name: g}}\nmodels:\n  m:\n    name: M\n";
  expect_error("[1, 2", "not valid YAML");
  expect_error("gpus: {G1: {}}\n", "missing 'models'");
  // A figure without provenance.
  expect_error(head +
                   "    parameters: {value: 1}\n    gradient_bytes: {value: 4, source: s}\n"
                   "    compute_ms: {G1: {value: 1, source: s}}\n",
               "models.m.parameters");
  // A negative number.
  expect_error(
      head +
          "    parameters: {value: -1, source: s}\n    gradient_bytes: {value: 4, source: s}\n"
          "    compute_ms: {G1: {value: 1, source: s}}\n",
      "must be > 0");
  // A GPU missing from a model, and one not declared.
  expect_error(
      head +
          "    parameters: {value: 1, source: s}\n    gradient_bytes: {value: 4, source: s}\n"
          "    compute_ms: {}\n",
      "no time for GPU 'G1'");
  expect_error(
      head +
          "    parameters: {value: 1, source: s}\n    gradient_bytes: {value: 4, source: s}\n"
          "    compute_ms: {G1: {value: 1, source: s}, G2: {value: 1, source: s}}\n",
      "GPU 'G2' is not listed");
  try {
    ModelTable::Load("/nonexistent/models.yaml");
    ADD_FAILURE();
  } catch (const ModelTableError& e) {
    EXPECT_NE(std::string(e.what()).find("METRONOME_MODELS"), std::string::npos);
  }
}

}  // namespace
