// WithTrafficClass (intercept.hpp): the job's traffic class into a new communicator's config.
#include <nccl.h>

#include <cstddef>
#include <cstring>
#include <new>

#include "intercept.hpp"
#include "log.hpp"

namespace metronome::shim {

ncclConfig_t* WithTrafficClass(ncclConfig_t* config) noexcept {
#if NCCL_VERSION_CODE >= 22600
  if (config == nullptr || !g_shim_active.load(std::memory_order_relaxed)) return config;
  const int tc = Runtime::Get().TrafficClass();
  if (tc < 0) return config;
  // NCCL_CONFIG_INITIALIZER's magic, and a struct from a header that has the field (the struct
  // only ever grows at its end: the field's offset is the same in every version that has it).
  constexpr unsigned int kConfigMagic = 0xcafebeef;
  constexpr std::size_t kNeeded = offsetof(ncclConfig_t, trafficClass) + sizeof(int);
  if (config->magic != kConfigMagic || config->version < 22600 || config->size < kNeeded ||
      config->size > 4096) {
    return config;
  }
  if (config->trafficClass != NCCL_CONFIG_UNDEF_INT) return config;  // the application's choice
  const std::size_t bytes =
      config->size < sizeof(ncclConfig_t) ? sizeof(ncclConfig_t) : config->size;
  void* copy = ::operator new(bytes, std::nothrow);
  if (copy == nullptr) return config;
  std::memset(copy, 0, bytes);
  std::memcpy(copy, config, config->size);
  auto* c = static_cast<ncclConfig_t*>(copy);
  c->trafficClass = tc;
  MLOG_DEBUG("new communicator: trafficClass %d (METRONOME_TRAFFIC_CLASS)", tc);
  return c;
#else
  return config;
#endif
}

}  // namespace metronome::shim
