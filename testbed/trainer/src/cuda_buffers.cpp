#include "cuda_buffers.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <vector>

namespace metronome::testbed::trainer {
namespace {

class HostBuffers final : public Buffers {
 public:
  explicit HostBuffers(std::size_t bytes) : data_((bytes + 3) / 4, 0.0f) {}
  void* Data() override { return data_.data(); }
  cudaStream_t Stream() override { return nullptr; }
  void Synchronize() override {}
  std::string Describe() const override { return "host"; }

 private:
  std::vector<float> data_;  // zeros: sums of zeros never overflow, however often repeated
};

// The few CUDA runtime calls the device path needs, resolved from libcudart at run time. Their
// types come from the runtime's own declarations (nccl.h includes cuda_runtime.h), where the C
// function is not overloaded by a C++ template.
struct CudaRuntime {
  void* handle = nullptr;
  decltype(&cudaGetDeviceCount) get_device_count = nullptr;
  decltype(&cudaSetDevice) set_device = nullptr;
  cudaError_t (*malloc)(void**, std::size_t) = nullptr;  // cudaMalloc is overloaded in C++
  decltype(&cudaFree) free = nullptr;
  decltype(&cudaMemset) memset = nullptr;
  decltype(&cudaStreamCreate) stream_create = nullptr;
  decltype(&cudaStreamDestroy) stream_destroy = nullptr;
  decltype(&cudaStreamSynchronize) stream_synchronize = nullptr;
  decltype(&cudaGetErrorString) error_string = nullptr;

  CudaRuntime() {
    for (const char* name :
         {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
      handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
    }
    if (handle == nullptr) {
      throw std::runtime_error("--device cuda: cannot open the CUDA runtime (libcudart)");
    }
    Resolve(get_device_count, "cudaGetDeviceCount");
    Resolve(set_device, "cudaSetDevice");
    Resolve(malloc, "cudaMalloc");
    Resolve(free, "cudaFree");
    Resolve(memset, "cudaMemset");
    Resolve(stream_create, "cudaStreamCreate");
    Resolve(stream_destroy, "cudaStreamDestroy");
    Resolve(stream_synchronize, "cudaStreamSynchronize");
    Resolve(error_string, "cudaGetErrorString");
  }
  template <typename Fn>
  void Resolve(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(::dlsym(handle, name));
    if (fn == nullptr) {
      throw std::runtime_error(std::string("--device cuda: libcudart lacks ") + name);
    }
  }
  void Check(cudaError_t rc, const char* what) const {
    if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + error_string(rc));
  }
};

class CudaBuffers final : public Buffers {
 public:
  CudaBuffers(int rank, std::size_t bytes) {
    int count = 0;
    cuda_.Check(cuda_.get_device_count(&count), "cudaGetDeviceCount");
    if (count < 1) throw std::runtime_error("--device cuda: no GPU");
    device_ = rank % count;
    cuda_.Check(cuda_.set_device(device_), "cudaSetDevice");
    cuda_.Check(cuda_.malloc(&data_, bytes == 0 ? 4 : bytes), "cudaMalloc");
    cuda_.Check(cuda_.memset(data_, 0, bytes == 0 ? 4 : bytes), "cudaMemset");
    cuda_.Check(cuda_.stream_create(&stream_), "cudaStreamCreate");
  }
  ~CudaBuffers() override {
    if (stream_ != nullptr) cuda_.stream_destroy(stream_);
    if (data_ != nullptr) cuda_.free(data_);
  }
  CudaBuffers(const CudaBuffers&) = delete;
  CudaBuffers& operator=(const CudaBuffers&) = delete;
  void* Data() override { return data_; }
  cudaStream_t Stream() override { return stream_; }
  void Synchronize() override {
    cuda_.Check(cuda_.stream_synchronize(stream_), "cudaStreamSynchronize");
  }
  std::string Describe() const override { return "cuda:" + std::to_string(device_); }

 private:
  CudaRuntime cuda_;
  int device_ = 0;
  void* data_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Buffers> Buffers::Create(const std::string& device, int rank, std::size_t bytes) {
  if (device == "host") return std::make_unique<HostBuffers>(bytes);
  if (device == "cuda") return std::make_unique<CudaBuffers>(rank, bytes);
  throw std::runtime_error("unknown --device '" + device + "' (host or cuda)");
}

}  // namespace metronome::testbed::trainer
