// The build's nccl.h as NCCL 2.29.7 would have it, for a compile check of the wrappers that
// only a newer NCCL has (ncclCommGrow 2.29.2, ncclCommSuspend/Resume 2.29.7): their declarations
// as the NCCL 2.29 headers give them. Used by the shim_exports_nccl_2_29 object library only.
#pragma once

#include METRONOME_REAL_NCCL_H  // the build's nccl.h, by its path

#undef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE 22907

extern "C" {
ncclResult_t ncclCommGrow(ncclComm_t comm, int n_ranks, const ncclUniqueId* unique_id, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int n_ranks, const ncclUniqueId* unique_id, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);
}
