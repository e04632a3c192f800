#include "cuda_driver.hpp"

#include <dlfcn.h>

namespace metronome::shim {
namespace {

template <class T>
bool Bind(void* h, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(h, name));
  return out != nullptr;
}

}  // namespace

bool CudaDriver::Load(bool force) noexcept {
  if (tried_) return ok_;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr && force) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    if (!force) return false;  // the process may load CUDA later: ask again then
    tried_ = true;
    return false;
  }
  tried_ = true;
  const bool ok = Bind(h, "cuInit", init) && Bind(h, "cuCtxGetCurrent", ctx_get_current) &&
                  Bind(h, "cuCtxGetDevice", ctx_get_device) &&
                  Bind(h, "cuDeviceGetAttribute", device_get_attribute) &&
                  Bind(h, "cuModuleLoadData", module_load_data) &&
                  Bind(h, "cuModuleGetFunction", module_get_function) &&
                  Bind(h, "cuLaunchKernel", launch_kernel) &&
                  Bind(h, "cuMemHostAlloc", mem_host_alloc) &&
                  Bind(h, "cuMemHostGetDevicePointer_v2", mem_host_get_device_pointer) &&
                  Bind(h, "cuStreamIsCapturing", stream_is_capturing) &&
                  Bind(h, "cuStreamCreate", stream_create) &&
                  Bind(h, "cuStreamSynchronize", stream_synchronize) &&
                  Bind(h, "cuStreamDestroy_v2", stream_destroy);
  Bind(h, "cuCtxPushCurrent_v2", ctx_push_current);
  Bind(h, "cuCtxPopCurrent_v2", ctx_pop_current);
  Bind(h, "cuStreamQuery", stream_query);
  Bind(h, "cuThreadExchangeStreamCaptureMode", exchange_capture_mode);
  if (!Bind(h, "cuStreamWaitValue32_v2", stream_wait_value32)) {
    Bind(h, "cuStreamWaitValue32", stream_wait_value32);
  }
  ok_ = ok && init(0) == CUDA_SUCCESS;
  return ok_;
}

}  // namespace metronome::shim
