// A tiny fake libnccl.so.2 for the shim's tests: every call completes on the host, like the CPU
// stand-in, with a duration the test controls. As in NCCL, each public ncclX is a weak alias of a
// strong pncclX, and ncclBcast calls the public ncclBroadcast (so that an interposer sees NCCL
// calling itself). Environment:
//   FAKE_NCCL_NS_PER_BYTE  collective duration per byte (default 0: return at once)
//   FAKE_NCCL_FAIL_INIT=1  communicator creation fails with ncclSystemError
// A communicator created with config.blocking = 0 is in progress (ncclInProgress from its
// creation, its queries and collectives) until ncclCommGetAsyncError has been polled 3 times.
// The config's trafficClass is kept (fakeNcclTrafficClass) for the tests to read.
#include <nccl.h>

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

struct ncclComm {
  int nranks = 0;
  int rank = 0;
  unsigned long long calls = 0;
  int pending_polls = 0;  // > 0: a nonblocking initialization still in progress
  int traffic_class = NCCL_CONFIG_UNDEF_INT;
  bool revoked = false;
};

namespace {

double NsPerByte() {
  static const double kV = [] {
    const char* s = std::getenv("FAKE_NCCL_NS_PER_BYTE");
    return s != nullptr ? std::atof(s) : 0.0;
  }();
  return kV;
}

bool FailInit() {
  const char* s = std::getenv("FAKE_NCCL_FAIL_INIT");
  return s != nullptr && std::strcmp(s, "1") == 0;
}

ncclResult_t Work(ncclComm_t comm, size_t count, ncclDataType_t dt) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->pending_polls > 0 || comm->revoked) return ncclInvalidUsage;
  if (static_cast<int>(dt) < 0 || static_cast<int>(dt) >= ncclNumTypes) return ncclInvalidArgument;
  ++comm->calls;
  const double ns = NsPerByte() * static_cast<double>(count) * 4.0;
  if (ns >= 1.0) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ns / 1e9);
    ts.tv_nsec = static_cast<long>(ns - static_cast<double>(ts.tv_sec) * 1e9);
    nanosleep(&ts, nullptr);
  }
  return ncclSuccess;
}

ncclResult_t NewComm(ncclComm_t* out, int nranks, int rank) {
  if (out == nullptr || nranks <= 0 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  if (FailInit()) return ncclSystemError;
  *out = new ncclComm{nranks, rank, 0};
  return ncclSuccess;
}

// The config's effect on a new communicator: nonblocking, traffic class.
ncclResult_t Configure(ncclComm_t comm, const ncclConfig_t* config) {
  if (config == nullptr) return ncclSuccess;
  comm->traffic_class = config->trafficClass;
  if (config->blocking != 0) return ncclSuccess;
  comm->pending_polls = 3;
  return ncclInProgress;
}

std::atomic<int> g_group{0};

}  // namespace

#define FAKE_API(ret, name, ...)                                                                   \
  extern "C" __attribute__((visibility("default"), weak, alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__)

FAKE_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = 22809;
  return ncclSuccess;
}
FAKE_API(const char*, ncclGetErrorString, ncclResult_t r) {
  return r == ncclSuccess ? "fake: no error" : "fake: error";
}
FAKE_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  for (size_t i = 0; i < sizeof(id->internal); ++i) id->internal[i] = static_cast<char>(rand());
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  return NewComm(comm, nranks, rank);
}
FAKE_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId id,
         int rank, ncclConfig_t* config) {
  (void)id;
  if (ncclResult_t r = NewComm(comm, nranks, rank); r != ncclSuccess) return r;
  return Configure(*comm, config);
}
FAKE_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  (void)devlist;
  for (int i = 0; i < ndev; ++i) {
    if (ncclResult_t r = NewComm(&comm[i], ndev, i); r != ncclSuccess) return r;
  }
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  (void)color;
  (void)key;
  if (comm == nullptr) return ncclInvalidArgument;
  if (ncclResult_t r = NewComm(newcomm, 1, 0); r != ncclSuccess) return r;
  return Configure(*newcomm, config);
}
FAKE_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr || error == nullptr) return ncclInvalidArgument;
  if (comm->pending_polls > 0) --comm->pending_polls;
  *error = comm->pending_polls > 0 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int flags) {
  if (comm == nullptr || flags != 0) return ncclInvalidArgument;
  comm->revoked = true;
  return ncclSuccess;
}
extern "C" __attribute__((visibility("default"))) int FakeNcclTrafficClass(ncclComm_t comm) {
  return comm == nullptr ? -2 : comm->traffic_class;
}
FAKE_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return comm == nullptr ? ncclInvalidArgument : ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  delete comm;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  delete comm;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  if (comm->pending_polls > 0) return ncclInProgress;
  *count = comm->nranks;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  if (comm->pending_polls > 0) return ncclInProgress;
  *rank = comm->rank;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  *device = -1;
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclAllReduce, const void* s, void* r, size_t count, ncclDataType_t dt,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)r, (void)op, (void)stream;
  return Work(comm, count, dt);
}
FAKE_API(ncclResult_t, ncclBroadcast, const void* s, void* r, size_t count, ncclDataType_t dt,
         int root, ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)r, (void)root, (void)stream;
  return Work(comm, count, dt);
}
// As in NCCL: the deprecated in-place broadcast calls the public ncclBroadcast.
FAKE_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t dt, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, dt, root, comm, stream);
}
FAKE_API(ncclResult_t, ncclReduce, const void* s, void* r, size_t count, ncclDataType_t dt,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)r, (void)op, (void)root, (void)stream;
  return Work(comm, count, dt);
}
FAKE_API(ncclResult_t, ncclAllGather, const void* s, void* r, size_t count, ncclDataType_t dt,
         ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)r, (void)stream;
  return Work(comm, count, dt);
}
FAKE_API(ncclResult_t, ncclReduceScatter, const void* s, void* r, size_t count, ncclDataType_t dt,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)r, (void)op, (void)stream;
  return Work(comm, count, dt);
}
FAKE_API(ncclResult_t, ncclSend, const void* s, size_t count, ncclDataType_t dt, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  (void)s, (void)peer, (void)stream;
  return Work(comm, count, dt);
}
FAKE_API(ncclResult_t, ncclRecv, void* r, size_t count, ncclDataType_t dt, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  (void)r, (void)peer, (void)stream;
  return Work(comm, count, dt);
}
FAKE_API(ncclResult_t, ncclGroupStart) {
  g_group.fetch_add(1);
  return ncclSuccess;
}
FAKE_API(ncclResult_t, ncclGroupEnd) {
  if (g_group.load() <= 0) return ncclInvalidUsage;
  g_group.fetch_sub(1);
  return ncclSuccess;
}
// Deliberately missing (an "older NCCL"): AlltoAll, Gather, Scatter, InitRankScalable, Shrink.
