#include "metronome/models/model_table.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace metronome::models {
namespace {

std::string Joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : ", ") + key;
  return out;
}

class Reader {
 public:
  explicit Reader(std::filesystem::path path) : path_(std::move(path)) {}

  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw ModelTableError(path_.string() + ": " + where + ": " + what);
  }

  YAML::Node Child(const YAML::Node& node, const std::string& name,
                   const std::string& where) const {
    if (!node.IsMap() || !node[name]) Fail(where, "missing '" + name + "'");
    return node[name];
  }

  std::string Text(const YAML::Node& node, const std::string& name,
                   const std::string& where) const {
    const YAML::Node value = Child(node, name, where);
    if (!value.IsScalar()) Fail(where + "." + name, "must be a string");
    return value.as<std::string>();
  }

  // {value: number > 0, source: text} or {value: number > 0, assumption: text}.
  Figure ReadFigure(const YAML::Node& node, const std::string& where) const {
    if (!node.IsMap()) Fail(where, "must be a map with 'value' and 'source' or 'assumption'");
    Figure figure;
    try {
      figure.value = Child(node, "value", where).as<double>();
    } catch (const YAML::Exception&) {
      Fail(where + ".value", "is not a number");
    }
    if (!std::isfinite(figure.value) || figure.value <= 0) Fail(where + ".value", "must be > 0");
    const bool has_source = static_cast<bool>(node["source"]);
    const bool has_assumption = static_cast<bool>(node["assumption"]);
    if (has_source == has_assumption) {
      Fail(where, "needs exactly one of 'source' or 'assumption' (where the number comes from)");
    }
    figure.is_assumption = has_assumption;
    figure.provenance = Text(node, has_source ? "source" : "assumption", where);
    if (figure.provenance.empty()) Fail(where, "provenance is empty");
    return figure;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace

UnknownKeyError::UnknownKeyError(std::string kind, std::string key, std::vector<std::string> known)
    : std::out_of_range("unknown " + kind + " '" + key + "' (known: " + Joined(known) + ")"),
      kind_(std::move(kind)),
      key_(std::move(key)),
      known_(std::move(known)) {}

std::filesystem::path ModelTable::DefaultPath() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): Metronome never calls setenv
  if (const char* env = std::getenv("METRONOME_MODELS"); env != nullptr && *env != '\0') return env;
  return METRONOME_MODELS_DEFAULT_PATH;
}

ModelTable ModelTable::Load(const std::filesystem::path& path) {
  Reader reader(path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::BadFile&) {
    throw ModelTableError("cannot read the model table " + path.string() +
                          " (set METRONOME_MODELS to its path)");
  } catch (const YAML::Exception& e) {
    throw ModelTableError(path.string() + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) reader.Fail("top level", "must be a map with 'gpus' and 'models'");

  ModelTable table;
  table.path_ = path;
  try {
    const YAML::Node gpus = reader.Child(root, "gpus", "top level");
    if (!gpus.IsMap() || gpus.size() == 0) reader.Fail("gpus", "must be a non-empty map");
    for (const auto& entry : gpus) {
      Gpu gpu;
      gpu.key = entry.first.as<std::string>();
      gpu.name = entry.second["name"] ? entry.second["name"].as<std::string>() : gpu.key;
      table.gpus_.push_back(std::move(gpu));
    }
    const YAML::Node models = reader.Child(root, "models", "top level");
    if (!models.IsMap() || models.size() == 0) reader.Fail("models", "must be a non-empty map");
    for (const auto& entry : models) {
      Model model;
      model.key = entry.first.as<std::string>();
      const std::string where = "models." + model.key;
      const YAML::Node& node = entry.second;
      model.name = reader.Text(node, "name", where);
      model.family = node["family"] ? node["family"].as<std::string>() : "";
      model.parameters =
          reader.ReadFigure(reader.Child(node, "parameters", where), where + ".parameters");
      model.gradient_bytes =
          reader.ReadFigure(reader.Child(node, "gradient_bytes", where), where + ".gradient_bytes");
      if (node["batch_per_gpu"]) {
        model.batch_per_gpu = reader.ReadFigure(node["batch_per_gpu"], where + ".batch_per_gpu");
      }
      const YAML::Node compute = reader.Child(node, "compute_ms", where);
      if (!compute.IsMap()) reader.Fail(where + ".compute_ms", "must be a map by GPU key");
      const std::string compute_where = where + ".compute_ms.";
      for (const auto& per_gpu : compute) {
        const auto gpu_key = per_gpu.first.as<std::string>();
        if (std::none_of(table.gpus_.begin(), table.gpus_.end(),
                         [&](const Gpu& g) { return g.key == gpu_key; })) {
          reader.Fail(where + ".compute_ms", "GPU '" + gpu_key + "' is not listed under 'gpus'");
        }
        model.compute_ms[gpu_key] = reader.ReadFigure(per_gpu.second, compute_where + gpu_key);
      }
      for (const auto& gpu : table.gpus_) {
        if (model.compute_ms.count(gpu.key) == 0) {
          reader.Fail(where + ".compute_ms", "no time for GPU '" + gpu.key + "'");
        }
      }
      table.models_.push_back(std::move(model));
    }
  } catch (const YAML::Exception& e) {
    reader.Fail("schema", e.what());
  }
  return table;
}

const Model& ModelTable::GetModel(std::string_view key) const {
  for (const auto& model : models_) {
    if (model.key == key) return model;
  }
  throw UnknownKeyError("model", std::string(key), ModelKeys());
}

const Gpu& ModelTable::GetGpu(std::string_view key) const {
  for (const auto& gpu : gpus_) {
    if (gpu.key == key) return gpu;
  }
  throw UnknownKeyError("GPU", std::string(key), GpuKeys());
}

double ModelTable::ComputeMs(std::string_view model_key, std::string_view gpu_key) const {
  const Model& m = GetModel(model_key);
  GetGpu(gpu_key);  // throws for an unknown GPU
  return m.compute_ms.find(gpu_key)->second.value;
}

std::uint64_t ModelTable::GradientBytes(std::string_view model_key) const {
  return GetModel(model_key).GradientBytes();
}

std::vector<std::string> ModelTable::ModelKeys() const {
  std::vector<std::string> keys;
  for (const auto& model : models_) keys.push_back(model.key);
  return keys;
}

std::vector<std::string> ModelTable::GpuKeys() const {
  std::vector<std::string> keys;
  for (const auto& gpu : gpus_) keys.push_back(gpu.key);
  return keys;
}

}  // namespace metronome::models
