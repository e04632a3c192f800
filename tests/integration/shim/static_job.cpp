// A program with NCCL linked in statically (here the fake NCCL's sources) and its symbols
// exported: the shim cannot intercept its calls and must say so at load.
#include <nccl.h>

#include <cstdio>

int main() {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    return 2;
  }
  ncclCommDestroy(comm);
  std::puts("ok");
  return 0;
}
