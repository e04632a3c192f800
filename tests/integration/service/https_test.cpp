// metronome-scheduler serving HTTPS (the http.tls_* keys), as kube-scheduler reaches its extender
// with `enableHTTPS: true` and `tlsConfig`: throwaway CAs and certificates made with the openssl
// command-line tool (scripts/setup.sh installs it); /healthz, /metrics and the extender verbs
// over TLS, verified with the CA; plain HTTP and untrusted clients refused; client certificates
// required with a client CA; a renewed certificate served without a restart; and bad files
// refused at start with the key named and exit code 2.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "harness.hpp"

namespace metronome::testing {
namespace {

// A scratch folder of CAs and the certificates they signed, all for 127.0.0.1.
class Pki {
 public:
  Pki() : dir_(TempPath("pki")) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~Pki() { std::filesystem::remove_all(dir_); }
  Pki(const Pki&) = delete;
  Pki& operator=(const Pki&) = delete;

  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  std::string Crt(const std::string& name) const { return Path(name + ".crt"); }
  std::string Key(const std::string& name) const { return Path(name + ".key"); }

  // A self-signed CA: NAME.crt, NAME.key.
  void MakeCa(const std::string& name) const {
    Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "
        "/CN=" +
        name + " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign" +
        " -keyout " + Key(name) + " -out " + Crt(name));
  }

  // A certificate for 127.0.0.1 (server and client use) signed by `ca`: NAME.crt, NAME.key.
  void MakeCert(const std::string& name, const std::string& ca) const {
    WriteFile(Path(name + ".ext"),
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
              "extendedKeyUsage=serverAuth,clientAuth\n");
    Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + name +
        " -keyout " + Key(name) + " -out " + Path(name + ".csr"));
    Run("openssl x509 -req -days 2 -in " + Path(name + ".csr") + " -CA " + Crt(ca) + " -CAkey " +
        Key(ca) + " -CAcreateserial -extfile " + Path(name + ".ext") + " -out " + Crt(name));
  }

 private:
  static void Run(const std::string& cmd) {
    const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
    ASSERT_EQ(rc, 0) << "failed (the openssl CLI comes with scripts/setup.sh): " << cmd;
  }
  std::string dir_;
};

// A refused handshake closes the socket under the client's TLS write (write(), not send with
// MSG_NOSIGNAL): without this, SIGPIPE would end the test.
const bool kSigpipeIgnored = std::signal(SIGPIPE, SIG_IGN) != SIG_ERR;

// An HTTPS client that trusts `ca` only and presents `client` (NAME.crt/.key) when given.
std::unique_ptr<httplib::SSLClient> Client(int port, const Pki& pki, const std::string& ca,
                                           const std::string& client = "") {
  auto c = client.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                          : std::make_unique<httplib::SSLClient>("127.0.0.1", port, pki.Crt(client),
                                                                 pki.Key(client));
  c->set_ca_cert_path(pki.Crt(ca).c_str());
  c->enable_server_certificate_verification(true);
  c->set_connection_timeout(2, 0);
  c->set_read_timeout(10, 0);
  return c;
}

bool Healthy(int port, const Pki& pki, const std::string& ca, const std::string& client = "") {
  auto r = Client(port, pki, ca, client)->Get("/healthz");
  return r && r->status == 200;
}

// metronome-scheduler on free loopback ports with `tls` flags; ready once it logs that it listens.
class TlsScheduler {
 public:
  explicit TlsScheduler(const std::vector<std::string>& tls) : port_(FreePort()) {
    std::vector<std::string> argv = {METRONOME_SCHEDULER_BIN, "--listen",
                                     "tcp://127.0.0.1:" + std::to_string(FreePort()), "--http",
                                     "127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), tls.begin(), tls.end());
    proc_ = std::make_unique<Process>(argv, TempPath("https-" + std::to_string(port_) + ".log"));
    ready_ = WaitFor([&] { return Log().find("scheduler: listening") != std::string::npos; });
  }
  int Port() const { return port_; }
  bool Ready() const { return ready_; }
  std::string Log() const { return proc_->Log(); }
  int Stop() { return proc_->Kill(SIGTERM); }

 private:
  int port_;
  std::unique_ptr<Process> proc_;
  bool ready_ = false;
};

std::vector<std::string> TlsFlags(const Pki& pki, const std::string& server,
                                  const std::string& client_ca = "") {
  std::vector<std::string> flags = {"--http-tls-cert-file", pki.Crt(server), "--http-tls-key-file",
                                    pki.Key(server)};
  if (!client_ca.empty()) {
    flags.insert(flags.end(), {"--http-tls-client-ca-file", pki.Crt(client_ca)});
  }
  return flags;
}

// Every test has a CA "ca" and a server certificate "server" it signed.
class SchedulerHttps : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.MakeCa("ca");
    pki_.MakeCert("server", "ca");
  }
  Pki pki_;
};

TEST_F(SchedulerHttps, ExtenderHealthAndMetricsOverTlsVerifiedWithTheCa) {
  pki_.MakeCa("other-ca");
  TlsScheduler s(TlsFlags(pki_, "server"));
  ASSERT_TRUE(s.Ready()) << s.Log();
  EXPECT_NE(s.Log().find("serving HTTPS"), std::string::npos) << s.Log();

  auto c = Client(s.Port(), pki_, "ca");
  auto health = c->Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);

  // kube-scheduler's calls, real-shaped, on one kept-alive connection.
  const std::string body =
      ReadFile(std::string(METRONOME_EXTENDER_FIXTURES) + "/filter_full_nodes.json");
  ASSERT_FALSE(body.empty());
  auto filter = c->Post("/extender/filter", body, "application/json");
  ASSERT_TRUE(filter) << httplib::to_string(filter.error());
  ASSERT_EQ(filter->status, 200) << filter->body;
  const json result = json::parse(filter->body, nullptr, false);
  ASSERT_TRUE(result.is_object()) << filter->body;
  EXPECT_EQ(result["Error"], "");
  auto prioritize = c->Post("/extender/prioritize", body, "application/json");
  ASSERT_TRUE(prioritize) << httplib::to_string(prioritize.error());
  EXPECT_EQ(prioritize->status, 200) << prioritize->body;
  EXPECT_TRUE(json::parse(prioritize->body, nullptr, false).is_array()) << prioritize->body;
  auto metrics = c->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(MetricValue(metrics->body, "metronome_extender_requests_total{verb=\"filter\"}"), 1);

  // Plain HTTP on the same port gets no answer; a client that does not trust the CA hangs up.
  httplib::Client plain("127.0.0.1", s.Port());
  plain.set_connection_timeout(2, 0);
  plain.set_read_timeout(5, 0);
  EXPECT_FALSE(plain.Get("/healthz"));
  EXPECT_FALSE(Healthy(s.Port(), pki_, "other-ca"));
  EXPECT_TRUE(Healthy(s.Port(), pki_, "ca")) << "still serving";
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

TEST_F(SchedulerHttps, ClientCaMakesAClientCertificateMandatory) {
  pki_.MakeCert("kube-scheduler", "ca");
  pki_.MakeCa("rogue-ca");
  pki_.MakeCert("rogue", "rogue-ca");
  ASSERT_TRUE(kSigpipeIgnored);
  TlsScheduler s(TlsFlags(pki_, "server", "ca"));
  ASSERT_TRUE(s.Ready()) << s.Log();
  EXPECT_TRUE(Healthy(s.Port(), pki_, "ca", "kube-scheduler"));
  EXPECT_FALSE(Healthy(s.Port(), pki_, "ca")) << "no client certificate";
  EXPECT_FALSE(Healthy(s.Port(), pki_, "ca", "rogue")) << "signed by another CA";
  auto r = Client(s.Port(), pki_, "ca", "kube-scheduler")
               ->Post("/extender/filter", "{\"Pod\": [", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << "a malformed body still gets its JSON 400 over mutual TLS";

  // metronomectl over mutual TLS: with the CA and a client certificate it answers; without the
  // certificate the server refuses it (exit 1, the server could not be reached).
  const std::vector<std::string> ctl = {METRONOMECTL_BIN, "--server",
                                        "https://127.0.0.1:" + std::to_string(s.Port()), "--cacert",
                                        pki_.Crt("ca")};
  std::vector<std::string> with_cert = ctl;
  with_cert.insert(with_cert.end(), {"--cert", pki_.Crt("kube-scheduler"), "--key",
                                     pki_.Key("kube-scheduler"), "status"});
  auto [rc, out] = RunToEnd(with_cert, "ctl-mtls");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("jobs"), std::string::npos) << out;
  std::vector<std::string> without_cert = ctl;
  without_cert.push_back("status");
  std::tie(rc, out) = RunToEnd(without_cert, "ctl-no-cert");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

// A renewed Secret: new files swapped in under the same names. The scheduler serves the new
// certificate from a later handshake on, without a restart.
TEST_F(SchedulerHttps, RenewedCertificateIsServedWithoutARestart) {
  pki_.MakeCa("new-ca");
  pki_.MakeCert("new", "new-ca");
  std::filesystem::copy_file(pki_.Crt("server"), pki_.Crt("served"));
  std::filesystem::copy_file(pki_.Key("server"), pki_.Key("served"));
  TlsScheduler s(TlsFlags(pki_, "served"));
  ASSERT_TRUE(s.Ready()) << s.Log();
  EXPECT_TRUE(Healthy(s.Port(), pki_, "ca"));
  EXPECT_FALSE(Healthy(s.Port(), pki_, "new-ca"));

  std::filesystem::copy_file(pki_.Crt("new"), pki_.Path("next.crt"));
  std::filesystem::copy_file(pki_.Key("new"), pki_.Path("next.key"));
  std::filesystem::rename(pki_.Path("next.key"), pki_.Key("served"));
  std::filesystem::rename(pki_.Path("next.crt"), pki_.Crt("served"));
  EXPECT_TRUE(WaitFor([&] { return Healthy(s.Port(), pki_, "new-ca"); }, 10000)) << s.Log();
  EXPECT_FALSE(Healthy(s.Port(), pki_, "ca"));
  EXPECT_NE(s.Log().find("TLS certificate reloaded"), std::string::npos) << s.Log();

  // A broken renewal keeps the certificate in use (files are looked at on handshakes).
  WriteFile(pki_.Path("next.crt"), "not a certificate\n");
  std::filesystem::rename(pki_.Path("next.crt"), pki_.Crt("served"));
  EXPECT_TRUE(WaitFor(
      [&] {
        return Healthy(s.Port(), pki_, "new-ca") &&
               s.Log().find("keeping the TLS certificate") != std::string::npos;
      },
      10000))
      << s.Log();
  EXPECT_TRUE(Healthy(s.Port(), pki_, "new-ca"));
  EXPECT_EQ(s.Stop(), 0) << s.Log();
}

TEST_F(SchedulerHttps, BadFilesExitWithCode2AndNameTheKey) {
  pki_.MakeCert("stranger", "ca");
  WriteFile(pki_.Path("garbage.pem"), "-----BEGIN CERTIFICATE-----\nnot base64\n");
  const auto check = [&](std::vector<std::string> flags, const std::string& name) {
    flags.insert(flags.begin(), {METRONOME_SCHEDULER_BIN, "--check"});
    return RunToEnd(flags, "https-" + name);
  };
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--http-tls-cert-file", pki_.Path("missing.crt"), "--http-tls-key-file",
        pki_.Key("server")},
       "http.tls_cert_file: cannot read '" + pki_.Path("missing.crt") + "'"},
      {{"--http-tls-cert-file", pki_.Crt("server"), "--http-tls-key-file",
        pki_.Path("missing.key")},
       "http.tls_key_file: cannot read"},
      {{"--http-tls-cert-file", pki_.Path("garbage.pem"), "--http-tls-key-file",
        pki_.Key("server")},
       "http.tls_cert_file: '" + pki_.Path("garbage.pem") + "' holds no PEM certificate"},
      {{"--http-tls-cert-file", pki_.Crt("server"), "--http-tls-key-file", pki_.Crt("server")},
       "http.tls_key_file: '" + pki_.Crt("server") + "' holds no unencrypted PEM private key"},
      {{"--http-tls-cert-file", pki_.Crt("server"), "--http-tls-key-file", pki_.Key("stranger")},
       "http.tls_key_file: '" + pki_.Key("stranger") + "' is not the key of the certificate"},
      {{"--http-tls-cert-file", pki_.Crt("server")},
       "http.tls_key_file: is required with http.tls_cert_file"},
      {{"--http-tls-cert-file", pki_.Crt("server"), "--http-tls-key-file", pki_.Key("server"),
        "--http-tls-client-ca-file", pki_.Key("ca")},
       "http.tls_client_ca_file: '" + pki_.Key("ca") + "' holds no PEM certificate"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto [rc, out] = check(cases[i].flags, std::to_string(i));
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("configuration error: " + cases[i].expected), std::string::npos)
        << cases[i].expected << "\n"
        << out;
  }
  // The same from a YAML file, and when starting for real rather than with --check.
  const std::string config = pki_.Path("config.yaml");
  WriteFile(config, "http:\n  address: 127.0.0.1:" + std::to_string(FreePort()) +
                        "\n  tls_cert_file: " + pki_.Crt("server") +
                        "\n  tls_key_file: " + pki_.Path("missing.key") + "\n");
  const auto [rc, out] = RunToEnd({METRONOME_SCHEDULER_BIN, "--config", config}, "https-yaml");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("configuration error: http.tls_key_file: cannot read"), std::string::npos)
      << out;
  // Good files pass --check and say HTTPS.
  const auto [ok_rc, ok_out] = check(TlsFlags(pki_, "server", "ca"), "ok");
  EXPECT_EQ(ok_rc, 0) << ok_out;
  EXPECT_NE(ok_out.find("http=https://"), std::string::npos) << ok_out;
}

}  // namespace
}  // namespace metronome::testing
