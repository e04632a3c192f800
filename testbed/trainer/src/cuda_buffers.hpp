// The gradient buffer the collectives work on, and the stream they are issued on.
//   host  host memory, no stream: for the Gloo stand-in, whose calls complete on the host.
//   cuda  device memory (cudaMalloc) on GPU rank % device count, and a CUDA stream: for the real
//         NCCL. The CUDA runtime is opened at run time (dlopen), so the trainer has no link-time
//         CUDA dependency and runs on machines without it.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>

namespace metronome::testbed::trainer {

class Buffers {
 public:
  // Throws std::runtime_error (e.g. no CUDA runtime or GPU for "cuda").
  static std::unique_ptr<Buffers> Create(const std::string& device, int rank, std::size_t bytes);
  virtual ~Buffers() = default;
  virtual void* Data() = 0;
  virtual cudaStream_t Stream() = 0;  // nullptr on the host
  virtual void Synchronize() = 0;     // waits for the stream's work (no-op on the host)
  virtual std::string Describe() const = 0;
};

}  // namespace metronome::testbed::trainer
