// The CUDA driver API, opened at run time from libcuda.so.1: the shim has no link-time CUDA
// dependency, and a process that does not use CUDA is never made to load the driver.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace metronome::shim {

struct CudaDriver {
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*ctx_get_device)(CUdevice*) = nullptr;
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*mem_host_alloc)(void**, size_t, unsigned int) = nullptr;
  CUresult (*mem_host_get_device_pointer)(CUdeviceptr*, void*, unsigned int) = nullptr;
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned int) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  // Optional: nullptr where the driver lacks them.
  CUresult (*stream_wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  CUresult (*ctx_push_current)(CUcontext) = nullptr;  // without these three the GPU timer
  CUresult (*ctx_pop_current)(CUcontext*) = nullptr;  // is calibrated only when a context
  CUresult (*stream_query)(CUstream) = nullptr;       // is first prepared
  CUresult (*exchange_capture_mode)(CUstreamCaptureMode*) = nullptr;

  // Binds the entry points and initializes the driver; whether it can be used. Without `force`
  // only a driver the process already loaded is used, and a process that has not loaded one yet
  // is asked again at the next call; with it the driver is loaded, once. Callers serialize.
  bool Load(bool force) noexcept;
  // From now on Load says no (a forked child: CUDA cannot be used there).
  void Disable() noexcept {
    tried_ = true;
    ok_ = false;
  }

 private:
  bool tried_ = false;
  bool ok_ = false;
};

}  // namespace metronome::shim
