// The rendezvous behind an ncclUniqueId: where the ranks of one communicator meet to exchange
// their Gloo addresses.
//
// The 128-byte id holds a NUL-terminated ASCII string, readable in a hex dump:
//   "mtrn-gloo1;<16 hex digits nonce>;tcp://HOST:PORT"   a TcpStoreServer (IPv6: [HOST]:PORT)
//   "mtrn-gloo1;<16 hex digits nonce>;file://DIR"        a Gloo FileStore in DIR/<nonce>/
// The nonce keeps communicators apart when they share a store.
//
// ncclGetUniqueId chooses by METRONOME_STANDIN_RENDEZVOUS:
//   unset, "" or "tcp"   a store served by this process on the local address, ephemeral port
//   "tcp:HOST:PORT"      a store served by this process on HOST:PORT (PORT 0: ephemeral)
//   "file:DIR" or "/DIR" a directory every rank can reach (shared file system)
// The local address is METRONOME_STANDIN_IFACE_ADDR when set, else this host name's first IPv4
// address, else 127.0.0.1. Gloo's TCP device binds to the same address.
#pragma once

#include <nccl.h>

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace metronome::testbed::standin {

struct Rendezvous {
  enum class Kind { kTcp, kFile };
  Kind kind = Kind::kTcp;
  std::string nonce;  // 16 hex digits
  std::string host;   // kTcp
  std::uint16_t port = 0;
  std::string directory;  // kFile

  std::string Describe() const;  // "tcp://HOST:PORT" or "file://DIR"
};

inline constexpr const char* kIdMagic = "mtrn-gloo1";

// Throws metronome::testbed::standin::Error(ncclInvalidArgument) when the rendezvous does not fit
// in an id.
ncclUniqueId EncodeId(const Rendezvous& rendezvous);
// std::nullopt when the id was not made by this library (or is corrupt).
std::optional<Rendezvous> DecodeId(const ncclUniqueId& id);

// A new rendezvous as chosen by the environment; starts the TCP store when needed. Throws.
Rendezvous NewRendezvous();

// Opens the store of a rendezvous (connects, or creates the directory). Throws.
std::unique_ptr<gloo::rendezvous::Store> OpenStore(const Rendezvous& rendezvous,
                                                   std::chrono::milliseconds timeout);
// Removes the rendezvous' keys once every rank is connected (best effort, never throws).
void CleanupStore(const Rendezvous& rendezvous, gloo::rendezvous::Store& store) noexcept;

// The address this process binds to (see above).
std::string LocalAddress();

// METRONOME_STANDIN_TIMEOUT_S (default 300 s): bound on rendezvous and on every operation.
std::chrono::milliseconds OperationTimeout();

}  // namespace metronome::testbed::standin
