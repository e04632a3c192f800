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

using standin::fail;
using standin::Operation;

// Live communicators: a handle is checked against this set before use, so that a stale or
// garbage handle gives ncclInvalidArgument instead of a crash.
std::mutex& registryMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::unordered_set<ncclComm*>& registry() {
  static auto* set = new std::unordered_set<ncclComm*>;
  return *set;
}

void registerComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().insert(comm);
}

bool unregisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex());
  return registry().erase(comm) != 0;
}

ncclComm* lookup(const ncclComm_t comm) noexcept {
  if (comm == nullptr) return nullptr;
  try {
    std::lock_guard<std::mutex> lock(registryMutex());
    return registry().count(comm) != 0 ? comm : nullptr;
  } catch (...) {
    return nullptr;  // the mutex failed: treat the handle as unusable
  }
}

// The result of the exception being handled (call inside catch).
ncclResult_t caught(const char* function) noexcept {
  std::string message;
  const ncclResult_t code = standin::currentExceptionResult(message);
  return fail(code, std::string(function) + ": " + message);
}

ncclResult_t unsupported(const char* function) noexcept {
  const std::string message =
      std::string(function) + " is not supported by the Gloo stand-in of libnccl.so.2";
  standin::warnOnce(function, message);
  return fail(ncclInvalidUsage, message);
}

ncclResult_t invalid(const char* function, const std::string& what) noexcept {
  try {
    return fail(ncclInvalidArgument, std::string(function) + ": " + what);
  } catch (...) {
    return ncclInvalidArgument;
  }
}

// Looks up a usable communicator; on failure returns the error (and records why).
ncclResult_t usableComm(const char* function, ncclComm_t handle, ncclComm*& comm) {
  comm = lookup(handle);
  if (comm == nullptr) return invalid(function, "invalid communicator (null or destroyed)");
  const ncclResult_t async = comm->impl.asyncError();
  if (async != ncclSuccess) {
    return fail(async, std::string(function) + ": communicator failed earlier (" +
                           std::string(ncclGetErrorString(async)) + "); destroy it");
  }
  return ncclSuccess;
}

bool fits(std::size_t count, std::size_t elementSize, std::size_t factor) {
  return count <= std::numeric_limits<std::size_t>::max() / elementSize / factor;
}

// Validates a collective or point-to-point operation and runs it (or queues it in a group).
ncclResult_t submit(ncclComm_t handle, const Operation& operation) noexcept {
  const char* function = operation.name();
  try {
    ncclComm* comm = nullptr;
    if (const ncclResult_t rc = usableComm(function, handle, comm); rc != ncclSuccess) return rc;
    const int nranks = comm->impl.size();
    const int rank = comm->impl.rank();
    if (!standin::isValidType(operation.type)) {
      return invalid(function,
                     "invalid datatype " + std::to_string(static_cast<int>(operation.type)));
    }
    const bool reduces = operation.kind == Operation::Kind::kAllReduce ||
                         operation.kind == Operation::Kind::kReduce ||
                         operation.kind == Operation::Kind::kReduceScatter;
    if (reduces && !standin::isValidOp(operation.op)) {
      return invalid(function,
                     "invalid reduction op " + std::to_string(static_cast<int>(operation.op)));
    }
    const bool rooted = operation.kind == Operation::Kind::kBroadcast ||
                        operation.kind == Operation::Kind::kReduce || operation.isPointToPoint();
    if (rooted && (operation.root < 0 || operation.root >= nranks)) {
      return invalid(function, std::string(operation.isPointToPoint() ? "peer " : "root ") +
                                   std::to_string(operation.root) + " out of range [0, " +
                                   std::to_string(nranks) + ")");
    }
    const std::size_t factor = (operation.kind == Operation::Kind::kAllGather ||
                                operation.kind == Operation::Kind::kReduceScatter)
                                   ? static_cast<std::size_t>(nranks)
                                   : 1;
    if (!fits(operation.count, standin::typeSize(operation.type), factor)) {
      return invalid(function, "count " + std::to_string(operation.count) + " is too large");
    }
    if (operation.count > 0) {
      bool needSend = true;
      bool needRecv = true;
      switch (operation.kind) {
        case Operation::Kind::kBroadcast:
          needSend = rank == operation.root;
          break;
        case Operation::Kind::kReduce:
          needRecv = rank == operation.root;
          break;
        case Operation::Kind::kSend:
          needRecv = false;
          break;
        case Operation::Kind::kRecv:
          needSend = false;
          break;
        default:
          break;
      }
      if (needSend && operation.sendbuff == nullptr) return invalid(function, "sendbuff is null");
      if (needRecv && operation.recvbuff == nullptr) return invalid(function, "recvbuff is null");
    }
    if (reduces && standin::reduceFunction(operation.type, operation.op) == nullptr) {
      standin::warnOnce(std::string("reduce-") + standin::typeName(operation.type),
                        std::string("the Gloo stand-in cannot reduce ") +
                            standin::typeName(operation.type) + " values");
      return fail(ncclInvalidUsage, std::string(function) + ": cannot reduce " +
                                        standin::typeName(operation.type) + " values");
    }
    if (standin::inGroup()) {
      standin::enqueueOperation(comm, operation);
      return ncclSuccess;
    }
    if (operation.isPointToPoint() && operation.root == rank && operation.count > 0) {
      return fail(ncclInvalidUsage,
                  std::string(function) + ": send/receive to oneself must be inside a group");
    }
    try {
      comm->impl.run(operation);
    } catch (...) {
      const ncclResult_t code = caught(function);
      if (code == ncclSystemError || code == ncclInternalError) comm->impl.setAsyncError(code);
      return code;
    }
    return ncclSuccess;
  } catch (...) {
    return caught(function);
  }
}

enum class Collective { kAlltoAll, kGather, kScatter };

// Validates an all-to-all, gather or scatter and runs it as a group of sends and receives.
ncclResult_t submitPointToPoint(const char* function, ncclComm_t handle, Collective kind,
                                const void* sendbuff, void* recvbuff, std::size_t count,
                                ncclDataType_t type, int root) noexcept {
  try {
    ncclComm* comm = nullptr;
    if (const ncclResult_t rc = usableComm(function, handle, comm); rc != ncclSuccess) return rc;
    const int nranks = comm->impl.size();
    const int rank = comm->impl.rank();
    if (!standin::isValidType(type)) {
      return invalid(function, "invalid datatype " + std::to_string(static_cast<int>(type)));
    }
    if (kind != Collective::kAlltoAll && (root < 0 || root >= nranks)) {
      return invalid(function, "root " + std::to_string(root) + " out of range [0, " +
                                   std::to_string(nranks) + ")");
    }
    const std::size_t size = standin::typeSize(type);
    if (!fits(count, size, static_cast<std::size_t>(nranks))) {
      return invalid(function, "count " + std::to_string(count) + " is too large");
    }
    if (count == 0) return ncclSuccess;
    const bool needSend = kind != Collective::kScatter || rank == root;
    const bool needRecv = kind != Collective::kGather || rank == root;
    if (needSend && sendbuff == nullptr) return invalid(function, "sendbuff is null");
    if (needRecv && recvbuff == nullptr) return invalid(function, "recvbuff is null");
    const std::size_t block = count * size;
    const auto* send = static_cast<const char*>(sendbuff);
    auto* recv = static_cast<char*>(recvbuff);
    if (kind == Collective::kAlltoAll) {
      const std::size_t total = block * static_cast<std::size_t>(nranks);
      if (send < recv + total && recv < send + total) {
        return fail(ncclInvalidUsage,
                    std::string(function) + ": in-place operation is not supported");
      }
    }
    std::vector<Operation> ops;
    auto sendTo = [&](const char* from, int peer) {
      ops.push_back({Operation::Kind::kSend, from, nullptr, count, type, ncclSum, peer});
    };
    auto recvFrom = [&](char* into, int peer) {
      ops.push_back({Operation::Kind::kRecv, nullptr, into, count, type, ncclSum, peer});
    };
    for (int peer = 0; peer < nranks; ++peer) {
      const std::size_t offset = static_cast<std::size_t>(peer) * block;
      switch (kind) {
        case Collective::kAlltoAll:
          sendTo(send + offset, peer);
          recvFrom(recv + offset, peer);
          break;
        case Collective::kGather:
          if (peer == root) sendTo(send, root);
          if (rank == root) recvFrom(recv + offset, peer);
          break;
        case Collective::kScatter:
          if (rank == root) sendTo(send + offset, peer);
          if (peer == root) recvFrom(recv, root);
          break;
      }
    }
    if (standin::inGroup()) {
      for (const auto& op : ops) standin::enqueueOperation(comm, op);
      return ncclSuccess;
    }
    try {
      comm->impl.runGroup(ops);
    } catch (...) {
      const ncclResult_t code = caught(function);
      if (code == ncclSystemError || code == ncclInternalError) comm->impl.setAsyncError(code);
      return code;
    }
    return ncclSuccess;
  } catch (...) {
    return caught(function);
  }
}

ncclResult_t initRank(const char* function, ncclComm_t* out, int nranks, const ncclUniqueId& id,
                      int rank, const ncclConfig_t* config, int device) noexcept {
  try {
    if (out == nullptr) return invalid(function, "comm is null");
    *out = nullptr;
    if (nranks < 1) return invalid(function, "nranks " + std::to_string(nranks) + " < 1");
    if (rank < 0 || rank >= nranks) {
      return invalid(function, "rank " + std::to_string(rank) + " out of range [0, " +
                                   std::to_string(nranks) + ")");
    }
    if (config != nullptr && config->magic != 0xcafebeef) {
      return invalid(function, "config was not initialized with NCCL_CONFIG_INITIALIZER");
    }
    auto rendezvous = standin::decodeId(id);
    if (!rendezvous) {
      return invalid(function, "the unique id was not made by this library's ncclGetUniqueId");
    }
    auto comm = std::make_unique<ncclComm>(nranks, rank, std::move(*rendezvous), device);
    ncclComm* raw = comm.get();
    registerComm(raw);
    if (standin::inGroup()) {
      try {
        standin::enqueueInit(raw);
      } catch (...) {
        unregisterComm(raw);
        throw;
      }
      *out = comm.release();
      return ncclSuccess;
    }
    const ncclResult_t rc = standin::connectAll({raw});
    if (rc != ncclSuccess) {
      unregisterComm(raw);
      return rc;
    }
    *out = comm.release();
    return ncclSuccess;
  } catch (...) {
    return caught(function);
  }
}

// Destroy closes the connections gracefully (data already sent still reaches the peers); abort
// resets them.
ncclResult_t destroy(const char* function, ncclComm_t handle, bool abort) noexcept {
  try {
    if (handle == nullptr || !unregisterComm(handle)) {
      return invalid(function, "invalid communicator (null or destroyed)");
    }
    standin::forgetComm(handle);
    if (abort) handle->impl.abort();
    delete handle;
    return ncclSuccess;
  } catch (...) {
    return caught(function);
  }
}

}  // namespace

// --- Library information -------------------------------------------------------------------

// Marks this libnccl.so.2 as the stand-in: dlsym(handle, "metronome_nccl_standin") finds it here
// and not in the real NCCL (metronome-trainer picks host buffers by it).
extern "C" __attribute__((visibility("default"))) const char metronome_nccl_standin[] = "gloo";

STANDIN_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return invalid("ncclGetVersion", "version is null");
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
  return standin::lastError();
}

STANDIN_API(void, ncclResetDebugInit) {}

STANDIN_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return invalid("ncclGetUniqueId", "uniqueId is null");
  try {
    *uniqueId = standin::encodeId(standin::newRendezvous());
    return ncclSuccess;
  } catch (...) {
    return caught("ncclGetUniqueId");
  }
}

// --- Communicators -------------------------------------------------------------------------

STANDIN_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
            int rank) {
  return initRank("ncclCommInitRank", comm, nranks, commId, rank, nullptr, 0);
}

STANDIN_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
            int rank, ncclConfig_t* config) {
  return initRank("ncclCommInitRankConfig", comm, nranks, commId, rank, config, 0);
}

STANDIN_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
            int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  // Several ids only spread NCCL's bootstrap load: the first one is enough here.
  if (nId < 1 || commIds == nullptr) {
    return invalid("ncclCommInitRankScalable", "needs at least one unique id");
  }
  return initRank("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config, 0);
}

STANDIN_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  const char* function = "ncclCommInitAll";
  if (comms == nullptr) return invalid(function, "comms is null");
  if (ndev < 1) return invalid(function, "ndev " + std::to_string(ndev) + " < 1");
  try {
    const standin::Rendezvous rendezvous = standin::newRendezvous();
    std::vector<std::unique_ptr<ncclComm>> owned;
    std::vector<ncclComm*> raw;
    for (int i = 0; i < ndev; ++i) {
      owned.push_back(
          std::make_unique<ncclComm>(ndev, i, rendezvous, devlist != nullptr ? devlist[i] : i));
      raw.push_back(owned.back().get());
    }
    const ncclResult_t rc = standin::connectAll(raw);
    if (rc != ncclSuccess) return rc;
    for (int i = 0; i < ndev; ++i) {
      registerComm(raw[static_cast<std::size_t>(i)]);
      comms[i] = owned[static_cast<std::size_t>(i)].release();
    }
    return ncclSuccess;
  } catch (...) {
    return caught(function);
  }
}

// Operations complete on the host before they return, but their last bytes may still be on the
// way to a peer: finalize is a barrier of all ranks, after which no rank waits for data, so that
// the ranks may then close their connections and exit in any order. (Destroy without finalize
// closes gracefully too, which delivers what was sent; finalize also tells that every peer got
// that far.)
STANDIN_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  const char* function = "ncclCommFinalize";
  ncclComm* c = lookup(comm);
  if (c == nullptr) return invalid(function, "invalid communicator");
  try {
    const ncclResult_t async = c->impl.asyncError();
    if (async != ncclSuccess) {
      return fail(async, std::string(function) + ": communicator failed earlier (" +
                             std::string(ncclGetErrorString(async)) + "); destroy it");
    }
    c->impl.finalize();
    return ncclSuccess;
  } catch (...) {
    const ncclResult_t code = caught(function);
    if (code == ncclSystemError || code == ncclInternalError) c->impl.setAsyncError(code);
    return code;
  }
}

STANDIN_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return destroy("ncclCommDestroy", comm, false);
}

STANDIN_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return destroy("ncclCommAbort", comm, true);
}

STANDIN_API(ncclResult_t, ncclCommRevoke, ncclComm_t /*comm*/, int /*revokeFlags*/) {
  return unsupported("ncclCommRevoke");
}

// Split: the parent's ranks exchange (color, key); the first member of each color (by key, then
// parent rank) makes a rendezvous and every rank learns its leader's id in a second exchange; then
// each member joins its new communicator. NCCL_SPLIT_NOCOLOR ranks take part but get no comm.
STANDIN_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
            ncclConfig_t* config) {
  const char* function = "ncclCommSplit";
  try {
    if (newcomm == nullptr) return invalid(function, "newcomm is null");
    *newcomm = nullptr;
    ncclComm* parent = nullptr;
    if (const ncclResult_t rc = usableComm(function, comm, parent); rc != ncclSuccess) return rc;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
      return invalid(function, "color " + std::to_string(color) + " is negative");
    }
    if (config != nullptr && config->magic != 0xcafebeef) {
      return invalid(function, "config was not initialized with NCCL_CONFIG_INITIALIZER");
    }
    if (standin::inGroup()) {
      return fail(ncclInvalidUsage,
                  "ncclCommSplit inside a group is not supported by the stand-in");
    }
    auto& impl = parent->impl;
    const int nranks = impl.size();
    const int me = impl.rank();
    const std::int32_t mine[2] = {color, key};
    std::vector<std::int32_t> all(static_cast<std::size_t>(2 * nranks));
    {
      const auto bytes = impl.exchange(mine, sizeof(mine));
      std::memcpy(all.data(), bytes.data(), bytes.size());
    }
    // Members of my color in new-rank order.
    std::vector<int> members;
    for (int r = 0; r < nranks; ++r) {
      if (color != NCCL_SPLIT_NOCOLOR && all[static_cast<std::size_t>(2 * r)] == color) {
        members.push_back(r);
      }
    }
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return all[static_cast<std::size_t>(2 * a + 1)] < all[static_cast<std::size_t>(2 * b + 1)];
    });
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    const bool leader = !members.empty() && members.front() == me;
    if (leader) id = standin::encodeId(standin::newRendezvous());
    const auto ids = impl.exchange(&id, sizeof(id));
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    std::memcpy(&id, ids.data() + static_cast<std::size_t>(members.front()) * sizeof(id),
                sizeof(id));
    const int newRank =
        static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    return initRank(function, newcomm, static_cast<int>(members.size()), id, newRank, config,
                    impl.device());
  } catch (...) {
    return caught(function);
  }
}

STANDIN_API(ncclResult_t, ncclCommShrink, ncclComm_t /*comm*/, int* /*excludeRanksList*/,
            int /*excludeRanksCount*/, ncclComm_t* newcomm, ncclConfig_t* /*config*/,
            int /*shrinkFlags*/) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return unsupported("ncclCommShrink");
}

STANDIN_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  ncclComm* c = lookup(comm);
  if (c == nullptr) return invalid("ncclCommGetAsyncError", "invalid communicator");
  if (asyncError == nullptr) return invalid("ncclCommGetAsyncError", "asyncError is null");
  *asyncError = c->impl.asyncError();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  ncclComm* c = lookup(comm);
  if (c == nullptr) return invalid("ncclCommCount", "invalid communicator");
  if (count == nullptr) return invalid("ncclCommCount", "count is null");
  *count = c->impl.size();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  ncclComm* c = lookup(comm);
  if (c == nullptr) return invalid("ncclCommCuDevice", "invalid communicator");
  if (device == nullptr) return invalid("ncclCommCuDevice", "device is null");
  *device = c->impl.device();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  ncclComm* c = lookup(comm);
  if (c == nullptr) return invalid("ncclCommUserRank", "invalid communicator");
  if (rank == nullptr) return invalid("ncclCommUserRank", "rank is null");
  *rank = c->impl.rank();
  return ncclSuccess;
}

// --- Memory and registration (host memory; registration is a no-op) -----------------------

STANDIN_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr) return invalid("ncclMemAlloc", "ptr is null");
  const size_t rounded = (size + 4095) / 4096 * 4096;
  *ptr = std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded);
  return *ptr != nullptr ? ncclSuccess : fail(ncclSystemError, "ncclMemAlloc: out of host memory");
}

STANDIN_API(ncclResult_t, ncclMemFree, void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t /*size*/,
            void** handle) {
  if (lookup(comm) == nullptr) return invalid("ncclCommRegister", "invalid communicator");
  if (handle == nullptr) return invalid("ncclCommRegister", "handle is null");
  *handle = buff;
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* /*handle*/) {
  if (lookup(comm) == nullptr) return invalid("ncclCommDeregister", "invalid communicator");
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t /*comm*/, void* /*buff*/,
            size_t /*size*/, ncclWindow_t* /*win*/, int /*winFlags*/) {
  return unsupported("ncclCommWindowRegister");
}

STANDIN_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t /*comm*/, ncclWindow_t /*win*/) {
  return unsupported("ncclCommWindowDeregister");
}

STANDIN_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* /*op*/, void* /*scalar*/,
            ncclDataType_t /*datatype*/, ncclScalarResidence_t /*residence*/, ncclComm_t /*comm*/) {
  return unsupported("ncclRedOpCreatePreMulSum");
}

STANDIN_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t /*op*/, ncclComm_t /*comm*/) {
  return unsupported("ncclRedOpDestroy");
}

// --- Collectives and point-to-point ----------------------------------------------------------

STANDIN_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm, {Operation::Kind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0});
}

STANDIN_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm,
                {Operation::Kind::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root});
}

STANDIN_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
            ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm, {Operation::Kind::kBroadcast, buff, buff, count, datatype, ncclSum, root});
}

STANDIN_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
            cudaStream_t /*stream*/) {
  return submit(comm, {Operation::Kind::kReduce, sendbuff, recvbuff, count, datatype, op, root});
}

STANDIN_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm,
                {Operation::Kind::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0});
}

STANDIN_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm,
                {Operation::Kind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0});
}

STANDIN_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
            int peer, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm, {Operation::Kind::kSend, sendbuff, nullptr, count, datatype, ncclSum, peer});
}

STANDIN_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
            ncclComm_t comm, cudaStream_t /*stream*/) {
  return submit(comm, {Operation::Kind::kRecv, nullptr, recvbuff, count, datatype, ncclSum, peer});
}

// All-to-all, gather and scatter are groups of sends and receives (to oneself included).
STANDIN_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submitPointToPoint("ncclAlltoAll", comm, Collective::kAlltoAll, sendbuff, recvbuff, count,
                            datatype, 0);
}

STANDIN_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submitPointToPoint("ncclGather", comm, Collective::kGather, sendbuff, recvbuff, count,
                            datatype, root);
}

STANDIN_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t /*stream*/) {
  return submitPointToPoint("ncclScatter", comm, Collective::kScatter, sendbuff, recvbuff, count,
                            datatype, root);
}

// --- Groups ----------------------------------------------------------------------------------

STANDIN_API(ncclResult_t, ncclGroupStart) {
  standin::groupStart();
  return ncclSuccess;
}

STANDIN_API(ncclResult_t, ncclGroupEnd) {
  return standin::groupEnd();
}

STANDIN_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* /*simInfo*/) {
  return unsupported("ncclGroupSimulateEnd");
}
