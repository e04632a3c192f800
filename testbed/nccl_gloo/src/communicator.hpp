// One rank's communicator: a Gloo context (full mesh of TCP pairs) plus the NCCL operations on
// host buffers. Operations are blocking and run under the communicator's lock; errors are thrown
// (metronome::testbed::standin::Error, or Gloo's exceptions) and turned into result codes in
// api.cpp.
#pragma once

#include <nccl.h>

#include <gloo/context.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rendezvous.hpp"

namespace metronome::testbed::standin {

// One NCCL operation with its arguments, as given by the caller (already validated).
struct Operation {
  enum class Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kSend, kRecv };
  Kind kind = Kind::kAllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  std::size_t count = 0;  // as in the NCCL call (per rank for all-gather / reduce-scatter)
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;  // root, or peer for send/recv

  bool IsPointToPoint() const { return kind == Kind::kSend || kind == Kind::kRecv; }
  const char* Name() const;
};

class Communicator {
 public:
  Communicator(int nranks, int rank, Rendezvous rendezvous, int device);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Meets the other ranks and connects the full mesh; blocking. Throws.
  void Connect();

  // ncclCommFinalize: a barrier of all ranks, so that when it returns every peer has finished
  // every operation, i.e. has received all this rank sent. (The stand-in does not refuse
  // operations after it; each call is a barrier.) Throws.
  void Finalize();

  // ncclCommAbort: resets the connections at once (peers see the reset), dropping unsent data.
  // The destructor instead closes them gracefully: data already handed to the kernel still
  // reaches the peers after this process is gone.
  void Abort() noexcept;

  int Size() const { return nranks_; }
  int Rank() const { return rank_; }
  int Device() const { return device_; }
  bool Connected() const { return connected_.load(); }

  // The first error that broke this communicator (ncclSuccess while healthy).
  ncclResult_t AsyncError() const { return async_error_.load(); }
  void SetAsyncError(ncclResult_t error) {
    ncclResult_t expected = ncclSuccess;
    async_error_.compare_exchange_strong(expected, error);
  }

  // Runs one operation to completion.
  void Run(const Operation& operation);
  // Runs the operations of one group: point-to-point operations are all posted first (so that a
  // group of sends and receives cannot deadlock), then the collectives run in order, then the
  // point-to-point operations are awaited.
  void RunGroup(const std::vector<Operation>& operations);

  // Every rank's `bytes` bytes, in rank order (an all-gather of raw bytes). Throws.
  std::vector<char> Exchange(const void* data, std::size_t bytes);

  // The rendezvous this communicator was made from.
  const Rendezvous& GetRendezvous() const { return rendezvous_; }

 private:
  void RunCollective(const Operation& operation);
  void AllReduce(const Operation& operation);
  void AllReduceTwoRanks(const Operation& operation);
  void Broadcast(const Operation& operation);
  void Reduce(const Operation& operation);
  void AllGather(const Operation& operation);
  void ReduceScatter(const Operation& operation);
  std::uint64_t NextSendSlot(int peer);
  std::uint64_t NextRecvSlot(int peer);

  const int nranks_;
  const int rank_;
  const int device_;
  const Rendezvous rendezvous_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::shared_ptr<gloo::Context> context_;
  // Two ranks: a second connection, so that each direction of an all-reduce's data has a TCP
  // stream of its own (rank 0 sends on context_, rank 1 on reverse_), and scratch for the peer's
  // buffer.
  std::shared_ptr<gloo::Context> reverse_;
  std::vector<char> scratch_;
  std::uint64_t exchanges_ = 0;
  std::atomic<bool> connected_{false};
  std::atomic<ncclResult_t> async_error_{ncclSuccess};
  std::vector<std::uint64_t> send_count_;  // point-to-point messages sent to / received from
  std::vector<std::uint64_t> recv_count_;  // each peer: they number the Gloo slots
};

}  // namespace metronome::testbed::standin

// The opaque handle of nccl.h (ncclComm_t is struct ncclComm*).
struct ncclComm {
  static constexpr std::uint64_t kMagic = 0x6d74726e676c6f6full;  // "mtrngloo"
  ncclComm(int nranks, int rank, metronome::testbed::standin::Rendezvous rendezvous, int device)
      : impl(nranks, rank, std::move(rendezvous), device) {}
  std::uint64_t magic = kMagic;
  metronome::testbed::standin::Communicator impl;
};
