#include "communicator.hpp"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstring>
#include <deque>
#include <map>

#include "datatypes.hpp"
#include "errors.hpp"

namespace metronome::testbed::standin {
namespace {

// Slots of point-to-point messages: a prefix byte of our own (Gloo's collectives use 0x01-0x08
// in the top byte) and a per-peer message number.
constexpr std::uint64_t kPointToPointSlot = 0x5eull << 56;
constexpr std::uint64_t kSlotNumberMask = (1ull << 48) - 1;
constexpr std::uint64_t kExchangeSlot = 0x5full << 56;
// Tag of the barrier of ncclCommFinalize (the barrier of connect() uses tag 0).
constexpr std::uint32_t kFinalizeTag = 0x66696e;  // "fin"

// One TCP device per bind address, shared by all communicators of the process and never
// destroyed (its event-loop thread lives until the process exits).
std::shared_ptr<gloo::transport::Device> SharedDevice(const std::string& address) {
  static auto* mu = new std::mutex;
  static auto* devices = new std::map<std::string, std::shared_ptr<gloo::transport::Device>>;
  std::lock_guard<std::mutex> lock(*mu);
  auto& device = (*devices)[address];
  if (!device) {
    gloo::transport::tcp::attr attr;
    attr.hostname = address;
    device = gloo::transport::tcp::CreateDevice(attr);
  }
  return device;
}

// Gloo's typed setters only use sizeof(T): pick an unsigned type of the element's size.
template <typename Options>
void SetOutputBytes(Options& options, void* ptr, std::size_t count, std::size_t element_size) {
  switch (element_size) {
    case 1:
      options.setOutput(static_cast<std::uint8_t*>(ptr), count);
      break;
    case 2:
      options.setOutput(static_cast<std::uint16_t*>(ptr), count);
      break;
    case 4:
      options.setOutput(static_cast<std::uint32_t*>(ptr), count);
      break;
    default:
      options.setOutput(static_cast<std::uint64_t*>(ptr), count);
      break;
  }
}
template <typename Options>
void SetInputBytes(Options& options, void* ptr, std::size_t count, std::size_t element_size) {
  switch (element_size) {
    case 1:
      options.setInput(static_cast<std::uint8_t*>(ptr), count);
      break;
    case 2:
      options.setInput(static_cast<std::uint16_t*>(ptr), count);
      break;
    case 4:
      options.setInput(static_cast<std::uint32_t*>(ptr), count);
      break;
    default:
      options.setInput(static_cast<std::uint64_t*>(ptr), count);
      break;
  }
}

void CopyIfDistinct(void* dst, const void* src, std::size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

ReduceFn RequireReduceFunction(const Operation& operation) {
  const ReduceFn fn = ReduceFunction(operation.type, operation.op);
  if (fn == nullptr) {
    throw Error(ncclInvalidUsage, std::string("the Gloo stand-in cannot reduce ") +
                                      TypeName(operation.type) + " with " + OpName(operation.op));
  }
  return fn;
}

}  // namespace

const char* Operation::Name() const {
  switch (kind) {
    case Kind::kAllReduce:
      return "ncclAllReduce";
    case Kind::kBroadcast:
      return "ncclBroadcast";
    case Kind::kReduce:
      return "ncclReduce";
    case Kind::kAllGather:
      return "ncclAllGather";
    case Kind::kReduceScatter:
      return "ncclReduceScatter";
    case Kind::kSend:
      return "ncclSend";
    case Kind::kRecv:
      return "ncclRecv";
  }
  return "?";
}

Communicator::Communicator(int nranks, int rank, Rendezvous rendezvous, int device)
    : nranks_(nranks),
      rank_(rank),
      device_(device),
      rendezvous_(std::move(rendezvous)),
      timeout_(OperationTimeout()),
      send_count_(static_cast<std::size_t>(nranks), 0),
      recv_count_(static_cast<std::size_t>(nranks), 0) {}

// Gloo's closeConnections() is a hard close: SO_LINGER 0, so close() resets the connection and
// the kernel drops what it has not sent yet. A blocking send returns once the data is in the
// socket's buffer, not once the peer has it, so a hard close right after the last collective cut
// off the tail of that collective's data on slow links (the peer then waited for it until the
// operation timeout). Destroying the context instead closes each socket normally: the kernel
// sends what it holds, then a FIN, even after this process has exited. (A close still resets
// when unread data is left in the socket; with every operation matched by the peers there is
// none, since an operation completes only after reading all the peer sent for it.)
Communicator::~Communicator() {
  std::lock_guard<std::mutex> lock(mu_);
  reverse_.reset();
  context_.reset();
}

void Communicator::Abort() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (!context_) return;
  try {
    context_->closeConnections();
    if (reverse_) reverse_->closeConnections();
  } catch (...) {
    // Best effort: the peers notice the closed sockets anyway.
  }
  reverse_.reset();
  context_.reset();
}

void Communicator::Finalize() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!context_) throw Error(ncclInvalidUsage, "communicator is not initialized");
  if (nranks_ > 1) {
    // Every rank enters the barrier only after its own operations completed, and an operation
    // completes only once its data has arrived: past the barrier nobody waits for data any more.
    gloo::BarrierOptions barrier(context_);
    barrier.setTag(kFinalizeTag);
    barrier.setTimeout(timeout_);
    gloo::barrier(barrier);
  }
}

void Communicator::Connect() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string address = LocalAddress();
  if (DebugEnabled()) {
    DebugLog("rank " + std::to_string(rank_) + "/" + std::to_string(nranks_) + " connecting via " +
             rendezvous_.Describe() + ", binding " + address);
  }
  auto store = OpenStore(rendezvous_, timeout_);
  auto device = SharedDevice(address);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank_, nranks_);
  context->setTimeout(timeout_);
  context->connectFullMesh(*store, device);
  if (nranks_ == 2) {
    gloo::rendezvous::PrefixStore prefixed("reverse", *store);
    auto reverse = std::make_shared<gloo::rendezvous::Context>(rank_, nranks_);
    reverse->setTimeout(timeout_);
    reverse->connectFullMesh(prefixed, device);
    reverse_ = std::move(reverse);
  }
  if (nranks_ > 1) {
    // Once every rank is connected nobody reads the store any more: rank 0 clears it.
    gloo::BarrierOptions barrier(context);
    barrier.setTimeout(timeout_);
    gloo::barrier(barrier);
  }
  if (rank_ == 0) CleanupStore(rendezvous_, *store);
  context_ = std::move(context);
  connected_ = true;
}

std::uint64_t Communicator::NextSendSlot(int peer) {
  return kPointToPointSlot | (send_count_[static_cast<std::size_t>(peer)]++ & kSlotNumberMask);
}
std::uint64_t Communicator::NextRecvSlot(int peer) {
  return kPointToPointSlot | (recv_count_[static_cast<std::size_t>(peer)]++ & kSlotNumberMask);
}

void Communicator::Run(const Operation& operation) {
  RunGroup({operation});
}

void Communicator::RunGroup(const std::vector<Operation>& operations) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!context_) throw Error(ncclInvalidUsage, "communicator is not initialized");

  // 1. Post every point-to-point operation. Messages to oneself are matched here, in order.
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs;
  std::deque<const Operation*> self_sends;
  std::vector<const Operation*> self_recvs;
  for (const auto& operation : operations) {
    if (!operation.IsPointToPoint() || operation.count == 0) continue;
    const std::size_t bytes = operation.count * TypeSize(operation.type);
    if (operation.root == rank_) {
      (operation.kind == Operation::Kind::kSend ? self_sends.push_back(&operation)
                                                : self_recvs.push_back(&operation));
      continue;
    }
    if (operation.kind == Operation::Kind::kSend) {
      // Gloo only reads a buffer it sends.
      auto buffer = context_->createUnboundBuffer(const_cast<void*>(operation.sendbuff), bytes);
      buffer->send(operation.root, NextSendSlot(operation.root));
      sends.push_back(std::move(buffer));
    } else {
      auto buffer = context_->createUnboundBuffer(operation.recvbuff, bytes);
      buffer->recv(operation.root, NextRecvSlot(operation.root));
      recvs.push_back(std::move(buffer));
    }
  }
  if (self_sends.size() != self_recvs.size()) {
    throw Error(ncclInvalidUsage, "a send to oneself needs a matching receive in the same group");
  }
  for (const Operation* recv : self_recvs) {
    const Operation* send = self_sends.front();
    self_sends.pop_front();
    const std::size_t bytes = recv->count * TypeSize(recv->type);
    if (send->count * TypeSize(send->type) != bytes) {
      throw Error(ncclInvalidUsage, "send to oneself and its receive differ in size");
    }
    CopyIfDistinct(recv->recvbuff, send->sendbuff, bytes);
  }

  // 2. The collectives, in the order they were issued.
  for (const auto& operation : operations) {
    if (!operation.IsPointToPoint()) RunCollective(operation);
  }

  // 3. Wait for the point-to-point transfers.
  for (auto& buffer : sends) {
    if (!buffer->waitSend(timeout_)) throw Error(ncclSystemError, "ncclSend timed out");
  }
  for (auto& buffer : recvs) {
    if (!buffer->waitRecv(timeout_)) throw Error(ncclSystemError, "ncclRecv timed out");
  }
}

std::vector<char> Communicator::Exchange(const void* data, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!context_) throw Error(ncclInvalidUsage, "communicator is not initialized");
  std::vector<char> input(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  std::vector<char> output(bytes * static_cast<std::size_t>(nranks_));
  if (nranks_ == 1) return input;
  gloo::AllgatherOptions options(context_);
  options.setInput(reinterpret_cast<std::uint8_t*>(input.data()), bytes);
  options.setOutput(reinterpret_cast<std::uint8_t*>(output.data()), output.size());
  options.setTimeout(timeout_);
  gloo::allgather(options);
  return output;
}

void Communicator::RunCollective(const Operation& operation) {
  if (operation.count == 0) return;
  switch (operation.kind) {
    case Operation::Kind::kAllReduce:
      return AllReduce(operation);
    case Operation::Kind::kBroadcast:
      return Broadcast(operation);
    case Operation::Kind::kReduce:
      return Reduce(operation);
    case Operation::Kind::kAllGather:
      return AllGather(operation);
    case Operation::Kind::kReduceScatter:
      return ReduceScatter(operation);
    default:
      throw Error(ncclInternalError, "not a collective");
  }
}

void Communicator::AllReduce(const Operation& operation) {
  if (nranks_ == 2 && reverse_) return AllReduceTwoRanks(operation);
  const std::size_t element_size = TypeSize(operation.type);
  const ReduceFn fn = RequireReduceFunction(operation);
  CopyIfDistinct(operation.recvbuff, operation.sendbuff, operation.count * element_size);
  if (nranks_ > 1) {
    gloo::AllreduceOptions options(context_);
    options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    SetOutputBytes(options, operation.recvbuff, operation.count, element_size);
    options.setReduceFunction(fn);
    options.setTimeout(timeout_);
    gloo::allreduce(options);
  }
  if (operation.op == ncclAvg) {
    DivideInPlace(operation.recvbuff, operation.count, operation.type, nranks_);
  }
}

// Two ranks exchange their whole buffers, each direction on its own connection, and reduce
// locally (a op b = b op a for every NCCL op, so both ranks get the same bits). Gloo's ring
// sends both directions on one connection, where each receive-ready notice waits behind the
// data queued before it and the directions end up taking turns (docs/testbed.md). The bytes on
// the wire per direction are the same: the whole buffer.
void Communicator::AllReduceTwoRanks(const Operation& operation) {
  const std::size_t bytes = operation.count * TypeSize(operation.type);
  const ReduceFn fn = RequireReduceFunction(operation);
  if (bytes == 0) return;
  const int peer = 1 - rank_;
  const std::uint64_t slot = kExchangeSlot | (exchanges_++ & kSlotNumberMask);
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  const auto& out = rank_ == 0 ? context_ : reverse_;
  const auto& in = rank_ == 0 ? reverse_ : context_;
  auto recv = in->createUnboundBuffer(scratch_.data(), bytes);
  recv->recv(peer, slot);
  auto send = out->createUnboundBuffer(const_cast<void*>(operation.sendbuff), bytes);
  send->send(peer, slot);
  if (!recv->waitRecv(timeout_)) throw Error(ncclSystemError, "ncclAllReduce timed out");
  if (!send->waitSend(timeout_)) throw Error(ncclSystemError, "ncclAllReduce timed out");
  fn(operation.recvbuff, operation.sendbuff, scratch_.data(), operation.count);
  if (operation.op == ncclAvg) {
    DivideInPlace(operation.recvbuff, operation.count, operation.type, 2);
  }
}

void Communicator::Broadcast(const Operation& operation) {
  const std::size_t element_size = TypeSize(operation.type);
  if (rank_ == operation.root) {
    CopyIfDistinct(operation.recvbuff, operation.sendbuff, operation.count * element_size);
  }
  if (nranks_ == 1) return;
  gloo::BroadcastOptions options(context_);
  options.setRoot(operation.root);
  SetOutputBytes(options, operation.recvbuff, operation.count, element_size);
  options.setTimeout(timeout_);
  gloo::broadcast(options);
}

void Communicator::Reduce(const Operation& operation) {
  const std::size_t element_size = TypeSize(operation.type);
  const std::size_t bytes = operation.count * element_size;
  const ReduceFn fn = RequireReduceFunction(operation);
  // Gloo reduces in place in the output buffer of every rank: non-roots use a scratch copy.
  std::vector<char> scratch;
  void* work = operation.recvbuff;
  if (rank_ != operation.root) {
    scratch.resize(bytes);
    work = scratch.data();
  }
  CopyIfDistinct(work, operation.sendbuff, bytes);
  if (nranks_ > 1) {
    gloo::ReduceOptions options(context_);
    options.setRoot(operation.root);
    SetOutputBytes(options, work, operation.count, element_size);
    options.setReduceFunction(fn);
    options.setTimeout(timeout_);
    gloo::reduce(options);
  }
  if (rank_ == operation.root && operation.op == ncclAvg) {
    DivideInPlace(operation.recvbuff, operation.count, operation.type, nranks_);
  }
}

void Communicator::AllGather(const Operation& operation) {
  const std::size_t element_size = TypeSize(operation.type);
  const std::size_t bytes = operation.count * element_size;
  auto* mine = static_cast<char*>(operation.recvbuff) + static_cast<std::size_t>(rank_) * bytes;
  if (nranks_ == 1) {
    CopyIfDistinct(mine, operation.sendbuff, bytes);
    return;
  }
  // Gloo copies the input into the output itself; in place (NCCL allows sendbuff to be this
  // rank's slice of recvbuff) it gets a copy, as overlapping copies are not allowed.
  std::vector<char> input(static_cast<const char*>(operation.sendbuff),
                          static_cast<const char*>(operation.sendbuff) + bytes);
  gloo::AllgatherOptions options(context_);
  SetInputBytes(options, input.data(), operation.count, element_size);
  SetOutputBytes(options, operation.recvbuff, operation.count * static_cast<std::size_t>(nranks_),
                 element_size);
  options.setTimeout(timeout_);
  gloo::allgather(options);
}

void Communicator::ReduceScatter(const Operation& operation) {
  // Gloo has no reduce-scatter with the new API: all-reduce a copy, keep this rank's block.
  // (Twice the traffic of a ring reduce-scatter; the trainer does not use it.)
  const std::size_t element_size = TypeSize(operation.type);
  const std::size_t block_bytes = operation.count * element_size;
  const std::size_t total = operation.count * static_cast<std::size_t>(nranks_);
  const ReduceFn fn = RequireReduceFunction(operation);
  std::vector<char> work(static_cast<const char*>(operation.sendbuff),
                         static_cast<const char*>(operation.sendbuff) + total * element_size);
  if (nranks_ > 1) {
    gloo::AllreduceOptions options(context_);
    options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    SetOutputBytes(options, work.data(), total, element_size);
    options.setReduceFunction(fn);
    options.setTimeout(timeout_);
    gloo::allreduce(options);
  }
  std::memcpy(operation.recvbuff, work.data() + static_cast<std::size_t>(rank_) * block_bytes,
              block_bytes);
  if (operation.op == ncclAvg) {
    DivideInPlace(operation.recvbuff, operation.count, operation.type, nranks_);
  }
}

}  // namespace metronome::testbed::standin
