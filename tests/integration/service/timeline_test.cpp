// The timeline page in headless Chromium (Debian's `chromium`): a running cluster (scheduler on
// a two-rack topology, two jobs whose ranks report phases on their windows), the page loaded,
// given a few seconds of virtual time to poll the API and draw, then its DOM dumped. It must
// have drawn every link that carries a job, with windows and measured phases, and logged no
// console message or script error.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <regex>

#include "harness.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/timetable.hpp"

namespace metronome::testing {
namespace {

std::string FindChromium() {
  if (const char* env = std::getenv("METRONOME_CHROMIUM")) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string Attr(const std::string& attrs, const std::string& name) {
  std::smatch m;
  if (std::regex_search(attrs, m, std::regex(name + "=\"([^\"]*)\""))) return m[1];
  return "";
}

TEST(TimelinePage, DrawsTheLinksOfARunningClusterWithoutConsoleErrors) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (Debian package `chromium`, installed by "
                    "scripts/setup.sh); the timeline page was not tested";
  }
  const std::string topo = TwoRackTopology("timeline-topo.yaml");
  Scheduler s({"--topology", topo});
  ASSERT_TRUE(s.Ready()) << s.Log();
  zmq::context_t ctx;
  struct Rank {
    std::string job;
    uint32_t rank;
    std::string node;
    std::unique_ptr<ProtoClient> client;
  };
  std::vector<Rank> ranks;
  for (const auto& [job, rank, node] : std::vector<std::tuple<std::string, uint32_t, std::string>>{
           {"resnet", 0, "n0"}, {"resnet", 1, "n2"}, {"bert", 0, "n1"}, {"bert", 1, "n3"}}) {
    ranks.push_back({job, rank, node, std::make_unique<ProtoClient>(ctx, s.Endpoint())});
    ASSERT_TRUE(ranks.back().client->Register(job, rank, 2, node));
  }
  // Every rank reports its profile and the phases it ran on its windows, every 100 ms.
  std::atomic<bool> stop{false};
  std::thread reporter([&] {
    while (!stop) {
      for (auto& r : ranks) {
        r.client->Poll(0);
        const int64_t period = r.job == "resnet" ? 100 * kMs : 200 * kMs;
        const int64_t comm = r.job == "resnet" ? 30 * kMs : 60 * kMs;
        std::vector<int64_t> starts;
        if (r.client->timetable) {
          const int64_t open = WindowOpenAtOrBefore(*r.client->timetable, RealtimeNs());
          for (int k = 2; k >= 0; --k) {
            starts.push_back(open - k * r.client->timetable->period_ns + 100'000);
          }
        }
        r.client->Send(r.client->MakeReport(r.job, r.rank, period, comm, starts));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const bool planned = WaitFor([&] {
    auto j = s.Get("/api/v1/jobs");
    return j && (*j)["jobs"].size() == 2 && (*j)["jobs"][0]["phases_seen"].get<int>() > 2 &&
           (*j)["jobs"][1]["phases_seen"].get<int>() > 2;
  });
  ASSERT_TRUE(planned) << s.Log();

  const std::string profile = TempPath("chromium-profile");
  std::filesystem::create_directories(profile);
  const std::string url = "http://127.0.0.1:" + std::to_string(s.HttpPort()) + "/timeline";
  const std::string dom_file = TempPath("timeline-dom.html");
  const std::string err_file = TempPath("timeline-chromium.log");
  const std::string cmd = "timeout 60 " + chromium +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update"
                          " --disable-sync --user-data-dir=" +
                          profile +
                          " --enable-logging=stderr --v=0 --virtual-time-budget=4000"
                          " --dump-dom " +
                          url + " > " + dom_file + " 2> " + err_file;
  const int rc = std::system(cmd.c_str());
  // METRONOME_TIMELINE_SCREENSHOT=out.png also saves a picture of the page (for the docs).
  if (const char* shot = std::getenv("METRONOME_TIMELINE_SCREENSHOT")) {
    const std::string shot_cmd = "timeout 60 " + chromium +
                                 " --headless --no-sandbox --disable-gpu --disable-quic"
                                 " --no-first-run --disable-background-networking"
                                 " --disable-component-update --disable-sync --user-data-dir=" +
                                 profile + " --window-size=1200,1400 --virtual-time-budget=3000" +
                                 " --screenshot=" + shot + " " + url + " > /dev/null 2>&1";
    EXPECT_EQ(std::system(shot_cmd.c_str()), 0);
  }
  stop = true;
  reporter.join();
  ASSERT_EQ(rc, 0) << ReadFile(err_file);
  const std::string dom = ReadFile(dom_file);
  const std::string log = ReadFile(err_file);

  // The page fetched the data at least twice (live refresh) and drew every link with a job:
  // each job crosses its two nodes' uplinks and both racks' uplinks.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"(<div id="links"([^>]*)>)"))) << dom;
  EXPECT_EQ(Attr(m[1], "data-count"), "6") << dom;
  EXPECT_GE(std::atoi(Attr(m[1], "data-drawn").c_str()), 2) << dom;
  std::map<std::string, std::string> sections;
  const std::regex section(R"re(<section class="link" data-link="([^"]+)"([^>]*)>)re");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), section);
       it != std::sregex_iterator(); ++it) {
    sections[(*it)[1]] = (*it)[2];
  }
  ASSERT_EQ(sections.size(), 6u) << dom;
  for (const char* link : {"r0/up", "r1/up"}) {
    ASSERT_TRUE(sections.contains(link)) << link << "\n" << dom;
    EXPECT_EQ(Attr(sections[link], "data-jobs"), "2") << link;
    EXPECT_GT(std::atoi(Attr(sections[link], "data-windows").c_str()), 10) << link;
    EXPECT_GT(std::atoi(Attr(sections[link], "data-phases").c_str()), 2) << link;
  }
  for (const char* link : {"n0/up", "n1/up", "n2/up", "n3/up"}) {
    ASSERT_TRUE(sections.contains(link)) << link;
    EXPECT_EQ(Attr(sections[link], "data-jobs"), "1") << link;
  }
  EXPECT_NE(dom.find("resnet"), std::string::npos);
  EXPECT_NE(dom.find("6 link(s) with jobs"), std::string::npos) << dom;

  // No script error caught by the page, and no console message at all.
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"(<pre id="errors">([^<]*)</pre>)"))) << dom;
  EXPECT_EQ(m[1].str(), "") << "script errors on the page";
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;
}

}  // namespace
}  // namespace metronome::testing
