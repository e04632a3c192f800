#include "group.hpp"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "errors.hpp"

namespace standin {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<ncclComm*> inits;
  std::vector<std::pair<ncclComm*, Operation>> operations;
};

thread_local GroupState tGroup;

// Should an error of this kind break the communicator for good?
bool isFatal(ncclResult_t code) {
  return code == ncclSystemError || code == ncclInternalError || code == ncclRemoteError;
}

struct Outcome {
  ncclResult_t code = ncclSuccess;
  std::string message;
};

// Runs fn(i) for i in [0, n), concurrently when n > 1, collecting each outcome.
template <typename Fn>
std::vector<Outcome> runEach(std::size_t n, Fn fn) {
  std::vector<Outcome> outcomes(n);
  auto guarded = [&](std::size_t i) {
    try {
      fn(i);
    } catch (...) {
      outcomes[i].code = currentExceptionResult(outcomes[i].message);
    }
  };
  if (n == 1) {
    guarded(0);
    return outcomes;
  }
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      threads.emplace_back(guarded, i);
    } catch (...) {
      outcomes[i] = {ncclSystemError, "cannot start a thread for the group"};
    }
  }
  for (auto& thread : threads) thread.join();
  return outcomes;
}

ncclResult_t firstError(const std::vector<Outcome>& outcomes) {
  for (const auto& outcome : outcomes) {
    if (outcome.code != ncclSuccess) return fail(outcome.code, outcome.message);
  }
  return ncclSuccess;
}

}  // namespace

bool inGroup() noexcept {
  return tGroup.depth > 0;
}

void groupStart() noexcept {
  ++tGroup.depth;
}

void enqueueOperation(ncclComm* comm, const Operation& operation) {
  tGroup.operations.emplace_back(comm, operation);
}

void enqueueInit(ncclComm* comm) {
  tGroup.inits.push_back(comm);
}

void forgetComm(ncclComm* comm) noexcept {
  auto& inits = tGroup.inits;
  inits.erase(std::remove(inits.begin(), inits.end(), comm), inits.end());
  auto& operations = tGroup.operations;
  operations.erase(std::remove_if(operations.begin(), operations.end(),
                                  [comm](const auto& entry) { return entry.first == comm; }),
                   operations.end());
}

ncclResult_t connectAll(const std::vector<ncclComm*>& comms) noexcept {
  try {
    const auto outcomes = runEach(comms.size(), [&](std::size_t i) { comms[i]->impl.connect(); });
    for (std::size_t i = 0; i < comms.size(); ++i) {
      if (outcomes[i].code != ncclSuccess) comms[i]->impl.setAsyncError(outcomes[i].code);
    }
    return firstError(outcomes);
  } catch (...) {
    std::string message;
    const ncclResult_t code = currentExceptionResult(message);
    return fail(code, message);
  }
}

ncclResult_t groupEnd() noexcept {
  GroupState& group = tGroup;
  if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd called without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  // Take the queues first, so that the thread's state is clean whatever happens below.
  std::vector<ncclComm*> inits = std::move(group.inits);
  auto operations = std::move(group.operations);
  group.inits.clear();
  group.operations.clear();
  try {
    ncclResult_t result = inits.empty() ? ncclSuccess : connectAll(inits);

    // Operations grouped by communicator, in the order each communicator first appears.
    std::vector<std::pair<ncclComm*, std::vector<Operation>>> perComm;
    for (auto& [comm, operation] : operations) {
      auto it = std::find_if(perComm.begin(), perComm.end(),
                             [comm = comm](const auto& entry) { return entry.first == comm; });
      if (it == perComm.end()) {
        perComm.emplace_back(comm, std::vector<Operation>{});
        it = std::prev(perComm.end());
      }
      it->second.push_back(operation);
    }
    const auto outcomes = runEach(perComm.size(), [&](std::size_t i) {
      auto& comm = perComm[i].first->impl;
      if (comm.asyncError() != ncclSuccess) {
        throw Error(comm.asyncError(), "communicator failed earlier (async error)");
      }
      comm.runGroup(perComm[i].second);
    });
    for (std::size_t i = 0; i < perComm.size(); ++i) {
      if (isFatal(outcomes[i].code)) perComm[i].first->impl.setAsyncError(outcomes[i].code);
    }
    const ncclResult_t opsResult = firstError(outcomes);
    return result != ncclSuccess ? result : opsResult;
  } catch (...) {
    std::string message;
    const ncclResult_t code = currentExceptionResult(message);
    return fail(code, message);
  }
}

}  // namespace standin
