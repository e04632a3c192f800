// The NCCL functions libmetronome.so exports. Each definition below redeclares a function of
// nccl.h with C linkage: a signature that differs from the header is a compile error, and the
// static_asserts check that the pnccl twin the shim calls has the same type.
//
// Wrapped: collectives, point-to-point, groups, communicator creation, revocation, suspension and
// destruction (those of a newer NCCL when the header has them). Every other NCCL function is not
// defined here and reaches libnccl directly; shim/nccl_passthrough.txt says why for each.
//
// No exception leaves these functions (they call only noexcept code; nccl.h's declarations carry
// no exception specification, so the definitions cannot say noexcept themselves), and none
// aborts the process: a missing real function yields ncclInternalError.
#include <nccl.h>

#include <type_traits>

#include "intercept.hpp"
#include "real_nccl.hpp"
#include "runtime.hpp"

#define METRONOME_EXPORT extern "C" __attribute__((visibility("default")))

using metronome::shim::CommOrigin;
using metronome::shim::Fn;
using metronome::shim::Op;
namespace ms = metronome::shim;

// The pnccl twin of every wrapped function has the wrapped function's type.
#define METRONOME_SAME_TYPE(name)                                                  \
  static_assert(std::is_same_v<decltype(&::nccl##name), decltype(&::pnccl##name)>, \
                "nccl" #name " and pnccl" #name " differ");
METRONOME_NCCL_FUNCTIONS(METRONOME_SAME_TYPE)
#undef METRONOME_SAME_TYPE

// ---- Collectives ----------------------------------------------------------------------------

// Element-wise: a job that yields may issue them in parts (ms::ElementwiseCollective).

METRONOME_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op,
                                            ncclComm_t comm, cudaStream_t stream) {
  return ms::ElementwiseCollective(
      Op::kAllReduce, count, datatype, comm, stream, [&](size_t off, size_t n) {
        return ms::Forward<Fn::kAllReduce>(ms::ElementsInto(sendbuff, off, datatype),
                                           ms::ElementsInto(recvbuff, off, datatype), n, datatype,
                                           op, comm, stream);
      });
}

METRONOME_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, int root, ncclComm_t comm,
                                            cudaStream_t stream) {
  return ms::ElementwiseCollective(
      Op::kBroadcast, count, datatype, comm, stream, [&](size_t off, size_t n) {
        return ms::Forward<Fn::kBroadcast>(ms::ElementsInto(sendbuff, off, datatype),
                                           ms::ElementsInto(recvbuff, off, datatype), n, datatype,
                                           root, comm, stream);
      });
}

METRONOME_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                        ncclComm_t comm, cudaStream_t stream) {
  return ms::ElementwiseCollective(
      Op::kBroadcast, count, datatype, comm, stream, [&](size_t off, size_t n) {
        return ms::Forward<Fn::kBcast>(ms::ElementsInto(buff, off, datatype), n, datatype, root,
                                       comm, stream);
      });
}

METRONOME_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclRedOp_t op, int root,
                                         ncclComm_t comm, cudaStream_t stream) {
  return ms::ElementwiseCollective(
      Op::kReduce, count, datatype, comm, stream, [&](size_t off, size_t n) {
        return ms::Forward<Fn::kReduce>(ms::ElementsInto(sendbuff, off, datatype),
                                        ms::ElementsInto(recvbuff, off, datatype), n, datatype, op,
                                        root, comm, stream);
      });
}

METRONOME_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm,
                                            cudaStream_t stream) {
  return ms::Collective<Fn::kAllGather>(Op::kAllGather, ms::Bytes(sendcount, datatype), comm,
                                        stream, sendbuff, recvbuff, sendcount, datatype, comm,
                                        stream);
}

METRONOME_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff,
                                                size_t recvcount, ncclDataType_t datatype,
                                                ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream) {
  return ms::Collective<Fn::kReduceScatter>(Op::kReduceScatter, ms::Bytes(recvcount, datatype),
                                            comm, stream, sendbuff, recvbuff, recvcount, datatype,
                                            op, comm, stream);
}

METRONOME_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream) {
  return ms::Collective<Fn::kAlltoAll>(Op::kAlltoAll, ms::Bytes(count, datatype), comm, stream,
                                       sendbuff, recvbuff, count, datatype, comm, stream);
}

METRONOME_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream) {
  return ms::Collective<Fn::kGather>(Op::kGather, ms::Bytes(count, datatype), comm, stream,
                                     sendbuff, recvbuff, count, datatype, root, comm, stream);
}

METRONOME_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, int root, ncclComm_t comm,
                                          cudaStream_t stream) {
  return ms::Collective<Fn::kScatter>(Op::kScatter, ms::Bytes(count, datatype), comm, stream,
                                      sendbuff, recvbuff, count, datatype, root, comm, stream);
}

// ---- Point to point -------------------------------------------------------------------------

METRONOME_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream) {
  return ms::Collective<Fn::kSend>(Op::kSend, ms::Bytes(count, datatype), comm, stream, sendbuff,
                                   count, datatype, peer, comm, stream);
}

METRONOME_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream) {
  return ms::Collective<Fn::kRecv>(Op::kRecv, ms::Bytes(count, datatype), comm, stream, recvbuff,
                                   count, datatype, peer, comm, stream);
}

// ---- Groups ---------------------------------------------------------------------------------

METRONOME_EXPORT ncclResult_t ncclGroupStart() {
  ms::ThreadState& ts = ms::Tls();
  if (ts.depth != 0 || !ms::g_shim_active.load(std::memory_order_relaxed)) {
    return ms::Forward<Fn::kGroupStart>();
  }
  ++ts.depth;
  const ncclResult_t r = ms::Forward<Fn::kGroupStart>();
  if (r == ncclSuccess) {
    if (ts.group_depth == 0) ts.group_gated = false;
    ++ts.group_depth;
  }
  --ts.depth;
  return r;
}

METRONOME_EXPORT ncclResult_t ncclGroupEnd() {
  ms::ThreadState& ts = ms::Tls();
  if (ts.depth != 0 || !ms::g_shim_active.load(std::memory_order_relaxed)) {
    return ms::Forward<Fn::kGroupEnd>();
  }
  ++ts.depth;
  const ncclResult_t r = ms::Forward<Fn::kGroupEnd>();
  // NCCL closes the group even when it reports an error.
  if (ts.group_depth > 0) --ts.group_depth;
  if (ts.group_depth == 0) {
    ts.group_gated = false;
    ms::Runtime::AfterGroup(ts, r);
  }
  --ts.depth;
  return r;
}

// ---- Communicator creation ------------------------------------------------------------------

METRONOME_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                               int rank) {
  CommOrigin o;
  o.how = "InitRank";
  o.id = &comm_id;
  o.nranks = nranks;
  o.rank = rank;
  return ms::Create<Fn::kCommInitRank>(comm, o, comm, nranks, comm_id, rank);
}

METRONOME_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                     ncclUniqueId comm_id, int rank,
                                                     ncclConfig_t* config) {
  CommOrigin o;
  o.how = "InitRankConfig";
  o.id = &comm_id;
  o.nranks = nranks;
  o.rank = rank;
  return ms::Create<Fn::kCommInitRankConfig>(comm, o, comm, nranks, comm_id, rank,
                                             ms::WithTrafficClass(config));
}

METRONOME_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  ms::ThreadState& ts = ms::Tls();
  if (ts.depth != 0 || !ms::g_shim_active.load(std::memory_order_relaxed)) {
    return ms::Forward<Fn::kCommInitAll>(comm, ndev, devlist);
  }
  ++ts.depth;
  const ncclResult_t r = ms::Forward<Fn::kCommInitAll>(comm, ndev, devlist);
  if (r == ncclSuccess && comm != nullptr) {
    for (int i = 0; i < ndev; ++i) {
      CommOrigin o;
      o.how = "InitAll";
      o.nranks = ndev;
      o.rank = i;
      ms::Runtime::Get().OnCommCreated(comm[i], o);
    }
  }
  --ts.depth;
  return r;
}

METRONOME_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                            ncclComm_t* newcomm, ncclConfig_t* config) {
  CommOrigin o;
  o.how = "Split";
  o.parent = comm;
  return ms::Create<Fn::kCommSplit>(newcomm, o, comm, color, key, newcomm,
                                    ms::WithTrafficClass(config));
}

METRONOME_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                       int n_id, ncclUniqueId* comm_ids,
                                                       ncclConfig_t* config) {
  CommOrigin o;
  o.how = "InitRankScalable";
  o.id = n_id > 0 ? comm_ids : nullptr;
  o.nranks = nranks;
  o.rank = myrank;
  return ms::Create<Fn::kCommInitRankScalable>(newcomm, o, newcomm, nranks, myrank, n_id, comm_ids,
                                               ms::WithTrafficClass(config));
}

METRONOME_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks_list,
                                             int exclude_ranks_count, ncclComm_t* newcomm,
                                             ncclConfig_t* config, int shrink_flags) {
  CommOrigin o;
  o.how = "Shrink";
  o.parent = comm;
  return ms::Create<Fn::kCommShrink>(newcomm, o, comm, exclude_ranks_list, exclude_ranks_count,
                                     newcomm, ms::WithTrafficClass(config), shrink_flags);
}

#if NCCL_VERSION_CODE >= 22902
METRONOME_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int n_ranks,
                                           const ncclUniqueId* unique_id, int rank,
                                           ncclComm_t* newcomm, ncclConfig_t* config) {
  // Existing ranks pass their communicator (the new one is part of its job); new ranks pass
  // none and the id.
  CommOrigin o;
  o.how = "Grow";
  o.parent = comm;
  o.id = comm == nullptr ? unique_id : nullptr;
  o.nranks = n_ranks;
  o.rank = comm == nullptr ? rank : -1;
  return ms::Create<Fn::kCommGrow>(newcomm, o, comm, n_ranks, unique_id, rank, newcomm,
                                   ms::WithTrafficClass(config));
}
#endif

// ---- Revocation and suspension: the communicator stays, its calls are not gated -------------

#if NCCL_VERSION_CODE >= 22807
METRONOME_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revoke_flags) {
  return ms::Pause<Fn::kCommRevoke>(comm, true, "revoked", comm, revoke_flags);
}
#endif

#if NCCL_VERSION_CODE >= 22907
METRONOME_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  return ms::Pause<Fn::kCommSuspend>(comm, true, "suspended", comm, flags);
}

METRONOME_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  return ms::Pause<Fn::kCommResume>(comm, false, "resumed", comm);
}
#endif

// ---- Communicator destruction ---------------------------------------------------------------

METRONOME_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  // Finalize flushes outstanding work; the communicator stays valid until Destroy.
  return ms::Forward<Fn::kCommFinalize>(comm);
}

METRONOME_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return ms::Destroy<Fn::kCommDestroy>(comm, "destroyed");
}

METRONOME_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return ms::Destroy<Fn::kCommAbort>(comm, "aborted");
}
