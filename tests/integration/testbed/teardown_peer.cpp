// One rank of a 2-rank job on the Gloo stand-in, for teardown_test.cpp. The ranks are separate
// processes that meet through an id file (rank 0 writes "<pid> <ncclUniqueId as hex>").
//
//   teardown_peer tail RANK IDFILE ITERATIONS FINALIZE(0|1)
//     DDP-like iterations (all-reduces of 1 MiB and 3 MiB); rank 1 starts each one a random
//     0-300 ms late (as a gate would). Then rank 0 sends 32 MiB that rank 1 receives 100 ms
//     late; then [ncclCommFinalize,] ncclCommDestroy and exit at once. Every result is checked.
//   teardown_peer die RANK IDFILE
//     Rank 0 sends 128 MiB; rank 1 receives it and, once the first bytes have landed, kills
//     rank 0 (SIGKILL). Rank 1 must then fail, and soon: it prints the seconds it took.
//
// Exit status 0 when the rank saw what it expected; messages on stderr.
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::string Hex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string text;
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    const auto byte = static_cast<unsigned char>(id.internal[i]);
    text += digits[byte >> 4];
    text += digits[byte & 15];
  }
  return text;
}

bool Unhex(const std::string& text, ncclUniqueId& id) {
  if (text.size() != 2 * sizeof(id.internal)) return false;
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

int Fail(int rank, const std::string& what, ncclResult_t rc = ncclSuccess) {
  std::fprintf(stderr, "rank %d: %s%s%s\n", rank, what.c_str(), rc != ncclSuccess ? ": " : "",
               rc != ncclSuccess ? ncclGetLastError(nullptr) : "");
  return 1;
}

// Meets the other rank; returns the communicator (nullptr on failure) and rank 0's pid.
ncclComm_t Join(int rank, const std::string& id_file, pid_t& peer_pid) {
  ncclUniqueId id{};
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return nullptr;
    const std::string tmp = id_file + ".tmp";
    std::ofstream(tmp) << ::getpid() << ' ' << Hex(id) << '\n';
    std::rename(tmp.c_str(), id_file.c_str());
  } else {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (;;) {
      std::ifstream in(id_file);
      std::string text;
      if (in >> peer_pid >> text && Unhex(text, id)) break;
      if (Clock::now() > deadline) return nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return nullptr;
  return comm;
}

int Tail(int rank, ncclComm_t comm, int iterations, bool finalize) {
  std::mt19937 rng(1234u + static_cast<unsigned>(rank));
  std::uniform_int_distribution<int> late_ms(0, 300);
  const std::vector<std::size_t> buckets = {(1u << 20) / 4, (3u << 20) / 4};  // floats
  std::vector<float> data(buckets.back());
  for (int it = 0; it < iterations; ++it) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms(rng)));
    for (const std::size_t count : buckets) {
      for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1 + it);
      const ncclResult_t rc =
          ncclAllReduce(data.data(), data.data(), count, ncclFloat32, ncclSum, comm, nullptr);
      if (rc != ncclSuccess) return Fail(rank, "ncclAllReduce", rc);
      const auto expected = static_cast<float>(3 + 2 * it);
      if (data[0] != expected || data[count - 1] != expected) {
        return Fail(rank, "wrong all-reduce result in iteration " + std::to_string(it));
      }
    }
  }
  std::vector<unsigned char> block(32u << 20);
  if (rank == 0) {
    for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<unsigned char>(i * 7);
    const ncclResult_t rc = ncclSend(block.data(), block.size(), ncclUint8, 1, comm, nullptr);
    if (rc != ncclSuccess) return Fail(rank, "ncclSend", rc);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const ncclResult_t rc = ncclRecv(block.data(), block.size(), ncclUint8, 0, comm, nullptr);
    if (rc != ncclSuccess) return Fail(rank, "ncclRecv", rc);
    for (std::size_t i = 0; i < block.size(); ++i) {
      if (block[i] != static_cast<unsigned char>(i * 7)) {
        return Fail(rank, "wrong byte " + std::to_string(i) + " received");
      }
    }
  }
  if (finalize) {
    const ncclResult_t rc = ncclCommFinalize(comm);
    if (rc != ncclSuccess) return Fail(rank, "ncclCommFinalize", rc);
  }
  const ncclResult_t rc = ncclCommDestroy(comm);
  if (rc != ncclSuccess) return Fail(rank, "ncclCommDestroy", rc);
  return 0;
}

int Die(int rank, ncclComm_t comm, pid_t peer_pid) {
  const std::size_t bytes = 128u << 20;
  std::vector<unsigned char> block(bytes, rank == 0 ? 0x5a : 0);
  if (rank == 0) {
    ncclSend(block.data(), bytes, ncclUint8, 1, comm, nullptr);
    std::this_thread::sleep_for(std::chrono::seconds(30));  // killed before this ends
    return Fail(rank, "was not killed");
  }
  // Watch the first byte land, then kill the sender (the receive is mid-way by then).
  Clock::time_point killed_at;
  std::thread killer([&] {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    const volatile unsigned char* first = block.data();
    while (*first == 0 && Clock::now() < deadline) std::this_thread::yield();
    killed_at = Clock::now();
    ::kill(peer_pid, SIGKILL);
  });
  const ncclResult_t rc = ncclRecv(block.data(), bytes, ncclUint8, 0, comm, nullptr);
  const auto end = Clock::now();
  killer.join();
  if (rc == ncclSuccess) return Fail(rank, "the receive succeeded although the sender died");
  const double seconds = std::chrono::duration<double>(end - killed_at).count();
  std::printf("failed %.3f s after the peer died: %s\n", seconds, ncclGetLastError(nullptr));
  ncclCommAbort(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s tail|die RANK IDFILE [ITERATIONS FINALIZE]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int rank = std::atoi(argv[2]);
  pid_t peer_pid = 0;
  ncclComm_t comm = Join(rank, argv[3], peer_pid);
  if (comm == nullptr) return Fail(rank, "cannot join the job");
  if (mode == "tail" && argc == 6) {
    return Tail(rank, comm, std::atoi(argv[4]), std::atoi(argv[5]) != 0);
  }
  if (mode == "die") return Die(rank, comm, peer_pid);
  return Fail(rank, "bad arguments");
}
