#include "tcp_store.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <thread>

#include "errors.hpp"

namespace metronome::testbed::standin {
namespace {

constexpr std::uint8_t kSet = 1;
constexpr std::uint8_t kGet = 2;
constexpr std::uint8_t kDeletePrefix = 3;
constexpr std::uint8_t kOk = 0;
constexpr std::uint8_t kTimedOut = 1;
constexpr std::uint32_t kMaxKeyBytes = 4096;
constexpr std::uint64_t kMaxValueBytes = 64ull << 20;

std::string ErrnoText(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Full reads and writes; false on EOF or error.
bool ReadAll(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

template <typename T>
void AppendLe(std::vector<char>& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xffu));
  }
}

template <typename T>
bool ReadLe(int fd, T& value) {
  unsigned char bytes[sizeof(T)];
  if (!ReadAll(fd, bytes, sizeof(T))) return false;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  value = static_cast<T>(v);
  return true;
}

struct Addr {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

Addr Resolve(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    throw Error(ncclSystemError, "cannot resolve rendezvous host '" + host +
                                     "': " + std::string(::gai_strerror(rc)));
  }
  Addr addr;
  std::memcpy(&addr.storage, result->ai_addr, result->ai_addrlen);
  addr.length = result->ai_addrlen;
  ::freeaddrinfo(result);
  return addr;
}

class Server final : public TcpStoreServer {
 public:
  Server(const std::string& host, std::uint16_t port) : host_(host) {
    const Addr addr = Resolve(host, port);
    listen_fd_ = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw Error(ncclSystemError, ErrnoText("rendezvous store: socket"));
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      const std::string message =
          ErrnoText("rendezvous store: cannot listen on " + host + ":" + std::to_string(port));
      ::close(listen_fd_);
      throw Error(ncclSystemError, message);
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    // The server lives as long as the process: its threads are never joined.
    std::thread([this] { AcceptLoop(); }).detach();
  }

  const std::string& Host() const override { return host_; }
  std::uint16_t Port() const override { return port_; }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
          if (errno == EMFILE || errno == ENFILE) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          continue;
        }
        WarnOnce("store-accept", ErrnoText("rendezvous store: accept failed, store stops"));
        return;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      try {
        std::thread([this, fd] { Serve(fd); }).detach();
      } catch (...) {
        ::close(fd);
      }
    }
  }

  void Serve(int fd) {
    try {
      while (HandleOne(fd)) {
      }
    } catch (...) {
      // A client that misbehaves loses its connection; the server carries on.
    }
    ::close(fd);
  }

  bool Reply(int fd, std::uint8_t status, const std::vector<char>& data) {
    std::vector<char> out;
    out.reserve(9 + data.size());
    out.push_back(static_cast<char>(status));
    AppendLe<std::uint64_t>(out, data.size());
    out.insert(out.end(), data.begin(), data.end());
    return WriteAll(fd, out.data(), out.size());
  }

  bool HandleOne(int fd) {
    std::uint8_t op = 0;
    std::uint32_t key_length = 0;
    std::uint64_t argument = 0;
    if (!ReadLe(fd, op) || !ReadLe(fd, key_length) || key_length > kMaxKeyBytes) return false;
    std::string key(key_length, '\0');
    if (!ReadAll(fd, key.data(), key_length) || !ReadLe(fd, argument)) return false;
    switch (op) {
      case kSet: {
        if (argument > kMaxValueBytes) return false;
        std::vector<char> value(argument);
        if (!ReadAll(fd, value.data(), value.size())) return false;
        {
          std::lock_guard<std::mutex> lock(mu_);
          data_[key] = std::move(value);
        }
        cv_.notify_all();
        return Reply(fd, kOk, {});
      }
      case kGet: {
        std::unique_lock<std::mutex> lock(mu_);
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(argument);
        const bool found = cv_.wait_until(lock, deadline, [&] { return data_.count(key) != 0; });
        std::vector<char> value = found ? data_[key] : std::vector<char>{};
        lock.unlock();
        return Reply(fd, found ? kOk : kTimedOut, value);
      }
      case kDeletePrefix: {
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (auto it = data_.lower_bound(key); it != data_.end() && it->first.starts_with(key);) {
            it = data_.erase(it);
          }
        }
        return Reply(fd, kOk, {});
      }
      default:
        return false;
    }
  }

  std::string host_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> data_;
};

}  // namespace

std::shared_ptr<TcpStoreServer> TcpStoreServer::Obtain(const std::string& host,
                                                       std::uint16_t port) {
  // Never destroyed: servers (and their detached threads) live until the process exits.
  static auto* mu = new std::mutex;
  static auto* servers = new std::map<std::string, std::shared_ptr<TcpStoreServer>>;
  std::lock_guard<std::mutex> lock(*mu);
  if (port == 0) {
    for (const auto& [key, server] : *servers) {
      if (server->Host() == host) return server;
    }
  } else if (auto it = servers->find(host + ":" + std::to_string(port)); it != servers->end()) {
    return it->second;
  }
  auto server = std::make_shared<Server>(host, port);
  (*servers)[host + ":" + std::to_string(server->Port())] = server;
  return server;
}

TcpStoreClient::TcpStoreClient(const std::string& host, std::uint16_t port, std::string prefix,
                               std::chrono::milliseconds timeout)
    : endpoint_(host + ":" + std::to_string(port)), prefix_(std::move(prefix)), timeout_(timeout) {
  const Addr addr = Resolve(host, port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    fd_ = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw Error(ncclSystemError, ErrnoText("rendezvous store client: socket"));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length) == 0) break;
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    if (std::chrono::steady_clock::now() + pause > deadline) {
      throw Error(ncclSystemError,
                  "cannot connect to the rendezvous store at " + endpoint_ + ": " + why);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<char> TcpStoreClient::Request(std::uint8_t op, const std::string& key,
                                          std::uint64_t argument, const std::vector<char>* value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) throw Error(ncclSystemError, "rendezvous store connection is closed");
  std::vector<char> out;
  out.push_back(static_cast<char>(op));
  AppendLe<std::uint32_t>(out, static_cast<std::uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  AppendLe<std::uint64_t>(out, argument);
  if (value != nullptr) out.insert(out.end(), value->begin(), value->end());
  std::uint8_t status = 0;
  std::uint64_t length = 0;
  if (!WriteAll(fd_, out.data(), out.size()) || !ReadLe(fd_, status) || !ReadLe(fd_, length) ||
      length > kMaxValueBytes) {
    ::close(fd_);
    fd_ = -1;
    throw Error(ncclSystemError, "lost the connection to the rendezvous store at " + endpoint_);
  }
  std::vector<char> reply(length);
  if (!ReadAll(fd_, reply.data(), reply.size())) {
    ::close(fd_);
    fd_ = -1;
    throw Error(ncclSystemError, "lost the connection to the rendezvous store at " + endpoint_);
  }
  if (status == kTimedOut) {
    throw Error(ncclSystemError, "timed out after " + std::to_string(argument) +
                                     " ms waiting for the other ranks at the rendezvous store " +
                                     endpoint_ + " (key " + key + ")");
  }
  if (status != kOk) throw Error(ncclInternalError, "rendezvous store error at " + endpoint_);
  return reply;
}

void TcpStoreClient::set(const std::string& key, const std::vector<char>& data) {
  if (key.size() + prefix_.size() + 1 > kMaxKeyBytes || data.size() > kMaxValueBytes) {
    throw Error(ncclInternalError, "rendezvous store: key or value too large");
  }
  Request(kSet, prefix_ + "/" + key, data.size(), &data);
}

std::vector<char> TcpStoreClient::get(const std::string& key) {
  return Request(kGet, prefix_ + "/" + key, static_cast<std::uint64_t>(timeout_.count()), nullptr);
}

void TcpStoreClient::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void TcpStoreClient::wait(const std::vector<std::string>& keys,
                          const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    Request(kGet, prefix_ + "/" + key, static_cast<std::uint64_t>(std::max<long>(left.count(), 0)),
            nullptr);
  }
}

void TcpStoreClient::DeleteAll() {
  Request(kDeletePrefix, prefix_ + "/", 0, nullptr);
}

}  // namespace metronome::testbed::standin
