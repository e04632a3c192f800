// The model table: per model, its parameter count, gradient bytes per iteration and per-GPU
// compute time per iteration, each figure with its provenance (a source, or a stated assumption).
// The data lives in common/models/models.yaml; this is its loader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace metronome::models {

// A number with where it comes from.
struct Figure {
  double value = 0;
  std::string provenance;      // the source, or the assumption
  bool is_assumption = false;  // true: `assumption:`, false: `source:`
};

struct Gpu {
  std::string key;  // "A100"
  std::string name;
};

struct Model {
  std::string key;     // "resnet50"
  std::string name;    // "ResNet-50"
  std::string family;  // "cnn", "transformer", "recommendation"
  Figure parameters;
  Figure gradient_bytes;
  Figure batch_per_gpu;
  std::map<std::string, Figure, std::less<>> compute_ms;  // by GPU key

  std::uint64_t GradientBytes() const { return static_cast<std::uint64_t>(gradient_bytes.value); }
};

// The file is missing, is not YAML, or breaks the table's schema (the message says where).
class ModelTableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A model or GPU key that the table does not have. The message names the key and the known ones.
class UnknownKeyError : public std::out_of_range {
 public:
  UnknownKeyError(std::string kind, std::string key, std::vector<std::string> known);
  const std::string& Kind() const { return kind_; }  // "model" or "GPU"
  const std::string& Key() const { return key_; }
  const std::vector<std::string>& Known() const { return known_; }

 private:
  std::string kind_;
  std::string key_;
  std::vector<std::string> known_;
};

class ModelTable {
 public:
  // Loads and validates a table. Throws ModelTableError.
  static ModelTable Load(const std::filesystem::path& path);
  // $METRONOME_MODELS when set, else the models.yaml of the source tree this was built from.
  static std::filesystem::path DefaultPath();
  static ModelTable LoadDefault() { return Load(DefaultPath()); }

  // Lookups; throw UnknownKeyError.
  const Model& GetModel(std::string_view key) const;
  const Gpu& GetGpu(std::string_view key) const;
  // Per-iteration compute time of `model_key` on one `gpu_key` GPU, in milliseconds.
  double ComputeMs(std::string_view model_key, std::string_view gpu_key) const;
  std::uint64_t GradientBytes(std::string_view model_key) const;

  std::vector<std::string> ModelKeys() const;  // in file order
  std::vector<std::string> GpuKeys() const;
  const std::filesystem::path& Path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<Model> models_;
  std::vector<Gpu> gpus_;
};

}  // namespace metronome::models
