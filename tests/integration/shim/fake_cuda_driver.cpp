// A stand-in for libcuda.so.1, for tests only: the driver entry points the shim's device gate
// uses, on CPU threads, with faults injected one at a time.
//
// Streams are FIFO queues, each served by its own thread. The gate and timer kernels run
// gate_kernel_body.hpp (the code nvcc builds into the shim's fatbin) on the stream's thread, with
// a "GPU timer" that is CLOCK_REALTIME minus one hour, so that the shim's calibration has
// something to find. Host-mapped memory is plain memory whose device address is its host address.
//
// Environment:
//   METRONOME_FAKE_CUDA_FAIL    comma-separated entry points that fail (cuInit, cuCtxGetCurrent,
//                               cuModuleLoadData, cuMemHostAlloc, cuMemHostGetDevicePointer,
//                               cuLaunchKernel, cuStreamWaitValue32, cuStreamIsCapturing); "X#N":
//                               only the N-th call of X (cuMemHostGetDevicePointer, cuLaunchKernel)
//   METRONOME_FAKE_CUDA_KERNEL  "hang": the gate kernel's timer stands still, so a kernel that
//                               waits never reaches its window (nor its own bound) by itself;
//                               "notimer": the calibration's timer kernel writes nothing
//   METRONOME_FAKE_CUDA_SM      compute capability as major*10+minor (default 90)
//   METRONOME_FAKE_CUDA_GAIN    ns the "GPU timer" gains on the host clock per second (default 0)
//
// MetronomeFakeCudaHostAlloc(i) gives the tests the i-th block cuMemHostAlloc made (the
// device gate's slots are its first), to look at what the shim wrote there.
// MetronomeFakeCudaFailFromNow(entry) makes `entry` fail from then on, for a fault in the middle
// of a test (the environment is read on every call; changing it then would race those reads).
#include <cuda.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gate_kernel_body.hpp"

namespace {

constexpr int64_t kGpuBehindHostNs = 3'600'000'000'000;  // the "GPU timer" is an hour behind

std::mutex failing_now_mu;
std::string failing_now;  // MetronomeFakeCudaFailFromNow's entries, each between commas

bool Fails(const char* entry) {
  {
    std::lock_guard<std::mutex> lock(failing_now_mu);
    if (failing_now.find(std::string(",") + entry + ",") != std::string::npos) return true;
  }
  const char* list = std::getenv("METRONOME_FAKE_CUDA_FAIL");
  if (list == nullptr) return false;
  const std::string s = std::string(",") + list + ",";
  return s.find(std::string(",") + entry + ",") != std::string::npos;
}

// `entry` fails on every call, or "entry#N" on its N-th (`call`, 1-based).
bool FailsCall(const char* entry, int call) {
  return Fails(entry) || Fails((std::string(entry) + "#" + std::to_string(call)).c_str());
}

bool KernelIs(const char* mode) {
  const char* k = std::getenv("METRONOME_FAKE_CUDA_KERNEL");
  return k != nullptr && std::strcmp(k, mode) == 0;
}

bool KernelHangs() {
  return KernelIs("hang");
}

int64_t HostNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

const int64_t kLoadedNs = HostNs();

int64_t GpuNs() {
  static const int64_t kGain = [] {
    const char* g = std::getenv("METRONOME_FAKE_CUDA_GAIN");
    return g != nullptr ? std::atoll(g) : 0;
  }();
  const int64_t host = HostNs();
  return host - kGpuBehindHostNs + (host - kLoadedNs) / 1000 * kGain / 1'000'000;
}

void PauseNs(int64_t ns) {
  timespec ts{0, static_cast<long>(ns)};
  nanosleep(&ts, nullptr);
}

void Fence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// One stream: its operations run in order on its own thread.
class Stream {
 public:
  Stream() : worker_([this] { Run(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void Push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ops_.push_back(std::move(op));
    }
    cv_.notify_all();
  }
  void Synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return ops_.empty() && !busy_; });
  }
  bool Idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_.empty() && !busy_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !ops_.empty(); });
      if (ops_.empty()) return;  // stopping, and everything ran
      std::function<void()> op = std::move(ops_.front());
      ops_.pop_front();
      busy_ = true;
      lock.unlock();
      op();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ops_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

// The legacy default stream (0), made on first use and kept until the process exits.
Stream* StreamOf(CUstream s) {
  if (s != nullptr && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
    return reinterpret_cast<Stream*>(s);
  }
  static Stream* legacy = new Stream();
  return legacy;
}

enum class Kernel { kGate, kTimer, kEdge };
Kernel gate_kernel = Kernel::kGate;
Kernel timer_kernel = Kernel::kTimer;
Kernel edge_kernel = Kernel::kEdge;
int context_token = 0;
int module_token = 0;
constexpr int kMaxAllocs = 16;
std::atomic<void*> allocs[kMaxAllocs];
std::atomic<int> n_allocs{0};

// Stream capture as a thread that is not the capturing one meets it: while a capture begun in
// the global mode (PyTorch's default) runs, a thread whose own mode is not relaxed may make no
// potentially unsafe call (here: creating, synchronizing, querying or destroying a stream, and
// launching on one); the call fails and the capture is invalidated, as the driver does.
std::atomic<CUstream> capturing{nullptr};
std::atomic<bool> global_capture{false};
std::atomic<bool> capture_invalidated{false};
thread_local CUstreamCaptureMode thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool UnsafeDuringCapture() {
  if (!global_capture.load() || thread_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED) {
    return false;
  }
  capture_invalidated.store(true);
  return true;
}

}  // namespace

extern "C" {

void* MetronomeFakeCudaHostAlloc(int i) {
  return i >= 0 && i < std::min(n_allocs.load(), kMaxAllocs) ? allocs[i].load() : nullptr;
}

void MetronomeFakeCudaFailFromNow(const char* entry) {
  std::lock_guard<std::mutex> lock(failing_now_mu);
  failing_now += std::string(",") + entry + ",";
}

CUresult cuInit(unsigned int) {
  return Fails("cuInit") ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (Fails("cuCtxGetCurrent")) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = reinterpret_cast<CUcontext>(&context_token);
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext) {
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* ctx) {
  if (ctx != nullptr) *ctx = reinterpret_cast<CUcontext>(&context_token);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* dev) {
  *dev = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice) {
  const char* sm = std::getenv("METRONOME_FAKE_CUDA_SM");
  const int cc = sm != nullptr ? std::atoi(sm) : 90;
  if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) {
    *value = cc / 10;
  } else if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) {
    *value = cc % 10;
  } else {
    *value = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* mod, const void*) {
  if (Fails("cuModuleLoadData")) return CUDA_ERROR_INVALID_IMAGE;
  *mod = reinterpret_cast<CUmodule>(&module_token);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
  if (std::strcmp(name, "metronome_gate_kernel") == 0) {
    *f = reinterpret_cast<CUfunction>(&gate_kernel);
  } else if (std::strcmp(name, "metronome_timer_kernel") == 0) {
    *f = reinterpret_cast<CUfunction>(&timer_kernel);
  } else if (std::strcmp(name, "metronome_edge_kernel") == 0) {
    *f = reinterpret_cast<CUfunction>(&edge_kernel);
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned int) {
  if (Fails("cuMemHostAlloc")) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (*p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(*p, 0, bytes);
  const int i = n_allocs.fetch_add(1);
  if (i < kMaxAllocs) allocs[i].store(*p);
  return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr* dev, void* host, unsigned int) {
  static std::atomic<int> calls{0};
  if (FailsCall("cuMemHostGetDevicePointer", ++calls)) return CUDA_ERROR_INVALID_VALUE;
  *dev = reinterpret_cast<CUdeviceptr>(host);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* s, unsigned int) {
  if (UnsafeDuringCapture()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  *s = reinterpret_cast<CUstream>(new Stream());
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (UnsafeDuringCapture()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  delete reinterpret_cast<Stream*>(s);  // runs what is queued, then joins its thread
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s) {
  if (UnsafeDuringCapture()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  StreamOf(s)->Synchronize();
  return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream s) {
  if (UnsafeDuringCapture()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return StreamOf(s)->Idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  if (Fails("cuStreamIsCapturing")) return CUDA_ERROR_UNKNOWN;
  *status = s != nullptr && s == capturing.load() ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                  : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  capture_invalidated.store(false);
  global_capture.store(mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
  capturing.store(s);
  return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream s, CUgraph* graph) {
  if (s != capturing.load()) return CUDA_ERROR_ILLEGAL_STATE;
  capturing.store(nullptr);
  global_capture.store(false);
  *graph = nullptr;
  return capture_invalidated.load() ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  std::swap(*mode, thread_capture_mode);
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream stream, void** params, void**) {
  static std::atomic<int> calls{0};
  if (FailsCall("cuLaunchKernel", ++calls)) return CUDA_ERROR_LAUNCH_FAILED;
  if (stream != capturing.load() && UnsafeDuringCapture()) {
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  const Kernel k = *reinterpret_cast<Kernel*>(f);
  if (k == Kernel::kGate) {
    auto* slot =
        reinterpret_cast<metronome::shim::DeviceGateSlot*>(*static_cast<CUdeviceptr*>(params[0]));
    const int64_t need = *static_cast<int64_t*>(params[1]);
    const int64_t rest = *static_cast<int64_t*>(params[2]);
    const uint32_t what = *static_cast<uint32_t*>(params[3]);
    const uint32_t generation = *static_cast<uint32_t*>(params[4]);
    const bool hang = KernelHangs();
    StreamOf(stream)->Push([=] {
      const int64_t frozen = GpuNs();
      metronome::shim::RunGateKernel(
          slot, need, rest, what, generation, [&] { return hang ? frozen : GpuNs(); }, PauseNs,
          Fence);
    });
    return CUDA_SUCCESS;
  }
  if (k == Kernel::kEdge) {
    auto* slot =
        reinterpret_cast<metronome::shim::DeviceGateSlot*>(*static_cast<CUdeviceptr*>(params[0]));
    StreamOf(stream)->Push([=] { metronome::shim::RunEdgeKernel(slot, GpuNs, Fence); });
    return CUDA_SUCCESS;
  }
  auto* out = reinterpret_cast<volatile int64_t*>(*static_cast<CUdeviceptr*>(params[0]));
  auto* stop = reinterpret_cast<volatile uint32_t*>(*static_cast<CUdeviceptr*>(params[1]));
  const int64_t bound = *static_cast<int64_t*>(params[2]);
  if (KernelIs("notimer")) return CUDA_SUCCESS;  // launched, never writes
  StreamOf(stream)->Push([=] { metronome::shim::RunTimerKernel(out, stop, bound, GpuNs, Fence); });
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int) {
  if (Fails("cuStreamWaitValue32")) return CUDA_ERROR_NOT_SUPPORTED;
  auto* word = reinterpret_cast<volatile uint32_t*>(addr);
  StreamOf(stream)->Push([=] {
    // CU_STREAM_WAIT_VALUE_GEQ, in the wrap-around sense the driver uses.
    while (static_cast<int32_t>(*word - value) < 0) PauseNs(20'000);
  });
  return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* data) {
  StreamOf(stream)->Push([=] { fn(data); });
  return CUDA_SUCCESS;
}

}  // extern "C"
