// ncclGroupStart / ncclGroupEnd: per thread, nesting. Inside a group, operations (and
// communicator initializations) are queued and run at the outermost ncclGroupEnd: all
// initializations concurrently, then each communicator's operations (Communicator::runGroup),
// communicators concurrently when the group spans several (one thread driving several ranks).
#pragma once

#include <nccl.h>

#include "communicator.hpp"

namespace metronome::testbed::standin {

bool InGroup() noexcept;
void GroupStart() noexcept;
// Ends the innermost group; at the outermost, runs what was queued and returns the first error.
ncclResult_t GroupEnd() noexcept;

void EnqueueOperation(ncclComm* comm, const Operation& operation);  // throws std::bad_alloc
void EnqueueInit(ncclComm* comm);                                   // throws std::bad_alloc
// Drops what this thread queued for `comm` (it is being destroyed).
void ForgetComm(ncclComm* comm) noexcept;

// Runs `comm->impl.connect()` for each comm concurrently; marks failures as the comm's async
// error. Returns the first error (and sets the last error message).
ncclResult_t ConnectAll(const std::vector<ncclComm*>& comms) noexcept;

}  // namespace metronome::testbed::standin
