#include "http_tls.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <utility>
#include <vector>

#include "metronome/common/errno_text.hpp"

namespace metronome::service {

// OpenSSL objects owned by unique_ptr. Outside the anonymous namespace because Credentials, a
// member of the header's TlsContext, holds them (GCC's -Wsubobject-linkage in a unity build).
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct ChainFree {
  void operator()(STACK_OF(X509) * s) const { sk_X509_pop_free(s, X509_free); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using ChainPtr = std::unique_ptr<STACK_OF(X509), ChainFree>;

namespace {

constexpr const char* kCertKey = "http.tls_cert_file";
constexpr const char* kKeyKey = "http.tls_key_file";
constexpr const char* kClientCaKey = "http.tls_client_ca_file";
// How often a handshake may look at the files for a change (a stat of each).
constexpr auto kCheckInterval = std::chrono::seconds(1);

// OpenSSL's oldest queued error as text (empty when none); clears the queue.
std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return std::string(" (") + buf + ")";
}

BioPtr Open(const char* key, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    throw ConfigError(key, "cannot read '" + path + "': " + ErrnoText(errno));
  }
  return BioPtr(BIO_new_fp(f, BIO_CLOSE));
}

// Every PEM certificate of a file, in order (a certificate, then its intermediates).
std::vector<X509Ptr> ReadCertificates(const char* key, const std::string& path) {
  BioPtr bio = Open(key, path);
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  const std::string why = OpenSslError();  // the end of the file reads as an error too
  if (certs.empty()) throw ConfigError(key, "'" + path + "' holds no PEM certificate" + why);
  return certs;
}

// Never asks for a pass phrase (the default callback would prompt on the terminal).
int NoPassphrase(char*, int, int, void*) {
  return 0;
}

KeyPtr ReadKey(const std::string& path) {
  BioPtr bio = Open(kKeyKey, path);
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!key) {
    throw ConfigError(kKeyKey,
                      "'" + path + "' holds no unencrypted PEM private key" + OpenSslError());
  }
  return key;
}

// Device, inode, size and modification time: a Secret update swaps in new files.
std::string FileIdentity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "none";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

struct TlsContext::Credentials {
  X509Ptr leaf;
  ChainPtr chain;  // intermediates, possibly none
  KeyPtr key;

  static std::shared_ptr<const Credentials> Load(const HttpTlsConfig& c) {
    std::vector<X509Ptr> certs = ReadCertificates(kCertKey, c.cert_file);
    KeyPtr key = ReadKey(c.key_file);
    if (X509_check_private_key(certs[0].get(), key.get()) != 1) {
      ERR_clear_error();
      throw ConfigError(kKeyKey, "'" + c.key_file + "' is not the key of the certificate in '" +
                                     c.cert_file + "'");
    }
    if (X509_cmp_current_time(X509_get0_notAfter(certs[0].get())) <= 0) {
      spdlog::warn("http: the certificate in {} has expired; clients will refuse it", c.cert_file);
    }
    auto creds = std::make_shared<Credentials>();
    creds->chain.reset(sk_X509_new_null());
    for (size_t i = 1; i < certs.size(); ++i) sk_X509_push(creds->chain.get(), certs[i].release());
    creds->leaf = std::move(certs[0]);
    creds->key = std::move(key);
    return creds;
  }
};

TlsContext::TlsContext(HttpTlsConfig config) : config_(std::move(config)) {
  tried_ = FileIdentity(config_.cert_file) + "|" + FileIdentity(config_.key_file);
  current_ = Credentials::Load(config_);
  if (!config_.client_ca_file.empty()) ReadCertificates(kClientCaKey, config_.client_ca_file);
  next_check_ = std::chrono::steady_clock::now() + kCheckInterval;
}

TlsContext::~TlsContext() = default;

std::shared_ptr<const TlsContext::Credentials> TlsContext::Current() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return current_;
  next_check_ = now + kCheckInterval;
  std::string id = FileIdentity(config_.cert_file) + "|" + FileIdentity(config_.key_file);
  if (id == tried_) return current_;
  tried_ = std::move(id);  // a pair that fails is tried again only once it changes again
  try {
    current_ = Credentials::Load(config_);
    spdlog::info("http: TLS certificate reloaded from {}", config_.cert_file);
  } catch (const ConfigError& e) {
    spdlog::warn("http: keeping the TLS certificate in use: {}: {}", e.Key(), e.Reason());
  }
  return current_;
}

int TlsContext::SelectCertificate(SSL* ssl, void* self) {
  try {
    const auto creds = static_cast<TlsContext*>(self)->Current();
    return SSL_use_cert_and_key(ssl, creds->leaf.get(), creds->key.get(), creds->chain.get(), 1) ==
                   1
               ? 1
               : 0;
  } catch (...) {
    return 0;  // fails this handshake only
  }
}

bool TlsContext::Configure(SSL_CTX& ctx) {
  SSL_CTX_set_options(
      &ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1) return false;
  // The pair read at start; each handshake then takes the current one.
  const auto creds = Current();
  if (SSL_CTX_use_cert_and_key(&ctx, creds->leaf.get(), creds->key.get(), creds->chain.get(), 1) !=
      1) {
    return false;
  }
  SSL_CTX_set_cert_cb(&ctx, &TlsContext::SelectCertificate, this);
  if (!config_.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, config_.client_ca_file.c_str(), nullptr) != 1) {
      return false;
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config_.client_ca_file.c_str());
    if (names == nullptr) return false;
    SSL_CTX_set_client_CA_list(&ctx, names);
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return true;
}

}  // namespace metronome::service
