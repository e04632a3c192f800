// Calls the real NCCL (linked normally) in ways that need no GPU and prints every result, one per
// line. real_nccl_equivalence.sh runs it with and without LD_PRELOAD=libmetronome.so and compares
// the outputs; lines starting with '#' say where the calls went and are not compared.
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>

namespace {
void Show(const char* what, ncclResult_t r) {
  std::printf("%s -> %d\n", what, static_cast<int>(r));
}
}  // namespace

int main() {
  Dl_info info{};
  void* sym = dlsym(RTLD_DEFAULT, "ncclAllReduce");
  if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) {
    std::printf("# ncclAllReduce from %s\n", info.dli_fname);
  }
  int version = 0;
  Show("ncclGetVersion", ncclGetVersion(&version));
  std::printf("version %d\n", version);
  for (int r = 0; r <= 8; ++r) {
    std::printf("ncclGetErrorString(%d) = %s\n", r,
                ncclGetErrorString(static_cast<ncclResult_t>(r)));
  }
  float buf[4] = {};
  cudaStream_t s = nullptr;
  Show("ncclAllReduce(null comm)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, nullptr, s));
  Show("ncclBroadcast(null comm)", ncclBroadcast(buf, buf, 4, ncclFloat, 0, nullptr, s));
  Show("ncclBcast(null comm)", ncclBcast(buf, 4, ncclFloat, 0, nullptr, s));
  Show("ncclReduce(null comm)", ncclReduce(buf, buf, 4, ncclFloat, ncclSum, 0, nullptr, s));
  Show("ncclAllGather(null comm)", ncclAllGather(buf, buf, 1, ncclFloat, nullptr, s));
  Show("ncclReduceScatter(null comm)",
       ncclReduceScatter(buf, buf, 1, ncclFloat, ncclSum, nullptr, s));
  Show("ncclAlltoAll(null comm)", ncclAlltoAll(buf, buf, 1, ncclFloat, nullptr, s));
  Show("ncclGather(null comm)", ncclGather(buf, buf, 1, ncclFloat, 0, nullptr, s));
  Show("ncclScatter(null comm)", ncclScatter(buf, buf, 1, ncclFloat, 0, nullptr, s));
  Show("ncclSend(null comm)", ncclSend(buf, 1, ncclFloat, 0, nullptr, s));
  Show("ncclRecv(null comm)", ncclRecv(buf, 1, ncclFloat, 0, nullptr, s));
  Show("ncclAllReduce(bad datatype)",
       ncclAllReduce(buf, buf, 4, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, nullptr, s));
  Show("ncclGroupStart", ncclGroupStart());
  Show("ncclGroupStart (nested)", ncclGroupStart());
  Show("ncclGroupEnd (nested)", ncclGroupEnd());
  Show("ncclGroupEnd", ncclGroupEnd());
  ncclComm_t comm = nullptr;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  Show("ncclCommInitRank(nranks 0)", ncclCommInitRank(&comm, 0, id, 0));
  Show("ncclCommInitRank(rank out of range)", ncclCommInitRank(&comm, 1, id, 5));
  Show("ncclCommInitRank(1 rank, no GPU)", ncclCommInitRank(&comm, 1, id, 0));
  std::printf("comm after failed init is %s\n", comm == nullptr ? "null" : "set");
  Show("ncclCommSplit(null comm)", ncclCommSplit(nullptr, 0, 0, &comm, nullptr));
  Show("ncclCommDestroy(null)", ncclCommDestroy(nullptr));
  Show("ncclCommFinalize(null)", ncclCommFinalize(nullptr));
  return 0;
}
