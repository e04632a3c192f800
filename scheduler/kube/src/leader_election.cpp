#include "metronome/kube/leader_election.hpp"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace metronome::kube {

namespace {

using Json = nlohmann::json;
using std::chrono::steady_clock;

std::string StringAt(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t IntAt(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

int64_t WholeSeconds(std::chrono::milliseconds d) {
  return (d.count() + 999) / 1000;
}

// Sleeps for `d` or until `stop`; true when stopped.
bool WaitOrStop(const std::stop_token& stop, std::chrono::milliseconds d) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  return cv.wait_for(lock, stop, d, [] { return false; }) || stop.stop_requested();
}

}  // namespace

std::string CheckLeaderElection(const LeaderElectionConfig& c) {
  if (c.identity.empty()) return "identity is empty";
  if (c.name.empty() || c.namespace_name.empty()) return "lease name and namespace must be set";
  if (c.lease_duration < std::chrono::seconds(1)) return "lease duration must be at least 1 s";
  if (c.renew_deadline >= c.lease_duration) {
    return "renew deadline must be shorter than the lease duration";
  }
  if (c.retry_period.count() <= 0 || c.retry_period >= c.renew_deadline) {
    return "retry period must be positive and shorter than the renew deadline";
  }
  return "";
}

std::string MicroTime(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(us.count() / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(us.count() % 1'000'000));
  return buf;
}

LeaderElector::LeaderElector(Client& client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {}

Result<bool> LeaderElector::TryAcquireOrRenew() {
  const std::string now_text = MicroTime(std::chrono::system_clock::now());
  Json spec = {{"holderIdentity", config_.identity},
               {"leaseDurationSeconds", WholeSeconds(config_.lease_duration)},
               {"acquireTime", now_text},
               {"renewTime", now_text},
               {"leaseTransitions", 0}};
  auto got = client_.Get(resources::Leases(), config_.namespace_name, config_.name);
  if (!got) {
    if (!got.GetError().NotFound()) return got.GetError();
    const Json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.name}, {"namespace", config_.namespace_name}}},
        {"spec", spec}};
    return Write(lease, false);
  }
  // A record that is no object (a broken server or proxy) reads as an empty one, not a throw.
  const Json old = got->is_object() ? got->value("spec", Json::object()) : Json::object();
  if (old != observed_spec_) {  // the record moved: its holder is alive as of now
    observed_spec_ = old;
    observed_at_ = steady_clock::now();
  }
  const std::string holder = StringAt(old, "holderIdentity");
  const bool ours = holder == config_.identity;
  const int64_t held_s = IntAt(old, "leaseDurationSeconds");
  const auto duration = held_s > 0 ? std::chrono::milliseconds(held_s * 1000)
                                   : std::chrono::milliseconds(config_.lease_duration);
  if (!holder.empty() && !ours && steady_clock::now() < observed_at_ + duration) return false;
  if (ours) {
    const std::string acquired = StringAt(old, "acquireTime");
    spec["acquireTime"] = acquired.empty() ? now_text : acquired;
    spec["leaseTransitions"] = IntAt(old, "leaseTransitions");
  } else {
    spec["leaseTransitions"] = IntAt(old, "leaseTransitions") + 1;
  }
  // The resourceVersion read makes the write conditional: a racing candidate gets 409.
  const Json patch = {
      {"metadata",
       {{"resourceVersion", StringAt(got->value("metadata", Json::object()), "resourceVersion")}}},
      {"spec", spec}};
  return Write(patch, true);
}

Result<bool> LeaderElector::Write(const Json& body, bool existing) {
  const auto sent = steady_clock::now();  // the record changes no earlier than this
  auto written =
      existing ? client_.MergePatch(resources::Leases(), config_.namespace_name, config_.name, body)
               : client_.Create(resources::Leases(), config_.namespace_name, body);
  if (!written) {
    if (written.GetError().Conflict()) return false;  // another candidate wrote first
    return written.GetError();
  }
  observed_spec_ = written->value("spec", Json::object());
  observed_at_ = steady_clock::now();
  const bool ours = StringAt(observed_spec_, "holderIdentity") == config_.identity;
  if (ours) renewed_at_ = sent;
  return ours;
}

bool LeaderElector::Acquire(const std::stop_token& stop) {
  std::string last_error;
  while (!stop.stop_requested()) {
    const auto r = TryAcquireOrRenew();
    if (r && *r) return true;
    if (!r && r.GetError().ToString() != last_error) {
      last_error = r.GetError().ToString();
      spdlog::warn("leader election: lease {}/{}: {}", config_.namespace_name, config_.name,
                   last_error);
    }
    if (WaitOrStop(stop, config_.retry_period)) break;
  }
  return false;
}

bool LeaderElector::Renew(const std::stop_token& stop) {
  while (!WaitOrStop(stop, config_.retry_period)) {
    const auto r = TryAcquireOrRenew();
    if (r && *r) continue;
    if (r) {
      spdlog::error("leader election: lease {}/{} now held by {}", config_.namespace_name,
                    config_.name, StringAt(observed_spec_, "holderIdentity"));
      return false;
    }
    spdlog::warn("leader election: renewing lease {}/{}: {}", config_.namespace_name, config_.name,
                 r.GetError().ToString());
    if (!WithinRenewDeadline()) {
      spdlog::error("leader election: lease {}/{} not renewed for {} ms", config_.namespace_name,
                    config_.name, config_.renew_deadline.count());
      return false;
    }
  }
  return true;
}

bool LeaderElector::WithinRenewDeadline() const {
  return steady_clock::now() - renewed_at_ < config_.renew_deadline;
}

Status LeaderElector::Release() {
  auto got = client_.Get(resources::Leases(), config_.namespace_name, config_.name);
  if (!got) return got.GetError();
  const Json old = got->is_object() ? got->value("spec", Json::object()) : Json::object();
  if (StringAt(old, "holderIdentity") != config_.identity) return Ok{};
  const std::string now_text = MicroTime(std::chrono::system_clock::now());
  const Json patch = {
      {"metadata",
       {{"resourceVersion", StringAt(got->value("metadata", Json::object()), "resourceVersion")}}},
      {"spec",
       {{"holderIdentity", ""},
        {"leaseDurationSeconds", 1},
        {"acquireTime", now_text},
        {"renewTime", now_text}}}};
  auto written =
      client_.MergePatch(resources::Leases(), config_.namespace_name, config_.name, patch);
  if (!written) return written.GetError();
  return Ok{};
}

}  // namespace metronome::kube
