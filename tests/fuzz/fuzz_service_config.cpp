// libFuzzer target for metronome-scheduler's YAML configuration (its inline topology included):
// whatever the file says, loading and validating it either succeeds or throws ConfigError whose
// message prints (no control bytes: a key of NUL bytes once made an empty message); no other
// exception, no crash (ASan).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "metronome/service/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace svc = metronome::service;
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  svc::ServiceConfig cfg;
  try {
    svc::LoadConfigYaml(yaml, cfg);
    cfg.Validate();
  } catch (const svc::ConfigError& e) {
    const std::string what = e.what();
    if (what.empty()) std::abort();
    for (const char c : what) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
    }
  } catch (...) {
    std::abort();  // anything else escaping is a bug
  }
  return 0;
}
