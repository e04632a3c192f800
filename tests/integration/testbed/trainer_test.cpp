// metronome-trainer on the Gloo stand-in, as real processes: a 2-rank job started with
// --local-ranks, a job of one process per rank meeting over TCP, the model table, bad usage.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the trainer on the stand-in (LD_LIBRARY_PATH) with `args`; captures stdout and stderr.
Result RunTrainer(const std::string& args, const std::filesystem::path& dir,
                  const std::string& name) {
  const auto err_path = dir / (name + ".stderr");
  const std::string command = "LD_LIBRARY_PATH='" METRONOME_STANDIN_DIR "' '" METRONOME_TRAINER
                              "' " +
                              args + " 2>'" + err_path.string() + "'";
  Result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  result.err = text.str();
  return result;
}

json LastJsonLine(const std::string& out) {
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  return json::parse(last);
}

class Trainer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("trainer-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(Trainer, LocalRanksWriteSummaryAndPhases) {
  const auto phases = dir_ / "phases.jsonl";
  const auto summary_path = dir_ / "summary.json";
  const Result r = RunTrainer(
      "--local-ranks 2 --compute-ms 20 --gradient-mb 3 --bucket-mb 1 "
      "--iterations 5 --job t1 --phases-out '" +
          phases.string() + "' --summary-out '" + summary_path.string() + "'",
      dir_, "local");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json summary = LastJsonLine(r.out);
  EXPECT_EQ(summary["job"], "t1");
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["iterations"], 5);
  EXPECT_EQ(summary["model"], "custom");
  EXPECT_EQ(summary["device"], "host");  // --device auto on the stand-in
  EXPECT_EQ(summary["gradient_bytes"], 3u << 20);
  EXPECT_EQ(summary["buckets"], json::array({1u << 20, 1u << 20, 1u << 20}));
  // It ran on the stand-in, not on the real NCCL.
  EXPECT_NE(summary["nccl_library"].get<std::string>().find("nccl_gloo/lib/libnccl.so.2"),
            std::string::npos);
  for (const char* key : {"iteration_ms", "compute_ms", "comm_ms"}) {
    ASSERT_TRUE(summary.contains(key)) << key;
    EXPECT_LE(summary[key]["min"].get<double>(), summary[key]["p50"].get<double>()) << key;
    EXPECT_LE(summary[key]["p50"].get<double>(), summary[key]["p99"].get<double>()) << key;
    EXPECT_LE(summary[key]["p99"].get<double>(), summary[key]["max"].get<double>()) << key;
  }
  // Each iteration sleeps at least its compute time.
  EXPECT_GE(summary["compute_ms"]["min"].get<double>(), 20.0);
  EXPECT_GE(summary["iteration_ms"]["mean"].get<double>(), 20.0);
  EXPECT_GE(summary["completion_s"].get<double>(), 5 * 0.020);
  EXPECT_LT(summary["start_ns"].get<std::int64_t>(), summary["end_ns"].get<std::int64_t>());
  // The summary file holds the same summary.
  std::ifstream summary_file(summary_path);
  ASSERT_TRUE(summary_file.good());
  EXPECT_EQ(json::parse(summary_file), summary);

  // The phase file: 5 iterations of each rank, timestamps in order.
  std::ifstream in(phases);
  std::string line;
  std::vector<json> lines;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 10u);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const json& p = lines[i];
    EXPECT_EQ(p["job"], "t1");
    EXPECT_EQ(p["rank"], static_cast<int>(i / 5));
    EXPECT_EQ(p["iteration"], static_cast<int>(i % 5));
    EXPECT_EQ(p["warmup"], i % 5 == 0);
    const auto compute_start = p["compute_start_ns"].get<std::int64_t>();
    const auto comm_start = p["comm_start_ns"].get<std::int64_t>();
    const auto comm_end = p["comm_end_ns"].get<std::int64_t>();
    EXPECT_GE(comm_start - compute_start, 20'000'000);
    EXPECT_GE(comm_end, comm_start);
    if (i % 5 != 0) {
      EXPECT_GE(compute_start, lines[i - 1]["comm_end_ns"].get<std::int64_t>());
    }
  }
  EXPECT_FALSE(std::filesystem::exists(phases.string() + ".rank0"));
}

// A loopback port the kernel just handed out; throws when it cannot get one.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("FreePort: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("FreePort: no free loopback port");
  return ntohs(addr.sin_port);
}

TEST_F(Trainer, OneProcessPerRankOverTcpRendezvous) {
  const std::string common = "--world-size 2 --rendezvous 127.0.0.1:" + std::to_string(FreePort()) +
                             " --compute-ms 5 --gradient-mb 2 --iterations 3 --job tcp";
  auto rank1 =
      std::async(std::launch::async, [&] { return RunTrainer(common + " --rank 1", dir_, "r1"); });
  const Result r0 = RunTrainer(common + " --rank 0", dir_, "r0");
  const Result r1 = rank1.get();
  ASSERT_EQ(r0.exit_code, 0) << r0.out << r0.err;
  ASSERT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  const json summary = LastJsonLine(r0.out);
  EXPECT_EQ(summary["rank"], 0);
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["buckets"].size(), 2u);  // 1 MiB, then the other 1 MiB
}

TEST_F(Trainer, ModelFromTableWithScaleFactors) {
  const Result r = RunTrainer(
      "--model resnet50 --gpu T4 --compute-scale 0.01 --gradient-scale 0.02 "
      "--iterations 2 --warmup 0 --quiet",
      dir_, "model");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json summary = LastJsonLine(r.out);
  EXPECT_EQ(summary["model"], "resnet50");
  EXPECT_EQ(summary["gpu"], "T4");
  EXPECT_EQ(summary["world_size"], 1);
  EXPECT_NEAR(summary["compute_ms_configured"].get<double>(), 1.571, 1e-9);
  // 2 % of ResNet-50's 102,228,128 gradient bytes, rounded to whole floats.
  EXPECT_NEAR(summary["gradient_bytes"].get<double>(), 102228128 * 0.02, 4);
  EXPECT_EQ(summary["buckets"][0], 1u << 20);
  EXPECT_EQ(r.out.find("iter 1/2"), std::string::npos) << "--quiet prints no iteration lines";
}

TEST_F(Trainer, BadUsageIsRejectedClearly) {
  Result r = RunTrainer("--model resnet5O --iterations 1", dir_, "bad-model");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'resnet5O'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("resnet50"), std::string::npos) << r.err;
  r = RunTrainer("--model resnet50 --gpu H100", dir_, "bad-gpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown GPU 'H100'"), std::string::npos) << r.err;
  r = RunTrainer("--compute-ms 5", dir_, "no-gradient");
  EXPECT_EQ(r.exit_code, 2);
  r = RunTrainer("--compute-ms 5 --gradient-mb 1 --world-size 2 --rank 0", dir_, "no-rendezvous");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rendezvous"), std::string::npos) << r.err;
  r = RunTrainer("--compute-ms 5 --gradient-mb 1 --world-size 2 --rank 2", dir_, "bad-rank");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
