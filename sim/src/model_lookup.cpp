// The scenario's `model:` keys resolved through the shared model table (common/models).
#include <mutex>

#include "metronome/models/model_table.hpp"
#include "metronome/sim/scenario.hpp"

namespace metronome::sim {

ModelLookup DefaultModelLookup() {
  static std::once_flag once;
  static std::shared_ptr<models::ModelTable> table;
  static std::string error;
  std::call_once(once, [] {
    try {
      table = std::make_shared<models::ModelTable>(models::ModelTable::LoadDefault());
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!table) {
    return [](const std::string&, const std::string&) -> ModelFigures {
      throw ScenarioError("the model table could not be loaded: " + error);
    };
  }
  return [t = table](const std::string& model, const std::string& gpu) {
    ModelFigures f;
    f.compute_ms = t->ComputeMs(model, gpu);
    f.gradient_mb = static_cast<double>(t->GradientBytes(model)) / 1e6;
    return f;
  };
}

}  // namespace metronome::sim
