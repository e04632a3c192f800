// HTTPS for the scheduler's HTTP server (the http.tls_* keys): the certificate chain and key it
// serves, and the CAs that client certificates must chain to, read from PEM files with errors
// that name the key. The certificate and key are read again when their files change on disk
// (a renewed Kubernetes Secret is swapped in atomically), so a running scheduler serves the new
// certificate from the next handshake on; a pair that does not load keeps the old one in use.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "metronome/service/config.hpp"

namespace metronome::service {

class TlsContext {
 public:
  // Reads and checks every file: throws ConfigError naming http.tls_cert_file, http.tls_key_file
  // or http.tls_client_ca_file when a file is missing or unreadable, holds no PEM certificate or
  // unencrypted PEM key, or the key does not belong to the certificate.
  explicit TlsContext(HttpTlsConfig config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Sets up a server's SSL_CTX: TLS 1.2 or newer, the certificate picked at each handshake from
  // the current files, and with a client CA a client certificate required and verified. False
  // when OpenSSL refuses a setting.
  bool Configure(SSL_CTX& ctx);

  const HttpTlsConfig& Config() const { return config_; }

  struct Credentials;  // one certificate chain and its key (http_tls.cpp)

 private:
  std::shared_ptr<const Credentials> Current();
  static int SelectCertificate(SSL* ssl, void* self);

  HttpTlsConfig config_;
  std::mutex mu_;  // guards current_, tried_, next_check_
  std::shared_ptr<const Credentials> current_;
  std::string tried_;  // identity (inode, size, mtime) of the files last read, good or bad
  std::chrono::steady_clock::time_point next_check_{};
};

}  // namespace metronome::service
