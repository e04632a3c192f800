#include "rendezvous.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace metronome::testbed::trainer {
namespace {

using Clock = std::chrono::steady_clock;

struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo(const std::string& host, int port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
    if (rc != 0 || list == nullptr) {
      throw std::runtime_error("cannot resolve " + host + ": " + ::gai_strerror(rc));
    }
  }
  ~AddrInfo() { ::freeaddrinfo(list); }
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
};

bool SendAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool RecvAll(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

IdExchange IdExchange::Parse(const std::string& rendezvous, const std::string& id_file,
                             const std::string& job) {
  IdExchange exchange;
  if (!id_file.empty()) {
    exchange.kind = Kind::kFile;
    exchange.path = id_file;
    return exchange;
  }
  if (rendezvous.empty()) {
    throw std::invalid_argument(
        "a job with several ranks needs --rendezvous DIR|HOST:PORT or --id-file");
  }
  const auto colon = rendezvous.rfind(':');
  const bool looks_tcp = rendezvous.find('/') == std::string::npos && colon != std::string::npos &&
                         colon + 1 < rendezvous.size() &&
                         rendezvous.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  if (looks_tcp) {
    exchange.kind = Kind::kTcp;
    exchange.host = rendezvous.substr(0, colon);
    if (exchange.host.size() >= 2 && exchange.host.front() == '[') {
      exchange.host = exchange.host.substr(1, exchange.host.size() - 2);
    }
    exchange.port = std::stoi(rendezvous.substr(colon + 1));
    if (exchange.port <= 0 || exchange.port > 65535) {
      throw std::invalid_argument("bad port in --rendezvous " + rendezvous);
    }
    return exchange;
  }
  exchange.kind = Kind::kFile;
  exchange.path = (std::filesystem::path(rendezvous) / (job + ".ncclid")).string();
  return exchange;
}

std::string IdExchange::Describe() const {
  return kind == Kind::kFile ? "file " + path : "tcp " + host + ":" + std::to_string(port);
}

void PublishId(const IdExchange& exchange, const ncclUniqueId& id, int world_size,
               std::chrono::milliseconds timeout) {
  if (exchange.kind == IdExchange::Kind::kFile) {
    const std::filesystem::path path(exchange.path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof(id.internal));
      if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path);  // atomic: readers see all 128 bytes or nothing
    return;
  }
  AddrInfo addr(exchange.host, exchange.port, true);
  const int listener = ::socket(addr.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listener, addr.list->ai_addr, addr.list->ai_addrlen) != 0 ||
      ::listen(listener, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::close(listener);
    throw std::runtime_error("cannot listen on " + exchange.Describe() + ": " + why);
  }
  const auto deadline = Clock::now() + timeout;
  int served = 0;
  while (served < world_size - 1) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      ::close(listener);
      throw std::runtime_error("timed out: only " + std::to_string(served) + " of " +
                               std::to_string(world_size - 1) + " ranks fetched the id from " +
                               exchange.Describe());
    }
    pollfd pfd{listener, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(std::min<long>(left.count(), 1000))) <= 0) continue;
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (SendAll(fd, id.internal, sizeof(id.internal))) ++served;
    ::close(fd);
  }
  ::close(listener);
}

ncclUniqueId FetchId(const IdExchange& exchange, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ncclUniqueId id;
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    if (exchange.kind == IdExchange::Kind::kFile) {
      std::ifstream in(exchange.path, std::ios::binary);
      if (in && in.read(id.internal, sizeof(id.internal))) return id;
    } else {
      AddrInfo addr(exchange.host, exchange.port, false);
      const int fd = ::socket(addr.list->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0) {
        const bool ok = ::connect(fd, addr.list->ai_addr, addr.list->ai_addrlen) == 0 &&
                        RecvAll(fd, id.internal, sizeof(id.internal));
        ::close(fd);
        if (ok) return id;
      }
    }
    if (Clock::now() + pause > deadline) {
      throw std::runtime_error("timed out waiting for the unique id (" + exchange.Describe() +
                               "): is rank 0 running?");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

void RetireId(const IdExchange& exchange) noexcept {
  if (exchange.kind != IdExchange::Kind::kFile) return;
  std::error_code error;
  std::filesystem::remove(exchange.path, error);
}

}  // namespace metronome::testbed::trainer
