// The bodies of the exported ncclX wrappers (exports.cpp), as templates so that benchmarks and
// tests run exactly the code the exported functions run.
#pragma once

#include <nccl.h>

#include "real_nccl.hpp"
#include "runtime.hpp"

namespace metronome::shim {

template <Fn F, class... A>
inline ncclResult_t Forward(A... a) noexcept {
  auto fn = Real<F>();
  if (__builtin_expect(fn == nullptr, 0)) return ncclInternalError;
  return fn(a...);
}

// A collective or point-to-point call: tracked and gated unless the shim is off or NCCL is
// calling itself (re-entrancy).
template <Fn F, class... A>
inline ncclResult_t Collective(Op op, uint64_t bytes, ncclComm_t comm, cudaStream_t stream,
                               A... a) noexcept {
  if (!g_shim_active.load(std::memory_order_relaxed)) return Forward<F>(a...);
  ThreadState& ts = Tls();
  if (ts.depth != 0) return Forward<F>(a...);
  ++ts.depth;
  Runtime& rt = Runtime::Get();
  const Runtime::CallToken tok = rt.BeforeCollective(comm, op, bytes, stream);
  const ncclResult_t r = Forward<F>(a...);
  rt.AfterCollective(tok, r);
  --ts.depth;
  return r;
}

// A part's buffer: `elements` of `type` into `buff`; a null buffer (a non-root's broadcast
// source or reduce destination) stays null.
inline const void* ElementsInto(const void* buff, size_t elements, ncclDataType_t type) noexcept {
  return buff == nullptr ? nullptr : static_cast<const char*>(buff) + elements * DataTypeSize(type);
}
inline void* ElementsInto(void* buff, size_t elements, ncclDataType_t type) noexcept {
  return buff == nullptr ? nullptr : static_cast<char*>(buff) + elements * DataTypeSize(type);
}

// An element-wise collective (all-reduce, broadcast, reduce) of `count` elements of `type`:
// tracked and gated as Collective, but issued in parts (Runtime::Parts) when the job sets a
// chunk size, each part through the gate, so that the job can pause between them for a
// higher-ranked window. `call(offset, n)` makes the real call on elements [offset, offset + n);
// every part but the last is a whole number of 256-byte blocks. The first error ends the call.
template <class Call>
inline ncclResult_t ElementwiseCollective(Op op, size_t count, ncclDataType_t type, ncclComm_t comm,
                                          cudaStream_t stream, Call call) noexcept {
  if (!g_shim_active.load(std::memory_order_relaxed)) return call(size_t{0}, count);
  ThreadState& ts = Tls();
  if (ts.depth != 0) return call(size_t{0}, count);
  ++ts.depth;
  Runtime& rt = Runtime::Get();
  CommState* st = rt.Find(comm);
  const size_t elem = DataTypeSize(type);
  uint64_t parts = rt.Parts(static_cast<uint64_t>(count) * elem);
  const size_t align = elem < 256 ? 256 / elem : 1;
  size_t part = parts > 1 ? count / parts / align * align : count;
  if (part == 0) {  // fewer elements than parts of a block each: one call
    parts = 1;
    part = count;
  }
  ncclResult_t r = ncclSuccess;
  size_t done = 0;
  for (uint64_t k = 0; k < parts && r == ncclSuccess; ++k) {
    const size_t n = k + 1 == parts ? count - done : part;
    const Runtime::CallToken tok =
        rt.BeforeCollective(st, op, static_cast<uint64_t>(n) * elem, stream);
    r = call(done, n);
    rt.AfterCollective(tok, r);
    done += n;
  }
  --ts.depth;
  return r;
}

// A communicator constructor: the new communicator is registered when the call succeeded (or is
// in progress, for non-blocking communicators).
template <Fn F, class... A>
inline ncclResult_t Create(ncclComm_t* out, const CommOrigin& origin, A... a) noexcept {
  ThreadState& ts = Tls();
  if (ts.depth != 0 || !g_shim_active.load(std::memory_order_relaxed)) return Forward<F>(a...);
  ++ts.depth;
  const ncclResult_t r = Forward<F>(a...);
  if ((r == ncclSuccess || r == ncclInProgress) && out != nullptr && *out != nullptr) {
    CommState* st = Runtime::Get().OnCommCreated(*out, origin);
    if (st != nullptr && r == ncclInProgress) st->nonblocking.store(true);
  }
  --ts.depth;
  return r;
}

template <Fn F>
inline ncclResult_t Destroy(ncclComm_t comm, const char* how) noexcept {
  ThreadState& ts = Tls();
  if (ts.depth != 0 || !g_shim_active.load(std::memory_order_relaxed)) return Forward<F>(comm);
  ++ts.depth;
  // Forget it first: NCCL may hand the same address to the next communicator.
  Runtime::Get().OnCommDestroyed(comm, how);
  const ncclResult_t r = Forward<F>(comm);
  --ts.depth;
  return r;
}

// Revoke and Suspend pause a communicator before NCCL acts (nothing of it is held while NCCL
// stops it); Resume unpauses it once NCCL has resumed it.
template <Fn F, class... A>
inline ncclResult_t Pause(ncclComm_t comm, bool paused, const char* how, A... a) noexcept {
  ThreadState& ts = Tls();
  if (ts.depth != 0 || !g_shim_active.load(std::memory_order_relaxed)) return Forward<F>(a...);
  ++ts.depth;
  if (paused) Runtime::Get().OnCommPaused(comm, true, how);
  const ncclResult_t r = Forward<F>(a...);
  if (!paused && r == ncclSuccess) Runtime::Get().OnCommPaused(comm, false, how);
  --ts.depth;
  return r;
}

// The config NCCL gets for a new communicator: the application's, or, when it leaves
// trafficClass undefined and METRONOME_TRAFFIC_CLASS gives the job's priority one, a copy with
// that class. The copy lives as long as the process (NCCL may read a nonblocking
// communicator's config after the call returns; a communicator creation is rare). An application
// config from a header older than 2.26, or not made by NCCL_CONFIG_INITIALIZER, is passed as it
// is.
ncclConfig_t* WithTrafficClass(ncclConfig_t* config) noexcept;

inline uint64_t Bytes(size_t count, ncclDataType_t t) {
  return static_cast<uint64_t>(count) * DataTypeSize(t);
}

}  // namespace metronome::shim
