#include "rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/rendezvous/file_store.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "errors.hpp"
#include "tcp_store.hpp"

namespace metronome::testbed::standin {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

std::string NewNonce() {
  std::random_device device;
  std::uint64_t value = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  value ^= static_cast<std::uint64_t>(::getpid()) << 16;
  value ^= static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// "HOST:PORT" or "[HOST]:PORT" into host and port; false when malformed.
bool SplitHostPort(const std::string& text, std::string& host, std::uint16_t& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string digits = text.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 5) {
    return false;
  }
  const unsigned long value = std::stoul(digits);
  if (value > 65535) return false;
  port = static_cast<std::uint16_t>(value);
  return !host.empty();
}

std::string FormatHostPort(const std::string& host, std::uint16_t port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

std::string Rendezvous::Describe() const {
  return kind == Kind::kTcp ? "tcp://" + FormatHostPort(host, port) : "file://" + directory;
}

ncclUniqueId EncodeId(const Rendezvous& rendezvous) {
  const std::string text =
      std::string(kIdMagic) + ";" + rendezvous.nonce + ";" + rendezvous.Describe();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (text.size() >= sizeof(id.internal)) {
    throw Error(ncclInvalidArgument, "rendezvous '" + rendezvous.Describe() +
                                         "' is too long for an ncclUniqueId (at most " +
                                         std::to_string(sizeof(id.internal) - 30) +
                                         " characters of path)");
  }
  std::memcpy(id.internal, text.data(), text.size());
  return id;
}

std::optional<Rendezvous> DecodeId(const ncclUniqueId& id) {
  const char* begin = id.internal;
  const auto* end = static_cast<const char*>(std::memchr(begin, '\0', sizeof(id.internal)));
  if (end == nullptr) return std::nullopt;
  const std::string text(begin, end);
  const std::string magic = std::string(kIdMagic) + ";";
  if (!text.starts_with(magic)) return std::nullopt;
  const auto second = text.find(';', magic.size());
  if (second == std::string::npos || second - magic.size() != 16) return std::nullopt;
  Rendezvous rv;
  rv.nonce = text.substr(magic.size(), 16);
  if (rv.nonce.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
  const std::string where = text.substr(second + 1);
  if (where.starts_with("tcp://")) {
    rv.kind = Rendezvous::Kind::kTcp;
    if (!SplitHostPort(where.substr(6), rv.host, rv.port) || rv.port == 0) return std::nullopt;
  } else if (where.starts_with("file://")) {
    rv.kind = Rendezvous::Kind::kFile;
    rv.directory = where.substr(7);
    if (rv.directory.empty()) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return rv;
}

std::string LocalAddress() {
  std::string configured = EnvOr("METRONOME_STANDIN_IFACE_ADDR", "");  // not const: returned
  if (!configured.empty()) return configured;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) == 0) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* result = nullptr;
    if (::getaddrinfo(name, nullptr, &hints, &result) == 0 && result != nullptr) {
      char text[INET_ADDRSTRLEN] = {};
      const auto* in = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
      const bool ok = ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr;
      ::freeaddrinfo(result);
      if (ok) return text;
    }
  }
  return "127.0.0.1";
}

std::chrono::milliseconds OperationTimeout() {
  static const std::chrono::milliseconds kTimeout = [] {
    const std::string text = EnvOr("METRONOME_STANDIN_TIMEOUT_S", "300");
    char* end = nullptr;
    const double seconds = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(seconds > 0)) {
      WarnOnce("timeout-env", "METRONOME_STANDIN_TIMEOUT_S='" + text +
                                  "' is not a positive number "
                                  "of seconds: using 300");
      return std::chrono::milliseconds(300000);
    }
    return std::chrono::milliseconds(static_cast<long>(seconds * 1000.0));
  }();
  return kTimeout;
}

Rendezvous NewRendezvous() {
  const std::string choice = EnvOr("METRONOME_STANDIN_RENDEZVOUS", "tcp");
  Rendezvous rv;
  rv.nonce = NewNonce();
  std::string spec = choice;
  if (spec.starts_with("file://")) {
    spec = spec.substr(7);
  } else if (spec.starts_with("file:")) {
    spec = spec.substr(5);
  } else if (spec == "tcp") {
    spec = "tcp:" + FormatHostPort(LocalAddress(), 0);
  }
  if (spec.starts_with("/")) {
    rv.kind = Rendezvous::Kind::kFile;
    rv.directory = spec;
    EncodeId(rv);  // fails early when the path is too long
    std::error_code error;
    std::filesystem::create_directories(std::filesystem::path(rv.directory) / rv.nonce, error);
    if (error) {
      throw Error(ncclSystemError, "cannot create the rendezvous directory " + rv.directory + "/" +
                                       rv.nonce + ": " + error.message());
    }
    return rv;
  }
  if (spec.starts_with("tcp://")) spec = spec.substr(6);
  if (spec.starts_with("tcp:")) spec = spec.substr(4);
  std::string host;
  std::uint16_t port = 0;
  if (!SplitHostPort(spec, host, port)) {
    throw Error(ncclInvalidArgument,
                "METRONOME_STANDIN_RENDEZVOUS='" + choice +
                    "' is not understood: use 'tcp', 'tcp:HOST:PORT' or 'file:/DIRECTORY'");
  }
  auto server = TcpStoreServer::Obtain(host, port);
  rv.kind = Rendezvous::Kind::kTcp;
  rv.host = server->Host();
  rv.port = server->Port();
  return rv;
}

std::unique_ptr<gloo::rendezvous::Store> OpenStore(const Rendezvous& rendezvous,
                                                   std::chrono::milliseconds timeout) {
  if (rendezvous.kind == Rendezvous::Kind::kTcp) {
    return std::make_unique<TcpStoreClient>(rendezvous.host, rendezvous.port, rendezvous.nonce,
                                            timeout);
  }
  const auto dir = std::filesystem::path(rendezvous.directory) / rendezvous.nonce;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    throw Error(ncclSystemError,
                "cannot create the rendezvous directory " + dir.string() + ": " + error.message());
  }
  return std::make_unique<gloo::rendezvous::FileStore>(dir.string());
}

void CleanupStore(const Rendezvous& rendezvous, gloo::rendezvous::Store& store) noexcept {
  try {
    if (rendezvous.kind == Rendezvous::Kind::kTcp) {
      static_cast<TcpStoreClient&>(store).DeleteAll();
    } else {
      std::error_code error;
      std::filesystem::remove_all(std::filesystem::path(rendezvous.directory) / rendezvous.nonce,
                                  error);
    }
  } catch (...) {
    // Leftover keys only cost a little memory or disk space.
  }
}

}  // namespace metronome::testbed::standin
