// Out-of-band exchange of the ncclUniqueId between the ranks of a job, independent of the NCCL
// implementation: rank 0 calls ncclGetUniqueId and publishes the 128 bytes, the others fetch them.
//   file  an id file (written atomically by rank 0; the others wait for it). --rendezvous DIR
//         uses DIR/<job>.ncclid; --id-file FILE names it. A stale file from an earlier run would
//         be read: give every run a fresh directory or job name (rank 0 removes it after init).
//   tcp   --rendezvous HOST:PORT: rank 0 listens there and hands the id to world_size-1 peers.
#pragma once

#include <nccl.h>

#include <chrono>
#include <string>

namespace metronome::testbed::trainer {

struct IdExchange {
  enum class Kind { kFile, kTcp };
  Kind kind = Kind::kFile;
  std::string path;  // kFile
  std::string host;  // kTcp
  int port = 0;

  // From --rendezvous / --id-file; throws std::invalid_argument when neither is usable.
  static IdExchange Parse(const std::string& rendezvous, const std::string& id_file,
                          const std::string& job);
  std::string Describe() const;
};

// Rank 0: publishes `id` (for tcp: blocks until world_size - 1 peers took it). Throws.
void PublishId(const IdExchange& exchange, const ncclUniqueId& id, int world_size,
               std::chrono::milliseconds timeout);
// Other ranks: waits for the id. Throws std::runtime_error on timeout.
ncclUniqueId FetchId(const IdExchange& exchange, std::chrono::milliseconds timeout);
// Rank 0, once every rank has initialized: removes the id file.
void RetireId(const IdExchange& exchange) noexcept;

}  // namespace metronome::testbed::trainer
