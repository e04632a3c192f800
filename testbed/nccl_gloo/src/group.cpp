#include "group.hpp"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "errors.hpp"

namespace metronome::testbed::standin {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<ncclComm*> inits;
  std::vector<std::pair<ncclComm*, Operation>> operations;
};

thread_local GroupState t_group;

// Should an error of this kind break the communicator for good?
bool IsFatal(ncclResult_t code) {
  return code == ncclSystemError || code == ncclInternalError || code == ncclRemoteError;
}

struct Outcome {
  ncclResult_t code = ncclSuccess;
  std::string message;
};

// Runs fn(i) for i in [0, n), concurrently when n > 1, collecting each outcome.
template <typename Fn>
std::vector<Outcome> RunEach(std::size_t n, Fn fn) {
  std::vector<Outcome> outcomes(n);
  auto guarded = [&](std::size_t i) {
    try {
      fn(i);
    } catch (...) {
      outcomes[i].code = CurrentExceptionResult(outcomes[i].message);
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

ncclResult_t FirstError(const std::vector<Outcome>& outcomes) {
  for (const auto& outcome : outcomes) {
    if (outcome.code != ncclSuccess) return Fail(outcome.code, outcome.message);
  }
  return ncclSuccess;
}

}  // namespace

bool InGroup() noexcept {
  return t_group.depth > 0;
}

void GroupStart() noexcept {
  ++t_group.depth;
}

void EnqueueOperation(ncclComm* comm, const Operation& operation) {
  t_group.operations.emplace_back(comm, operation);
}

void EnqueueInit(ncclComm* comm) {
  t_group.inits.push_back(comm);
}

void ForgetComm(ncclComm* comm) noexcept {
  auto& inits = t_group.inits;
  inits.erase(std::remove(inits.begin(), inits.end(), comm), inits.end());
  auto& operations = t_group.operations;
  operations.erase(std::remove_if(operations.begin(), operations.end(),
                                  [comm](const auto& entry) { return entry.first == comm; }),
                   operations.end());
}

ncclResult_t ConnectAll(const std::vector<ncclComm*>& comms) noexcept {
  try {
    const auto outcomes = RunEach(comms.size(), [&](std::size_t i) { comms[i]->impl.Connect(); });
    for (std::size_t i = 0; i < comms.size(); ++i) {
      if (outcomes[i].code != ncclSuccess) comms[i]->impl.SetAsyncError(outcomes[i].code);
    }
    return FirstError(outcomes);
  } catch (...) {
    std::string message;
    const ncclResult_t code = CurrentExceptionResult(message);
    return Fail(code, message);
  }
}

ncclResult_t GroupEnd() noexcept {
  GroupState& group = t_group;
  if (group.depth == 0) return Fail(ncclInvalidUsage, "ncclGroupEnd called without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  // Take the queues first, so that the thread's state is clean whatever happens below.
  std::vector<ncclComm*> inits = std::move(group.inits);
  auto operations = std::move(group.operations);
  group.inits.clear();
  group.operations.clear();
  try {
    ncclResult_t result = inits.empty() ? ncclSuccess : ConnectAll(inits);

    // Operations grouped by communicator, in the order each communicator first appears.
    std::vector<std::pair<ncclComm*, std::vector<Operation>>> per_comm;
    for (auto& [comm, operation] : operations) {
      auto it = std::find_if(per_comm.begin(), per_comm.end(),
                             [comm = comm](const auto& entry) { return entry.first == comm; });
      if (it == per_comm.end()) {
        per_comm.emplace_back(comm, std::vector<Operation>{});
        it = std::prev(per_comm.end());
      }
      it->second.push_back(operation);
    }
    const auto outcomes = RunEach(per_comm.size(), [&](std::size_t i) {
      auto& comm = per_comm[i].first->impl;
      if (comm.AsyncError() != ncclSuccess) {
        throw Error(comm.AsyncError(), "communicator failed earlier (async error)");
      }
      comm.RunGroup(per_comm[i].second);
    });
    for (std::size_t i = 0; i < per_comm.size(); ++i) {
      if (IsFatal(outcomes[i].code)) per_comm[i].first->impl.SetAsyncError(outcomes[i].code);
    }
    const ncclResult_t ops_result = FirstError(outcomes);
    return result != ncclSuccess ? result : ops_result;
  } catch (...) {
    std::string message;
    const ncclResult_t code = CurrentExceptionResult(message);
    return Fail(code, message);
  }
}

}  // namespace metronome::testbed::standin
