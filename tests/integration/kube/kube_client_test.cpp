// metronome::kube against the fake API server: in-cluster configuration, get/list/create,
// merge-patch and status patch semantics, watch streams, 410 Gone and relisting, retries with
// backoff, TLS with a CA, and the typed TrafficProfile/Node/LinkSchedule helpers.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_apiserver.hpp"
#include "metronome/kube/cache.hpp"
#include "metronome/kube/client.hpp"
#include "metronome/kube/config.hpp"
#include "metronome/kube/resources.hpp"

namespace metronome::kube {
namespace {

using testing::ClientConfigFor;
using testing::FakeApiServer;
using namespace std::chrono_literals;

Json Profile(const std::string& name, const std::string& job, const std::string& model) {
  return {{"apiVersion", "metronome.dev/v1alpha1"},
          {"kind", "TrafficProfile"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", {{"jobName", job}, {"model", model}, {"gpuType", "A100"}}}};
}

Json Node(const std::string& name, const std::string& zone) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/hostname", name}, {"topology.kubernetes.io/zone", zone}}}}},
          {"spec", {{"podCIDR", "10.244.1.0/24"}}},
          {"status", {{"capacity", {{"cpu", "64"}, {"nvidia.com/gpu", "8"}}}}}};
}

std::filesystem::path TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             (name + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

TEST(InClusterConfig, ReadsServiceAccountFilesAndEnvironment) {
  const auto dir = TempDir("sa");
  WriteFile(dir / "token", "abc.def.ghi\n");
  WriteFile(dir / "ca.crt", "-----BEGIN CERTIFICATE-----\n");
  WriteFile(dir / "namespace", "metronome-system");
  const auto env = [](const char* name) -> const char* {
    const std::string n = name;
    if (n == "KUBERNETES_SERVICE_HOST") return "10.96.0.1";
    if (n == "KUBERNETES_SERVICE_PORT") return "443";
    return nullptr;
  };
  auto cfg = InClusterConfig(dir.string(), env);
  ASSERT_TRUE(cfg) << cfg.GetError().ToString();
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->token, "abc.def.ghi");
  EXPECT_EQ(cfg->ca_file, (dir / "ca.crt").string());
  EXPECT_EQ(cfg->token_file, (dir / "token").string());
  EXPECT_EQ(cfg->namespace_name, "metronome-system");
  EXPECT_TRUE(cfg->verify_tls);

  const auto env6 = [](const char* name) -> const char* {
    return std::string(name) == "KUBERNETES_SERVICE_HOST" ? "fd00::1" : "6443";
  };
  auto cfg6 = InClusterConfig(dir.string(), env6);
  ASSERT_TRUE(cfg6);
  EXPECT_EQ(cfg6->server, "https://[fd00::1]:6443");
  std::filesystem::remove_all(dir);
}

TEST(InClusterConfig, OutsideAClusterIsAnErrorValue) {
  const auto none = [](const char*) -> const char* { return nullptr; };
  auto cfg = InClusterConfig("/nonexistent", none);
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.GetError().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);

  const auto env = [](const char* name) -> const char* {
    return std::string(name) == "KUBERNETES_SERVICE_HOST" ? "10.96.0.1" : "443";
  };
  auto missing = InClusterConfig("/nonexistent-sa-dir", env);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.GetError().message.find("/nonexistent-sa-dir/token"), std::string::npos);
}

TEST(KubeClient, GetCreateListAndErrorsAsValues) {
  FakeApiServer api;
  Client client(ClientConfigFor(api));
  const Resource tp = resources::TrafficProfiles();

  auto missing = client.Get(tp, "default", "bert");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.GetError().NotFound());
  EXPECT_EQ(missing.GetError().reason, "NotFound");

  auto created = client.Create(tp, "default", Profile("bert", "bert-finetune", "bert"));
  ASSERT_TRUE(created) << created.GetError().ToString();
  EXPECT_EQ((*created)["metadata"]["namespace"], "default");
  const std::string rv1 = (*created)["metadata"]["resourceVersion"];

  auto again = client.Create(tp, "default", Profile("bert", "bert-finetune", "bert"));
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.GetError().Conflict());
  EXPECT_EQ(again.GetError().reason, "AlreadyExists");

  ASSERT_TRUE(client.Create(tp, "team-b", Profile("gpt2", "gpt2-train", "gpt2")));
  auto list_all = client.List(tp, "");
  ASSERT_TRUE(list_all);
  EXPECT_EQ((*list_all)["items"].size(), 2u);
  auto list_default = client.List(tp, "default");
  ASSERT_TRUE(list_default);
  ASSERT_EQ((*list_default)["items"].size(), 1u);
  EXPECT_EQ((*list_default)["items"][0]["spec"]["jobName"], "bert-finetune");
  // The list's version is the store's version, later than the first create.
  EXPECT_GT(std::stoll((*list_all)["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll(rv1));

  const auto requests = api.Requests();
  EXPECT_NE(std::find(requests.begin(), requests.end(),
                      "POST /apis/metronome.dev/v1alpha1/namespaces/default/trafficprofiles "
                      "application/json"),
            requests.end());
}

TEST(KubeClient, WrongTokenIsUnauthorizedAndNotRetried) {
  FakeApiServer api;
  ClientConfig cfg = ClientConfigFor(api);
  cfg.token = "wrong";
  Client client(cfg);
  auto r = client.List(resources::Nodes(), "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.GetError().status, 401);
  EXPECT_EQ(client.Retries(), 0u);
  EXPECT_EQ(api.Requests().size(), 1u);
}

TEST(KubeClient, RotatedTokenFileIsReadAgainAfterA401) {
  FakeApiServer api;
  const auto dir = TempDir("token");
  WriteFile(dir / "token", "old-token");
  ClientConfig cfg = ClientConfigFor(api);
  cfg.token.clear();
  cfg.token_file = (dir / "token").string();
  cfg.token_refresh = std::chrono::seconds(3600);
  Client client(cfg);
  EXPECT_EQ(client.List(resources::Nodes(), "").GetError().status, 401);
  WriteFile(dir / "token", api.Token() + "\n");
  auto r = client.List(resources::Nodes(), "");
  EXPECT_TRUE(r) << r.GetError().ToString();
  std::filesystem::remove_all(dir);
}

TEST(KubeClient, ListFollowsContinueTokens) {
  FakeApiServer api;
  for (int i = 0; i < 7; ++i) api.Put("nodes", "", Node("node-" + std::to_string(i), "rack-a"));
  Client client(ClientConfigFor(api));
  ListOptions o;
  o.limit = 3;
  auto list = client.List(resources::Nodes(), "", o);
  ASSERT_TRUE(list) << list.GetError().ToString();
  EXPECT_EQ((*list)["items"].size(), 7u);
  EXPECT_FALSE((*list)["metadata"].contains("continue"));
  EXPECT_EQ((*list)["metadata"]["resourceVersion"], std::to_string(api.ResourceVersion()));
  int pages = 0;
  for (const auto& r : api.Requests()) pages += r.rfind("GET /api/v1/nodes", 0) == 0 ? 1 : 0;
  EXPECT_EQ(pages, 3);
}

TEST(KubeClient, MergePatchFollowsRfc7386AndStatusSubresource) {
  FakeApiServer api;
  Client client(ClientConfigFor(api));
  const Resource ls = resources::LinkSchedules();
  Json obj = {{"apiVersion", "metronome.dev/v1alpha1"},
              {"kind", "LinkSchedule"},
              {"metadata", {{"name", "rack-a-up"}}},
              {"spec", {{"capacityGbps", 100}, {"kind", "rack-uplink"}, {"nodes", {"a", "b"}}}},
              {"status", {{"jobCount", 9}}}};
  auto created = client.Create(ls, "", obj);
  ASSERT_TRUE(created);
  EXPECT_FALSE(created->contains("status")) << "status is ignored on create";

  // Object patch: change a field, remove one with null, replace a list; status is ignored.
  auto p1 =
      client.MergePatch(ls, "", "rack-a-up",
                        {{"spec", {{"capacityGbps", 40}, {"kind", nullptr}, {"nodes", {"c"}}}},
                         {"status", {{"jobCount", 3}}}});
  ASSERT_TRUE(p1) << p1.GetError().ToString();
  EXPECT_EQ((*p1)["spec"]["capacityGbps"], 40);
  EXPECT_FALSE((*p1)["spec"].contains("kind"));
  EXPECT_EQ((*p1)["spec"]["nodes"], Json({"c"}));
  EXPECT_FALSE(p1->contains("status"));
  EXPECT_EQ((*p1)["metadata"]["generation"], 2);

  // Status patch: only the status changes, and nested objects merge.
  auto p2 = client.MergePatchStatus(ls, "", "rack-a-up",
                                    {{"spec", {{"capacityGbps", 1}}},
                                     {"status", {{"jobCount", 2}, {"plannedUtilization", 0.5}}}});
  ASSERT_TRUE(p2);
  EXPECT_EQ((*p2)["spec"]["capacityGbps"], 40);
  EXPECT_EQ((*p2)["status"]["jobCount"], 2);
  auto p3 = client.MergePatchStatus(ls, "", "rack-a-up", {{"status", {{"jobCount", 1}}}});
  ASSERT_TRUE(p3);
  EXPECT_EQ((*p3)["status"]["plannedUtilization"], 0.5) << "merge keeps untouched keys";
  EXPECT_EQ((*p3)["status"]["jobCount"], 1);
  EXPECT_GT(std::stoll((*p3)["metadata"]["resourceVersion"].get<std::string>()),
            std::stoll((*p2)["metadata"]["resourceVersion"].get<std::string>()));

  // A stale resourceVersion precondition is a conflict, returned as a value.
  auto stale = client.MergePatch(ls, "", "rack-a-up",
                                 {{"metadata", {{"resourceVersion", "1"}}}, {"spec", {}}});
  ASSERT_FALSE(stale);
  EXPECT_TRUE(stale.GetError().Conflict());

  int merge_patches = 0;
  for (const auto& r : api.Requests()) {
    if (r.rfind("PATCH ", 0) == 0) {
      EXPECT_NE(r.find("application/merge-patch+json"), std::string::npos) << r;
      ++merge_patches;
    }
  }
  EXPECT_EQ(merge_patches, 4);
  const auto requests = api.Requests();
  EXPECT_NE(std::find(requests.begin(), requests.end(),
                      "PATCH /apis/metronome.dev/v1alpha1/linkschedules/rack-a-up/status "
                      "application/merge-patch+json"),
            requests.end());

  ASSERT_TRUE(client.Delete(ls, "", "rack-a-up"));
  EXPECT_TRUE(client.Get(ls, "", "rack-a-up").GetError().NotFound());
}

TEST(KubeClient, TransientFailuresAreRetriedWithBackoff) {
  FakeApiServer api;
  api.Put("nodes", "", Node("n1", "a"));
  Client client(ClientConfigFor(api));
  api.FailNext(2, 503);
  auto ok = client.Get(resources::Nodes(), "", "n1");
  ASSERT_TRUE(ok) << ok.GetError().ToString();
  EXPECT_EQ(client.Retries(), 2u);

  api.FailNext(10, 500);
  auto bad = client.Get(resources::Nodes(), "", "n1");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.GetError().status, 500);
  EXPECT_EQ(client.Retries(), 4u) << "max_attempts = 3: two more retries";

  api.FailNext(0, 500);
  const auto before = client.Requests();
  EXPECT_TRUE(client.Get(resources::Nodes(), "", "nope").GetError().NotFound());
  EXPECT_EQ(client.Requests(), before + 1) << "404 is not retried";
}

TEST(KubeClient, NoServerIsABoundedTransportError) {
  // A port nobody listens on: bind one, read its number, close it.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  ClientConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  cfg.max_attempts = 2;
  cfg.backoff_initial = 5ms;
  cfg.connect_timeout = 200ms;
  Client client(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client.List(resources::Nodes(), "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.GetError().status, 0);
  EXPECT_TRUE(r.GetError().Transient());
  EXPECT_EQ(client.Retries(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);

  ClientConfig nonsense;
  nonsense.server = "ftp//nonsense";
  Client bad(nonsense);
  EXPECT_FALSE(bad.List(resources::Nodes(), ""));
}

TEST(KubeClient, WatchStreamsEventsInOrderFromAListVersion) {
  FakeApiServer api;
  api.Put("nodes", "", Node("n1", "rack-a"));
  Client client(ClientConfigFor(api));
  auto list = client.List(resources::Nodes(), "");
  ASSERT_TRUE(list);
  const std::string rv = (*list)["metadata"]["resourceVersion"];

  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    api.Put("nodes", "", Node("n2", "rack-b"));
    Json n1 = Node("n1", "rack-c");
    api.Put("nodes", "", n1);
    api.Put("trafficprofiles", "default", Profile("x", "x", "bert"));  // another resource
    api.Remove("nodes", "", "n2");
  });
  std::vector<std::pair<std::string, std::string>> seen;
  std::vector<int64_t> versions;
  WatchOptions w;
  w.resource_version = rv;
  auto end = client.Watch(resources::Nodes(), "", w, [&](const WatchEvent& ev) {
    seen.emplace_back(ev.type, ev.object["metadata"]["name"].get<std::string>());
    versions.push_back(std::stoll(ev.object["metadata"]["resourceVersion"].get<std::string>()));
    return seen.size() < 3;
  });
  writer.join();
  ASSERT_TRUE(end) << end.GetError().ToString();
  EXPECT_TRUE(end->stopped);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], (std::pair<std::string, std::string>{"ADDED", "n2"}));
  EXPECT_EQ(seen[1], (std::pair<std::string, std::string>{"MODIFIED", "n1"}));
  EXPECT_EQ(seen[2], (std::pair<std::string, std::string>{"DELETED", "n2"}));
  EXPECT_TRUE(std::is_sorted(versions.begin(), versions.end()));
  EXPECT_EQ(end->resource_version, std::to_string(versions.back()));
}

TEST(KubeClient, WatchEndsAtServerTimeoutWithABookmarkAndStopsOnRequest) {
  FakeApiServer api;
  Client client(ClientConfigFor(api));
  WatchOptions w;
  w.resource_version = std::to_string(api.ResourceVersion());
  w.timeout_seconds = 1;
  std::vector<std::string> types;
  auto end = client.Watch(resources::Nodes(), "", w, [&](const WatchEvent& ev) {
    types.push_back(ev.type);
    return true;
  });
  ASSERT_TRUE(end) << end.GetError().ToString();
  EXPECT_FALSE(end->stopped);
  ASSERT_EQ(types, std::vector<std::string>{"BOOKMARK"});

  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    stop = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  w.timeout_seconds = 60;
  auto stopped = client.Watch(
      resources::Nodes(), "", w, [](const WatchEvent&) { return true; }, &stop);
  stopper.join();
  ASSERT_TRUE(stopped) << stopped.GetError().ToString();
  EXPECT_TRUE(stopped->stopped);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// A stop requested while the watch is being set up (the scheduler told to stop just after it
// started its watches): closing the connection before it is open closes nothing, so the watch
// must still end at once rather than at the server's timeout.
TEST(KubeClient, WatchStoppedBeforeItConnectsEndsAtOnce) {
  FakeApiServer api;
  Client client(ClientConfigFor(api));
  WatchOptions w;
  w.resource_version = std::to_string(api.ResourceVersion());
  w.timeout_seconds = 60;
  for (int i = 0; i < 5; ++i) {
    std::atomic<bool> stop{true};
    const auto t0 = std::chrono::steady_clock::now();
    auto stopped = client.Watch(
        resources::Nodes(), "", w, [](const WatchEvent&) { return true; }, &stop);
    ASSERT_TRUE(stopped) << stopped.GetError().ToString();
    EXPECT_TRUE(stopped->stopped);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  }
}

TEST(KubeClient, TooOldResourceVersionIsGone) {
  FakeApiServer api;
  api.Put("nodes", "", Node("n1", "a"));
  const std::string old_rv = std::to_string(api.ResourceVersion());
  api.Put("nodes", "", Node("n2", "a"));
  api.Compact();
  Client client(ClientConfigFor(api));
  WatchOptions w;
  w.resource_version = old_rv;
  auto end = client.Watch(resources::Nodes(), "", w, [](const WatchEvent&) { return true; });
  ASSERT_FALSE(end);
  EXPECT_TRUE(end.GetError().Gone());
  EXPECT_EQ(end.GetError().reason, "Expired");
}

TEST(KubeClient, ListWatchRelistsAfterGoneAndKeepsACacheCurrent) {
  FakeApiServer api;
  api.Put("nodes", "", Node("n1", "a"));
  Client client(ClientConfigFor(api));
  std::mutex mu;
  std::map<std::string, std::string> cache;  // node → zone
  std::atomic<int> lists{0};
  std::atomic<int> gone{0};
  std::atomic<bool> stop{false};
  ListWatchHandlers h;
  const auto zone = [](const Json& n) {
    return n["metadata"]["labels"]["topology.kubernetes.io/zone"].get<std::string>();
  };
  h.on_list = [&](const Json& list) {
    std::lock_guard lock(mu);
    cache.clear();
    for (const auto& n : list["items"]) cache[n["metadata"]["name"]] = zone(n);
    ++lists;
  };
  h.on_event = [&](const WatchEvent& ev) {
    std::lock_guard lock(mu);
    if (ev.type == "ADDED" || ev.type == "MODIFIED") {
      cache[ev.object["metadata"]["name"]] = zone(ev.object);
    } else if (ev.type == "DELETED") {
      cache.erase(ev.object["metadata"]["name"].get<std::string>());
    }
  };
  h.on_error = [&](const Error& e) {
    if (e.Gone()) ++gone;
  };
  std::thread loop([&] { ListWatch(client, resources::Nodes(), "", {}, h, stop); });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop, loop};
  const auto wait_for = [&](auto pred) {
    for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(10ms);
    return pred();
  };
  ASSERT_TRUE(wait_for([&] { return lists.load() == 1 && api.OpenWatches() == 1; }));
  api.Put("nodes", "", Node("n2", "b"));
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard lock(mu);
    return cache.count("n2") == 1;
  }));
  // Changes the client has not seen yet are compacted away and the stream ends: the re-watch
  // from the client's last version gets 410 Gone, and it relists.
  api.PauseWatches(true);
  api.Put("nodes", "", Node("n3", "c"));
  api.Remove("nodes", "", "n1");
  api.Compact();
  api.PauseWatches(false);
  ASSERT_TRUE(wait_for([&] { return lists.load() == 2; }));
  EXPECT_EQ(gone.load(), 1);
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard lock(mu);
    return cache.size() == 2 && cache.count("n1") == 0 && cache.count("n3") == 1;
  }));
  // A dropped stream without compaction resumes from the last version, no relist.
  api.CloseWatches();
  api.Put("nodes", "", Node("n4", "d"));
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard lock(mu);
    return cache.count("n4") == 1;
  }));
  EXPECT_EQ(lists.load(), 2);
}

TEST(KubeTypes, TrafficProfilesParseAndBadOnesAreSkipped) {
  FakeApiServer api;
  api.Put("trafficprofiles", "default", Profile("bert-finetune", "bert-finetune", "bert"));
  Json custom = {
      {"metadata", {{"name", "custom-cnn"}, {"namespace", "default"}}},
      {"spec",
       {{"jobName", "custom-cnn"}, {"periodMs", 240}, {"gradientMB", 97.5}, {"priority", "low"}}},
      {"status", {{"measuredPeriodMs", 251.5}, {"bytesPerPhase", 102236160}}}};
  api.Put("trafficprofiles", "default", custom);
  api.Put("trafficprofiles", "default",
          {{"metadata", {{"name", "broken"}}}, {"spec", {{"jobName", "x"}}}});
  Client client(ClientConfigFor(api));
  int skipped = 0;
  auto profiles = ListTrafficProfiles(client, "", &skipped);
  ASSERT_TRUE(profiles) << profiles.GetError().ToString();
  EXPECT_EQ(skipped, 1);
  ASSERT_EQ(profiles->size(), 2u);
  const auto& bert = (*profiles)[0];
  EXPECT_EQ(bert.job_name, "bert-finetune");
  EXPECT_EQ(bert.model, "bert");
  EXPECT_EQ(bert.gpu_type, "A100");
  const auto& cnn = (*profiles)[1];
  EXPECT_EQ(cnn.job_name, "custom-cnn");
  EXPECT_EQ(cnn.period_ms, 240.0);
  EXPECT_EQ(cnn.gradient_mb, 97.5);
  EXPECT_EQ(cnn.priority, "low");
  EXPECT_EQ(cnn.measured_period_ms, 251.5);
  EXPECT_EQ(cnn.bytes_per_phase, 102236160);

  auto bad = ParseTrafficProfile(
      {{"metadata", {{"name", "p"}}},
       {"spec", {{"jobName", "j"}, {"model", "bert"}, {"priority", "urgent"}}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.GetError().message.find("spec.priority"), std::string::npos);
}

TEST(KubeTypes, NodesAndRackLabels) {
  FakeApiServer api;
  api.Put("nodes", "", Node("gpu-1", "rack-a"));
  Json bare = Node("gpu-2", "x");
  bare["metadata"]["labels"].erase("topology.kubernetes.io/zone");
  bare["metadata"]["labels"]["metronome.dev/rack"] = "rack-b";
  bare["spec"]["unschedulable"] = true;
  api.Put("nodes", "", bare);
  Client client(ClientConfigFor(api));
  auto nodes = ListNodes(client);
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  const std::vector<std::string> keys{"metronome.dev/rack", "topology.kubernetes.io/zone"};
  EXPECT_EQ(RackOf((*nodes)[0], keys), "rack-a");
  EXPECT_EQ(RackOf((*nodes)[1], keys), "rack-b");
  EXPECT_TRUE((*nodes)[1].unschedulable);
  auto selected = ListNodes(client, "topology.kubernetes.io/zone=rack-a");
  ASSERT_TRUE(selected);
  EXPECT_EQ(selected->size(), 1u);
}

TEST(KubeTypes, ApplyLinkScheduleCreatesOnceThenWritesStatus) {
  FakeApiServer api;
  Client client(ClientConfigFor(api));
  EXPECT_EQ(LinkObjectName("r0/up"), "r0-up");
  EXPECT_EQ(LinkObjectName("GPU_Node.1/up"), "gpu-node.1-up");
  EXPECT_EQ(LinkObjectName("//"), "link");

  LinkScheduleSpec spec{"r0/up", 100, "rack-uplink", {"r0n0", "r0n1"}};
  LinkScheduleStatus status;
  status.plan_version = 3;
  status.hyperperiod_ms = 400;
  status.planned_utilization = 1.2;  // clamped to the schema's maximum
  status.min_cushion_ms = 6.5;
  status.jobs = {{"bert", 2, 200, 0, 90, 8, 0, false}, {"cnn", 0, 400, 98, 95, 5, 0.05, false}};
  ASSERT_TRUE(ApplyLinkSchedule(client, spec, status));
  auto obj = api.Object("linkschedules", "", "r0-up");
  ASSERT_TRUE(obj);
  EXPECT_EQ((*obj)["spec"]["capacityGbps"], 100);
  EXPECT_EQ((*obj)["status"]["jobCount"], 2);
  EXPECT_EQ((*obj)["status"]["plannedUtilization"], 1.0);
  EXPECT_EQ((*obj)["status"]["jobs"][1]["offsetMs"], 98);
  EXPECT_TRUE((*obj)["status"]["measuredUtilization"].is_null() ||
              !(*obj)["status"].contains("measuredUtilization"));
  auto parsed = ParseLinkScheduleStatus((*obj)["status"]);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->jobs.size(), 2u);
  EXPECT_EQ(parsed->jobs[0].name, "bert");

  // An operator edits the spec; the next sync keeps it and replaces the jobs list.
  ASSERT_TRUE(client.MergePatch(resources::LinkSchedules(), "", "r0-up",
                                {{"spec", {{"capacityGbps", 25}}}}));
  status.jobs = {{"cnn", 0, 400, 10, 95, 5, 0, false}};
  status.measured_utilization = 0.4;
  ASSERT_TRUE(ApplyLinkSchedule(client, spec, status));
  obj = api.Object("linkschedules", "", "r0-up");
  EXPECT_EQ((*obj)["spec"]["capacityGbps"], 25);
  ASSERT_EQ((*obj)["status"]["jobs"].size(), 1u);
  EXPECT_EQ((*obj)["status"]["jobs"][0]["name"], "cnn");
  EXPECT_EQ((*obj)["status"]["measuredUtilization"], 0.4);
  int creates = 0;
  for (const auto& r : api.Requests()) creates += r.rfind("POST ", 0) == 0 ? 1 : 0;
  EXPECT_EQ(creates, 1);

  // Errors come back as values, before asking the server when the spec cannot be valid.
  auto invalid = ApplyLinkSchedule(client, {"r9/up", 0, "", {}}, status);
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.GetError().reason, "Invalid");
  EXPECT_FALSE(api.Object("linkschedules", "", "r9-up"));
  api.FailNext(100, 403);
  auto denied = ApplyLinkSchedule(client, spec, status);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.GetError().status, 403);
}

TEST(KubeTypes, LinkScheduleWriterSkipsUnchangedLinks) {
  FakeApiServer api;
  Client client(ClientConfigFor(api));
  LinkScheduleWriter writer(client);
  LinkScheduleStatus a;
  a.plan_version = 1;
  a.jobs = {{"bert", 2, 200, 0, 90, 8, 0, false}};
  LinkScheduleStatus b = a;
  std::vector<std::pair<LinkScheduleSpec, LinkScheduleStatus>> links = {
      {{"r0/up", 100, "rack-uplink", {}}, a}, {{"r1/up", 100, "rack-uplink", {}}, b}};
  auto first = writer.Write(links);
  EXPECT_EQ(first.written, 2);
  EXPECT_EQ(first.failed, 0);
  links[1].second.last_update = "2030-01-01T00:00:00Z";  // only the timestamp differs
  auto second = writer.Write(links);
  EXPECT_EQ(second.written, 0);
  EXPECT_EQ(second.unchanged, 2);
  links[0].second.jobs[0].offset_ms = 10;
  api.FailNext(100, 403);
  auto third = writer.Write(links);
  EXPECT_EQ(third.failed, 1);
  EXPECT_EQ(third.first_error.status, 403);
  api.FailNext(0, 403);
  auto fourth = writer.Write(links);
  EXPECT_EQ(fourth.written, 1) << "a failed link is written again";
  EXPECT_EQ((*api.Object("linkschedules", "", "r0-up"))["status"]["jobs"][0]["offsetMs"], 10);
}

// What the shims measured goes into the TrafficProfile's status (the subresource), and again
// only when a figure moved.
TEST(KubeTypes, TrafficProfileStatusIsWrittenWhenItsFiguresMove) {
  FakeApiServer api;
  api.Put("trafficprofiles", "team-a",
          {{"metadata", {{"name", "bert"}, {"namespace", "team-a"}}},
           {"spec", {{"jobName", "bert-finetune"}, {"model", "bert"}}}});
  Client client(ClientConfigFor(api));
  TrafficProfileStatusWriter writer(client, 200ms);
  std::vector<TrafficProfileStatus> statuses = {{"team-a", "bert", 250.0, 80.0, 440'000'000, 4}};
  EXPECT_EQ(writer.Write(statuses).written, 1);
  const Json written = (*api.Object("trafficprofiles", "team-a", "bert"))["status"];
  EXPECT_EQ(written["measuredPeriodMs"], 250.0);
  EXPECT_EQ(written["measuredCommMs"], 80.0);
  EXPECT_EQ(written["bytesPerPhase"], 440'000'000);
  EXPECT_EQ(written["reportingRanks"], 4);
  EXPECT_TRUE(written.contains("lastUpdate"));
  EXPECT_EQ((*api.Object("trafficprofiles", "team-a", "bert"))["spec"]["jobName"], "bert-finetune");
  EXPECT_EQ(writer.Write(statuses).unchanged, 1);
  statuses[0].measured_period_ms = 260.0;
  EXPECT_EQ(writer.Write(statuses).unchanged, 1) << "written less than 200 ms ago";
  std::this_thread::sleep_for(250ms);
  EXPECT_EQ(writer.Write(statuses).written, 1);
  // And the parser reads it back as the job's profile for later runs.
  const auto parsed = ParseTrafficProfile(*api.Object("trafficprofiles", "team-a", "bert"));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->measured_period_ms, 260.0);
  statuses[0].name = "missing";
  const auto failed = writer.Write(statuses);
  EXPECT_EQ(failed.failed, 1);
  EXPECT_TRUE(failed.first_error.NotFound());
}

TEST(KubeCache, FollowsListAndWatchAndFeedsNodeLabels) {
  FakeApiServer api;
  api.Put("nodes", "", Node("n1", "rack-a"));
  Client client(ClientConfigFor(api));
  std::atomic<int> changes{0};
  Cache nodes(client, resources::Nodes(), "", {}, [&] { ++changes; });
  nodes.Start();
  const auto wait_for = [&](auto pred) {
    for (int i = 0; i < 500 && !pred(); ++i) std::this_thread::sleep_for(10ms);
    return pred();
  };
  ASSERT_TRUE(wait_for([&] { return nodes.Synced(); }));
  api.Put("nodes", "", Node("n2", "rack-b"));
  ASSERT_TRUE(wait_for([&] { return nodes.Objects().size() == 2; }));
  api.Put("nodes", "", Node("n1", "rack-c"));
  ASSERT_TRUE(wait_for([&] {
    const auto labels = NodeLabelsOf(nodes);
    return labels.count("n1") == 1 && labels.at("n1").at("topology.kubernetes.io/zone") == "rack-c";
  }));
  api.Remove("nodes", "", "n2");
  ASSERT_TRUE(wait_for([&] { return nodes.Objects().size() == 1; }));
  EXPECT_GE(changes.load(), 4);
  nodes.Stop();
  EXPECT_EQ(nodes.Lists(), 1u);
  EXPECT_EQ(nodes.Errors(), 0u);
}

// An object whose name or namespace is no string (a broken server or proxy) has no key: the
// cache leaves it out instead of throwing on its watch thread.
TEST(KubeCache, ObjectsWithoutAStringNameHaveNoKey) {
  EXPECT_EQ(Cache::KeyOf({{"metadata", {{"name", "n1"}}}}), "n1");
  EXPECT_EQ(Cache::KeyOf({{"metadata", {{"name", "p"}, {"namespace", "team"}}}}), "team/p");
  EXPECT_EQ(Cache::KeyOf({{"metadata", {{"name", 5}}}}), "");
  EXPECT_EQ(Cache::KeyOf({{"metadata", {{"name", "p"}, {"namespace", Json::array()}}}}), "");
  EXPECT_EQ(Cache::KeyOf({{"metadata", 3}}), "");
  EXPECT_EQ(Cache::KeyOf(Json::array()), "");
}

// HTTPS with the cluster's CA, as in a pod: a self-signed certificate for 127.0.0.1 made with
// the openssl command line tool (skipped when it is not installed).
TEST(KubeClient, HttpsVerifiesTheServerWithTheCa) {
  const auto dir = TempDir("tls");
  const std::string cert = (dir / "ca.crt").string();
  const std::string key = (dir / "tls.key").string();
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -keyout " + key + " -out " +
                          cert +
                          " -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
                          ">/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl is not available";
  httplib::SSLServer server(cert.c_str(), key.c_str());
  ASSERT_TRUE(server.is_valid());
  server.Get("/api/v1/nodes", [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer t") {
      res.status = 401;
      return;
    }
    res.set_content(R"({"kind":"NodeList","metadata":{"resourceVersion":"7"},"items":[]})",
                    "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });

  ClientConfig cfg;
  cfg.server = "https://127.0.0.1:" + std::to_string(port);
  cfg.token = "t";
  cfg.ca_file = cert;
  cfg.max_attempts = 1;
  Client client(cfg);
  auto list = client.List(resources::Nodes(), "");
  EXPECT_TRUE(list) << list.GetError().ToString();
  if (list) {
    EXPECT_EQ((*list)["metadata"]["resourceVersion"], "7");
  }

  // Without the CA the certificate is not trusted: an error value, no exception.
  cfg.ca_file = (dir / "missing.crt").string();
  Client untrusting(cfg);
  auto refused = untrusting.List(resources::Nodes(), "");
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.GetError().status, 0);

  server.stop();
  t.join();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace metronome::kube
