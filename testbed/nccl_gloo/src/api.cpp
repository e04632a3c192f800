// The C ABI: every function of nccl.h. Each public ncclX is a weak alias of a strong pncclX, as
// in NCCL's profiling interface, so that an interposer reaches this library through pncclX.
// Nothing throws across this boundary: every entry point catches everything.
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "communicator.hpp"
#include "datatypes.hpp"
#include "errors.hpp"
#include "group.hpp"
#include "rendezvous.hpp"

// Defines pncclX (strong) and ncclX (weak alias), both exported. The declarations in nccl.h make
// the compiler check each signature.
#define STANDIN_API(ret, name, ...)                                                                \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                      \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" ret p##name(__VA_ARGS__)

namespace {

using metronome::testbed::standin::Fail;
using metronome::testbed::standin::Operation;

// Live communicators: a handle is checked against this set before use, so that a stale or
// garbage handle gives ncclInvalidArgument instead of a crash.
std::mutex& RegistryMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::unordered_set<ncclComm*>& Registry() {
  static auto* set = new std::unordered_set<ncclComm*>;
  return *set;
}

void RegisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().insert(comm);
}

bool UnregisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  return Registry().erase(comm) != 0;
}

ncclComm* Lookup(const ncclComm_t comm) noexcept {
  if (comm == nullptr) return nullptr;
  try {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    return Registry().count(comm) != 0 ? comm : nullptr;
  } catch (...) {
    return nullptr;  // the mutex failed: treat the handle as unusable
  }
}

// The result of the exception being handled (call inside catch).
ncclResult_t Caught(const char* function) noexcept {
  std::string message;
  const ncclResult_t code = metronome::testbed::standin::CurrentExceptionResult(message);
  return Fail(code, std::string(function) + ": " + message);
}

ncclResult_t Unsupported(const char* function) noexcept {
  const std::string message =
      std::string(function) + " is not supported by the Gloo stand-in of libnccl.so.2";
  metronome::testbed::standin::WarnOnce(function, message);
  return Fail(ncclInvalidUsage, message);
}

ncclResult_t Invalid(const char* function, const std::string& what) noexcept {
  try {
    return Fail(ncclInvalidArgument, std::string(function) + ": " + what);
  } catch (...) {
    return ncclInvalidArgument;
  }
}

// Looks up a usable communicator; on failure returns the error (and records why).
ncclResult_t UsableComm(const char* function, ncclComm_t handle, ncclComm*& comm) {
  comm = Lookup(handle);
  if (comm == nullptr) return Invalid(function, "invalid communicator (null or destroyed)");
  const ncclResult_t async = comm->impl.AsyncError();
  if (async != ncclSuccess) {
    return Fail(async, std::string(function) + ": communicator failed earlier (" +
                           std::string(ncclGetErrorString(async)) + "); destroy it");
  }
  return ncclSuccess;
}

bool Fits(std::size_t count, std::size_t element_size, std::size_t factor) {
  return count <= std::numeric_limits<std::size_t>::max() / element_size / factor;
}

// Validates a collective or point-to-point operation and runs it (or queues it in a group).
ncclResult_t Submit(ncclComm_t handle, const Operation& operation) noexcept {
  const char* function = operation.Name();
  try {
    ncclComm* comm = nullptr;
    if (const ncclResult_t rc = UsableComm(function, handle, comm); rc != ncclSuccess) return rc;
    const int nranks = comm->impl.Size();
    const int rank = comm->impl.Rank();
    if (!metronome::testbed::standin::IsValidType(operation.type)) {
      return Invalid(function,
                     "invalid datatype " + std::to_string(static_cast<int>(operation.type)));
    }
    const bool reduces = operation.kind == Operation::Kind::kAllReduce ||
                         operation.kind == Operation::Kind::kReduce ||
                         operation.kind == Operation::Kind::kReduceScatter;
    if (reduces && !metronome::testbed::standin::IsValidOp(operation.op)) {
      return Invalid(function,
                     "invalid reduction op " + std::to_string(static_cast<int>(operation.op)));
    }
    const bool rooted = operation.kind == Operation::Kind::kBroadcast ||
                        operation.kind == Operation::Kind::kReduce || operation.IsPointToPoint();
    if (rooted && (operation.root < 0 || operation.root >= nranks)) {
      return Invalid(function, std::string(operation.IsPointToPoint() ? "peer " : "root ") +
                                   std::to_string(operation.root) + " out of range [0, " +
                                   std::to_string(nranks) + ")");
    }
    const std::size_t factor = (operation.kind == Operation::Kind::kAllGather ||
                                operation.kind == Operation::Kind::kReduceScatter)
                                   ? static_cast<std::size_t>(nranks)
                                   : 1;
    if (!Fits(operation.count, metronome::testbed::standin::TypeSize(operation.type), factor)) {
      return Invalid(function, "count " + std::to_string(operation.count) + " is too large");
    }
    if (operation.count > 0) {
      bool need_send = true;
      bool need_recv = true;
      switch (operation.kind) {
        case Operation::Kind::kBroadcast:
          need_send = rank == operation.root;
          break;
        case Operation::Kind::kReduce:
          need_recv = rank == operation.root;
          break;
        case Operation::Kind::kSend:
          need_recv = false;
          break;
        case Operation::Kind::kRecv:
          need_send = false;
          break;
        default:
          break;
      }
      if (need_send && operation.sendbuff == nullptr) return Invalid(function, "sendbuff is null");
      if (need_recv && operation.recvbuff == nullptr) return Invalid(function, "recvbuff is null");
    }
    if (reduces &&
        metronome::testbed::standin::ReduceFunction(operation.type, operation.op) == nullptr) {
      metronome::testbed::standin::WarnOnce(
          std::string("reduce-") + metronome::testbed::standin::TypeName(operation.type),
          std::string("the Gloo stand-in cannot reduce ") +
              metronome::testbed::standin::TypeName(operation.type) + " values");
      return Fail(ncclInvalidUsage, std::string(function) + ": cannot reduce " +
                                        metronome::testbed::standin::TypeName(operation.type) +
                                        " values");
    }
    if (metronome::testbed::standin::InGroup()) {
      metronome::testbed::standin::EnqueueOperation(comm, operation);
      return ncclSuccess;
    }
    if (operation.IsPointToPoint() && operation.root == rank && operation.count > 0) {
      return Fail(ncclInvalidUsage,
                  std::string(function) + ": send/receive to oneself must be inside a group");
    }
    try {
      comm->impl.Run(operation);
    } catch (...) {
      const ncclResult_t code = Caught(function);
      if (code == ncclSystemError || code == ncclInternalError) comm->impl.SetAsyncError(code);
      return code;
    }
    return ncclSuccess;
  } catch (...) {
    return Caught(function);
  }
}

enum class Collective { kAlltoAll, kGather, kScatter };

// Validates an all-to-all, gather or scatter and runs it as a group of sends and receives.
ncclResult_t SubmitPointToPoint(const char* function, ncclComm_t handle, Collective kind,
                                const void* sendbuff, void* recvbuff, std::size_t count,
                                ncclDataType_t type, int root) noexcept {
  try {
    ncclComm* comm = nullptr;
    if (const ncclResult_t rc = UsableComm(function, handle, comm); rc != ncclSuccess) return rc;
    const int nranks = comm->impl.Size();
    const int rank = comm->impl.Rank();
    if (!metronome::testbed::standin::IsValidType(type)) {
      return Invalid(function, "invalid datatype " + std::to_string(static_cast<int>(type)));
    }
    if (kind != Collective::kAlltoAll && (root < 0 || root >= nranks)) {
      return Invalid(function, "root " + std::to_string(root) + " out of range [0, " +
                                   std::to_string(nranks) + ")");
    }
    const std::size_t size = metronome::testbed::standin::TypeSize(type);
    if (!Fits(count, size, static_cast<std::size_t>(nranks))) {
      return Invalid(function, "count " + std::to_string(count) + " is too large");
    }
    if (count == 0) return ncclSuccess;
    const bool need_send = kind != Collective::kScatter || rank == root;
    const bool need_recv = kind != Collective::kGather || rank == root;
    if (need_send && sendbuff == nullptr) return Invalid(function, "sendbuff is null");
    if (need_recv && recvbuff == nullptr) return Invalid(function, "recvbuff is null");
    const std::size_t block = count * size;
    const auto* send = static_cast<const char*>(sendbuff);
    auto* recv = static_cast<char*>(recvbuff);
    if (kind == Collective::kAlltoAll) {
      const std::size_t total = block * static_cast<std::size_t>(nranks);
      if (send < recv + total && recv < send + total) {
        return Fail(ncclInvalidUsage,
                    std::string(function) + ": in-place operation is not supported");
      }
    }
    std::vector<Operation> ops;
    auto send_to = [&](const char* from, int peer) {
      ops.push_back({Operation::Kind::kSend, from, nullptr, count, type, ncclSum, peer});
    };
    auto recv_from = [&](char* into, int peer) {
      ops.push_back({Operation::Kind::kRecv, nullptr, into, count, type, ncclSum, peer});
    };
    for (int peer = 0; peer < nranks; ++peer) {
      const std::size_t offset = static_cast<std::size_t>(peer) * block;
      switch (kind) {
        case Collective::kAlltoAll:
          send_to(send + offset, peer);
          recv_from(recv + offset, peer);
          break;
        case Collective::kGather:
          if (peer == root) send_to(send, root);
          if (rank == root) recv_from(recv + offset, peer);
          break;
        case Collective::kScatter:
          if (rank == root) send_to(send + offset, peer);
          if (peer == root) recv_from(recv, root);
          break;
      }
    }
    if (metronome::testbed::standin::InGroup()) {
      for (const auto& op : ops) metronome::testbed::standin::EnqueueOperation(comm, op);
      return ncclSuccess;
    }
    try {
      comm->impl.RunGroup(ops);
    } catch (...) {
      const ncclResult_t code = Caught(function);
      if (code == ncclSystemError || code == ncclInternalError) comm->impl.SetAsyncError(code);
      return code;
    }
    return ncclSuccess;
  } catch (...) {
    return Caught(function);
  }
}

ncclResult_t InitRank(const char* function, ncclComm_t* out, int nranks, const ncclUniqueId& id,
                      int rank, const ncclConfig_t* config, int device) noexcept {
  try {
    if (out == nullptr) return Invalid(function, "comm is null");
    *out = nullptr;
    if (nranks < 1) return Invalid(function, "nranks " + std::to_string(nranks) + " < 1");
    if (rank < 0 || rank >= nranks) {
      return Invalid(function, "rank " + std::to_string(rank) + " out of range [0, " +
                                   std::to_string(nranks) + ")");
    }
    if (config != nullptr && config->magic != 0xcafebeef) {
      return Invalid(function, "config was not initialized with NCCL_CONFIG_INITIALIZER");
    }
    auto rendezvous = metronome::testbed::standin::DecodeId(id);
    if (!rendezvous) {
      return Invalid(function, "the unique id was not made by this library's ncclGetUniqueId");
    }
    auto comm = std::make_unique<ncclComm>(nranks, rank, std::move(*rendezvous), device);
    ncclComm* raw = comm.get();
    RegisterComm(raw);
    if (metronome::testbed::standin::InGroup()) {
      try {
        metronome::testbed::standin::EnqueueInit(raw);
      } catch (...) {
        UnregisterComm(raw);
        throw;
      }
      *out = comm.release();
      return ncclSuccess;
    }
    const ncclResult_t rc = metronome::testbed::standin::ConnectAll({raw});
    if (rc != ncclSuccess) {
      UnregisterComm(raw);
      return rc;
    }
    *out = comm.release();
    return ncclSuccess;
  } catch (...) {
    return Caught(function);
  }
}

// Destroy closes the connections gracefully (data already sent still reaches the peers); abort
// resets them.
ncclResult_t Destroy(const char* function, ncclComm_t handle, bool abort) noexcept {
  try {
    if (handle == nullptr || !UnregisterComm(handle)) {
      return Invalid(function, "invalid communicator (null or destroyed)");
    }
    metronome::testbed::standin::ForgetComm(handle);
    if (abort) handle->impl.Abort();
    delete handle;
    return ncclSuccess;
  } catch (...) {
    return Caught(function);
  }
}

}  // namespace

// --- Library information -------------------------------------------------------------------

// Marks this libnccl.so.2 as the stand-in: dlsym(handle, "metronome_nccl_standin") finds it here
// and not in the real NCCL (metronome-trainer picks host buffers by it).
// NOLINTNEXTLINE(readability-identifier-naming): the exported name is the interface.
extern "C" __attribute__((visibility("default"))) const char metronome_nccl_standin[] = "gloo";

STANDIN_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return Invalid("ncclGetVersion", "version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

STANDIN_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

STANDIN_API(const char*, ncclGetLastError, ncclComm_t /*comm*/) {
  return metronome::testbed::standin::LastError();
}

STANDIN_API(void, ncclResetDebugInit) {}

STANDIN_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Invalid("ncclGetUniqueId", "uniqueId is null");
  try {
    *uniqueId = metronome::testbed::standin::EncodeId(metronome::testbed::standin::NewRendezvous());
    return ncclSuccess;
  } catch (...) {
    return Caught("ncclGetUniqueId");
  }
}

// --- Communicators -------------------------------------------------------------------------

STANDIN_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
            int rank) {
  return InitRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr, 0);
}

STANDIN_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
            int rank, ncclConfig_t* config) {
  return InitRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config, 0);
}

STANDIN_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
            int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  // Several ids only spread NCCL's bootstrap load: the first one is enough here.
  if (nId < 1 || commIds == nullptr) {
    return Invalid("ncclCommInitRankScalable", "needs at least one unique id");
  }
  return InitRank("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config, 0);
}

STANDIN_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  const char* function = "ncclCommInitAll";
  if (comms == nullptr) return Invalid(function, "comms is null");
  if (ndev < 1) return Invalid(function, "ndev " + std::to_string(ndev) + " < 1");
  try {
    const metronome::testbed::standin::Rendezvous rendezvous =
        metronome::testbed::standin::NewRendezvous();
    std::vector<std::unique_ptr<ncclComm>> owned;
    std::vector<ncclComm*> raw;
    for (int i = 0; i < ndev; ++i) {
      owned.push_back(
          std::make_unique<ncclComm>(ndev, i, rendezvous, devlist != nullptr ? devlist[i] : i));
      raw.push_back(owned.back().get());
    }
    const ncclResult_t rc = metronome::testbed::standin::ConnectAll(raw);
    if (rc != ncclSuccess) return rc;
    for (int i = 0; i < ndev; ++i) {
      RegisterComm(raw[static_cast<std::size_t>(i)]);
      comms[i] = owned[static_cast<std::size_t>(i)].release();
    }
    return ncclSuccess;
  } catch (...) {
    return Caught(function);
  }
}

// Operations complete on the host before they return, but their last bytes may still be on the
// way to a peer: finalize is a barrier of all ranks, after which no rank waits for data, so that
// the ranks may then close their connections and exit in any order. (Destroy without finalize
// closes gracefully too, which delivers what was sent; finalize also tells that every peer got
// that far.)
STANDIN_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  const char* function = "ncclCommFinalize";
  ncclComm* c = Lookup(comm);
  if (c == nullptr) return Invalid(function, "invalid communicator");
  try {
    const ncclResult_t async = c->impl.AsyncError();
    if (async != ncclSuccess) {
      return Fail(async, std::string(function) + ": communicator failed earlier (" +
                             std::string(ncclGetErrorString(async)) + "); destroy it");
    }
    c->impl.Finalize();
    return ncclSuccess;
  } catch (...) {
    const ncclResult_t code = Caught(function);
    if (code == ncclSystemError || code == ncclInternalError) c->impl.SetAsyncError(code);
    return code;
  }
}

STANDIN_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return Destroy("ncclCommDestroy", comm, false);
}

STANDIN_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return Destroy("ncclCommAbort", comm, true);
}

STANDIN_API(ncclResult_t, ncclCommRevoke, ncclComm_t /*comm*/, int /*revokeFlags*/) {
  return Unsupported("ncclCommRevoke");
}

// Split: the parent's ranks exchange (color, key); the first member of each color (by key, then
// parent rank) makes a rendezvous and every rank learns its leader's id in a second exchange; then
// each member joins its new communicator. NCCL_SPLIT_NOCOLOR ranks take part but get no comm.
STANDIN_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
            ncclConfig_t* config) {
  const char* function = "ncclCommSplit";
  try {
    if (newcomm == nullptr) return Invalid(function, "newcomm is null");
    *newcomm = nullptr;
    ncclComm* parent = nullptr;
    if (const ncclResult_t rc = UsableComm(function, comm, parent); rc != ncclSuccess) return rc;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      return Invalid(function, "color " + std::to_string(color) + " is negative");
    }
    if (config != nullptr && config->magic != 0xcafebeef) {
      return Invalid(function, "config was not initialized with NCCL_CONFIG_INITIALIZER");
    }
    if (metronome::testbed::standin::InGroup()) {
      return Fail(ncclInvalidUsage,
                  "ncclCommSplit inside a group is not supported by the stand-in");
    }
    auto& impl = parent->impl;
    const int nranks = impl.Size();
    const int me = impl.Rank();
    const std::int32_t mine[2] = {color, key};
    std::vector<std::int32_t> all(static_cast<std::size_t>(2 * nranks));
    {
      const auto bytes = impl.Exchange(mine, sizeof(mine));
      std::memcpy(all.data(), bytes.data(), bytes.size());
    }
    // Members of my color in new-rank order.
    std::vector<int> members;
    for (int r = 0; r < nranks; ++r) {
      if (color != NCCL_SPLIT_NOCOLOR && all[2 * static_cast<std::size_t>(r)] == color) {
        members.push_back(r);
      }
    }
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return all[2 * static_cast<std::size_t>(a) + 1] < all[2 * static_cast<std::size_t>(b) + 1];
    });
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    const bool leader = !members.empty() && members.front() == me;
    if (leader) {
      id = metronome::testbed::standin::EncodeId(metronome::testbed::standin::NewRendezvous());
    }
    const auto ids = impl.Exchange(&id, sizeof(id));
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    std::memcpy(&id, ids.data() + static_cast<std::size_t>(members.front()) * sizeof(id),
                sizeof(id));
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    return InitRank(function, newcomm, static_cast<int>(members.size()), id, new_rank, config,
                    impl.Device());
  } catch (...) {
    return Caught(function);
  }
}

STANDIN_API(ncclResult_t, ncclCommShrink, ncclComm_t /*comm*/, int* /*excludeRanksList*/,
            int /*excludeRanksCount*/, ncclComm_t* newcomm, ncclConfig_t* /*config*/,
            int /*shrinkFlags*/) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return Unsupported("ncclCommShrink");
}

STANDIN_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  ncclComm* c = Lookup(comm);
  if (c == nullptr) return Invalid("ncclCommGetAsyncError", "invalid communicator");
  if (asyncError == nullptr) return Invalid("ncclCommGetAsyncError", "asyncError is null");
  *asyncError = c->impl.AsyncError();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  ncclComm* c = Lookup(comm);
  if (c == nullptr) return Invalid("ncclCommCount", "invalid communicator");
  if (count == nullptr) return Invalid("ncclCommCount", "count is null");
  *count = c->impl.Size();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  ncclComm* c = Lookup(comm);
  if (c == nullptr) return Invalid("ncclCommCuDevice", "invalid communicator");
  if (device == nullptr) return Invalid("ncclCommCuDevice", "device is null");
  *device = c->impl.Device();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  ncclComm* c = Lookup(comm);
  if (c == nullptr) return Invalid("ncclCommUserRank", "invalid communicator");
  if (rank == nullptr) return Invalid("ncclCommUserRank", "rank is null");
  *rank = c->impl.Rank();
  return ncclSuccess;
}

// --- Memory and registration (host memory; registration is a no-op) -----------------------

STANDIN_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr) return Invalid("ncclMemAlloc", "ptr is null");
  const size_t rounded = (size + 4095) / 4096 * 4096;
  *ptr = std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded);
  return *ptr != nullptr ? ncclSuccess : Fail(ncclSystemError, "ncclMemAlloc: out of host memory");
}

STANDIN_API(ncclResult_t, ncclMemFree, void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t /*size*/,
            void** handle) {
  if (Lookup(comm) == nullptr) return Invalid("ncclCommRegister", "invalid communicator");
  if (handle == nullptr) return Invalid("ncclCommRegister", "handle is null");
  *handle = buff;
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* /*handle*/) {
  if (Lookup(comm) == nullptr) return Invalid("ncclCommDeregister", "invalid communicator");
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t /*comm*/, void* /*buff*/,
            size_t /*size*/, ncclWindow_t* /*win*/, int /*winFlags*/) {
  return Unsupported("ncclCommWindowRegister");
}

STANDIN_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t /*comm*/, ncclWindow_t /*win*/) {
  return Unsupported("ncclCommWindowDeregister");
}

STANDIN_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* /*op*/, void* /*scalar*/,
            ncclDataType_t /*datatype*/, ncclScalarResidence_t /*residence*/, ncclComm_t /*comm*/) {
  return Unsupported("ncclRedOpCreatePreMulSum");
}

STANDIN_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t /*op*/, ncclComm_t /*comm*/) {
  return Unsupported("ncclRedOpDestroy");
}

// --- Collectives and point-to-point ----------------------------------------------------------

STANDIN_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm, {Operation::Kind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0});
}

STANDIN_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm,
                {Operation::Kind::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root});
}

STANDIN_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
            ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm, {Operation::Kind::kBroadcast, buff, buff, count, datatype, ncclSum, root});
}

STANDIN_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
            cudaStream_t /*stream*/) {
  return Submit(comm, {Operation::Kind::kReduce, sendbuff, recvbuff, count, datatype, op, root});
}

STANDIN_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm,
                {Operation::Kind::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0});
}

STANDIN_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm,
                {Operation::Kind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0});
}

STANDIN_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
            int peer, ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm, {Operation::Kind::kSend, sendbuff, nullptr, count, datatype, ncclSum, peer});
}

STANDIN_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
            ncclComm_t comm, cudaStream_t /*stream*/) {
  return Submit(comm, {Operation::Kind::kRecv, nullptr, recvbuff, count, datatype, ncclSum, peer});
}

// All-to-all, gather and scatter are groups of sends and receives (to oneself included).
STANDIN_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t /*stream*/) {
  return SubmitPointToPoint("ncclAlltoAll", comm, Collective::kAlltoAll, sendbuff, recvbuff, count,
                            datatype, 0);
}

STANDIN_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t /*stream*/) {
  return SubmitPointToPoint("ncclGather", comm, Collective::kGather, sendbuff, recvbuff, count,
                            datatype, root);
}

STANDIN_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t /*stream*/) {
  return SubmitPointToPoint("ncclScatter", comm, Collective::kScatter, sendbuff, recvbuff, count,
                            datatype, root);
}

// --- Groups ----------------------------------------------------------------------------------

STANDIN_API(ncclResult_t, ncclGroupStart) {
  metronome::testbed::standin::GroupStart();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclGroupEnd) {
  return metronome::testbed::standin::GroupEnd();
}

STANDIN_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* /*simInfo*/) {
  return Unsupported("ncclGroupSimulateEnd");
}
