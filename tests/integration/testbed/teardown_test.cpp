// Teardown and peer failure on the Gloo stand-in, with the two ranks of a job as separate
// processes (teardown_peer.cpp):
// - over a slow link (a private network namespace whose loopback is shaped to 200 Mbit/s with a
//   50 ms queue, as in the demo cluster), the last bytes a rank sent before ncclCommFinalize /
//   ncclCommDestroy and exit still reach its peer. (Destroy used to reset the connections, which
//   dropped what the kernel had not sent yet: the peer waited for it until the timeout.)
// - a rank whose peer is killed in the middle of a transfer fails with a network error within
//   the operation timeout (METRONOME_STANDIN_TIMEOUT_S), never hangs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

Result RunCommand(const std::string& command) {
  Result result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class Teardown : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("teardown-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Both ranks of `mode ARGS` in a new network namespace whose loopback is a slow link. The
  // operation timeout is 8 s, so a lost tail shows as a failure rather than a hang. Exit 77 when
  // the namespace cannot be made.
  Result RunOnSlowLink(const std::string& args) {
    const std::string script =
        "PATH=$PATH:/usr/sbin:/sbin; ip link set lo up && tc qdisc add dev lo root tbf rate "
        "200mbit burst 256kb latency 50ms "
        "|| exit 77; "
        "export METRONOME_STANDIN_TIMEOUT_S=8 METRONOME_STANDIN_IFACE_ADDR=127.0.0.1; "
        "'" METRONOME_TEARDOWN_PEER "' tail 0 '" +
        (dir_ / "id").string() + "' " + args +
        " & r0pid=$!; '" METRONOME_TEARDOWN_PEER "' tail 1 '" + (dir_ / "id").string() + "' " +
        args +
        "; r1=$?; wait $r0pid; r0=$?; echo \"rank0=$r0 rank1=$r1\"; [ $r0 = 0 ] && [ $r1 = 0 ]";
    // As root a network namespace is enough; otherwise a user namespace may be allowed.
    const std::string unshare = ::geteuid() == 0 ? "unshare -n" : "unshare -rn";
    return RunCommand("timeout 40 " + unshare + " sh -c \"" + Escape(script) + "\"");
  }

  static std::string Escape(const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c == '"' || c == '$' || c == '\\' || c == '`') out += '\\';
      out += c;
    }
    return out;
  }

  std::filesystem::path dir_;
};

// Why the namespace could not be made, or "" when it was.
std::string NoNamespace(const Result& result) {
  // 77: the namespace's link could not be set up; 126/127: no unshare; "unshare:": refused.
  if (result.exit_code == 77 || result.exit_code == 126 || result.exit_code == 127 ||
      result.out.find("unshare:") != std::string::npos) {
    return "cannot make a network namespace with a shaped loopback here (needs root, or "
           "unprivileged user namespaces, and ip and tc): " +
           result.out;
  }
  return "";
}

TEST_F(Teardown, LastBytesReachThePeerOverASlowLinkWithFinalize) {
  const Result result = RunOnSlowLink("3 1");
  if (const std::string why = NoNamespace(result); !why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("rank0=0 rank1=0"), std::string::npos) << result.out;
}

TEST_F(Teardown, LastBytesReachThePeerOverASlowLinkWithDestroyAlone) {
  const Result result = RunOnSlowLink("3 0");
  if (const std::string why = NoNamespace(result); !why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_NE(result.out.find("rank0=0 rank1=0"), std::string::npos) << result.out;
}

TEST_F(Teardown, DeadPeerFailsWithinTheTimeout) {
  // Plain loopback: rank 1 kills rank 0 once rank 0's data starts landing. With a 4 s operation
  // timeout the survivor must fail with a network error well before the 12 s cut.
  const std::string id = (dir_ / "id").string();
  const std::string peer = METRONOME_TEARDOWN_PEER;
  const Result result =
      RunCommand("export METRONOME_STANDIN_TIMEOUT_S=4 METRONOME_STANDIN_IFACE_ADDR=127.0.0.1; '" +
                 peer + "' die 0 '" + id + "' & timeout 12 '" + peer + "' die 1 '" + id + "'");
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const auto at = result.out.find("failed ");
  ASSERT_NE(at, std::string::npos) << result.out;
  const double seconds = std::strtod(result.out.c_str() + at + 7, nullptr);
  EXPECT_LT(seconds, 8.0) << result.out;
  EXPECT_NE(result.out.find("network error"), std::string::npos) << result.out;
}

}  // namespace
