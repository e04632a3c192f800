// A small key-value store over TCP for the rendezvous of Gloo contexts (Gloo's Debian build has
// FileStore and RedisStore, no TCP store). The process that calls ncclGetUniqueId serves it, as
// NCCL's bootstrap root does; every rank connects as a client while its communicator is created.
//
// Wire format (little-endian integers), one request and one reply at a time per connection:
//   request: u8 op | u32 key length | key | u64 argument | [argument bytes of value, for kSet]
//   reply:   u8 status | u64 length | bytes
// Ops: kSet (argument = value length), kGet (argument = timeout in ms; blocks until the key
// exists), kDeletePrefix (removes every key that starts with the given key).
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace metronome::testbed::standin {

class TcpStoreServer {
 public:
  // Serves on host:port (port 0: an ephemeral port). One server per distinct host is shared by the
  // whole process and lives until it exits. Throws metronome::testbed::standin::Error when it
  // cannot listen.
  static std::shared_ptr<TcpStoreServer> Obtain(const std::string& host, std::uint16_t port);

  virtual ~TcpStoreServer() = default;
  virtual const std::string& Host() const = 0;
  virtual std::uint16_t Port() const = 0;
};

// Gloo's Store interface over a connection to a TcpStoreServer. Every key is prefixed with
// `prefix` + "/", so that communicators sharing a server do not see each other's keys.
class TcpStoreClient : public gloo::rendezvous::Store {
 public:
  // Connects (retrying until `timeout`); throws metronome::testbed::standin::Error on failure.
  TcpStoreClient(const std::string& host, std::uint16_t port, std::string prefix,
                 std::chrono::milliseconds timeout);
  ~TcpStoreClient() override;
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Removes every key of this client's prefix from the server.
  void DeleteAll();

 private:
  std::vector<char> Request(std::uint8_t op, const std::string& key, std::uint64_t argument,
                            const std::vector<char>* value);

  std::string endpoint_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  int fd_ = -1;
};

}  // namespace metronome::testbed::standin
