// The real NCCL, reached through its profiling interface: every public ncclX of libnccl is a weak
// symbol with a strong pncclX alias, so the shim defines ncclX and calls pncclX.
//
// Each function is resolved lazily, on its first use: first in an already loaded libnccl.so.2
// (dlopen RTLD_NOLOAD), then RTLD_NEXT, then METRONOME_NCCL_LIBRARY. A symbol that the loaded NCCL
// lacks (an older version) leaves the function unresolved: its wrapper logs once and returns
// ncclInternalError; loading never fails.
#pragma once

#include <nccl.h>

#include <atomic>

// Every NCCL function the shim calls, wrapped or not. X(name) is the name without the prefix.
// Those of a newer NCCL than the header's are left out (tests/integration/shim/nccl_surface.py
// checks the header's functions against the wrapped ones and nccl_passthrough.txt).
// clang-format off
#if NCCL_VERSION_CODE >= 22807
#define METRONOME_NCCL_2_28_7(X) X(CommRevoke)
#else
#define METRONOME_NCCL_2_28_7(X)
#endif
#if NCCL_VERSION_CODE >= 22902
#define METRONOME_NCCL_2_29_2(X) X(CommGrow)
#else
#define METRONOME_NCCL_2_29_2(X)
#endif
#if NCCL_VERSION_CODE >= 22907
#define METRONOME_NCCL_2_29_7(X) X(CommSuspend) X(CommResume)
#else
#define METRONOME_NCCL_2_29_7(X)
#endif
#define METRONOME_NCCL_FUNCTIONS(X)                                                      \
  X(AllReduce) X(Broadcast) X(Bcast) X(Reduce) X(AllGather) X(ReduceScatter)             \
  X(AlltoAll) X(Gather) X(Scatter) X(Send) X(Recv) X(GroupStart) X(GroupEnd)             \
  X(CommInitRank) X(CommInitRankConfig) X(CommInitAll) X(CommSplit)                      \
  X(CommInitRankScalable) X(CommShrink) X(CommFinalize) X(CommDestroy) X(CommAbort)      \
  X(GetVersion) X(CommUserRank) X(CommCount) X(CommCuDevice)                             \
  METRONOME_NCCL_2_28_7(X) METRONOME_NCCL_2_29_2(X) METRONOME_NCCL_2_29_7(X)
// clang-format on

namespace metronome::shim {

enum class Fn : int {
#define METRONOME_FN_ENUM(name) k##name,
  METRONOME_NCCL_FUNCTIONS(METRONOME_FN_ENUM)
#undef METRONOME_FN_ENUM
      kCount
};

template <Fn F>
struct FnTraits;
#define METRONOME_FN_TRAITS(name)                      \
  template <>                                          \
  struct FnTraits<Fn::k##name> {                       \
    using Type = decltype(&::pnccl##name);             \
    static constexpr const char* kName = "nccl" #name; \
  };
METRONOME_NCCL_FUNCTIONS(METRONOME_FN_TRAITS)
#undef METRONOME_FN_TRAITS

// Resolves function `f` (thread-safe, idempotent). Returns nullptr when no NCCL provides it.
void* ResolveReal(Fn f) noexcept;

// Table of resolved pointers (nullptr = not yet resolved or missing).
extern std::atomic<void*> g_real_fns[static_cast<int>(Fn::kCount)];

template <Fn F>
inline typename FnTraits<F>::Type Real() noexcept {
  void* p = g_real_fns[static_cast<int>(F)].load(std::memory_order_acquire);
  if (__builtin_expect(p == nullptr, 0)) p = ResolveReal(F);
  return reinterpret_cast<typename FnTraits<F>::Type>(p);
}

// For tests and benchmarks: make `f` call `p` instead of the real library (nullptr = re-resolve).
void OverrideReal(Fn f, void* p) noexcept;

// Where the resolved functions come from (a path), or "" before the first resolution.
const char* RealNcclSource() noexcept;

// Checks whether the main program carries NCCL itself (a static link that cannot be
// intercepted); logs it once. Called at load.
void DetectStaticNccl() noexcept;

// The address range of this object (the shim), to refuse resolving a name to ourselves.
bool AddressIsInShim(const void* addr) noexcept;

}  // namespace metronome::shim
