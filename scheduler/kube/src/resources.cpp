// Typed helpers for TrafficProfile, Node and LinkSchedule objects (see resources.hpp).
#include "metronome/kube/resources.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>

namespace metronome::kube {

namespace {

const Json* Field(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto& members = obj.get_ref<const Json::object_t&>();
  const auto it = members.find(key);
  if (it == members.end() || it->second.is_null()) return nullptr;
  return &it->second;
}

std::string String(const Json& obj, const char* key) {
  const Json* f = Field(obj, key);
  return f != nullptr && f->is_string() ? f->get<std::string>() : std::string();
}

std::optional<double> Number(const Json& obj, const char* key) {
  const Json* f = Field(obj, key);
  if (f == nullptr || !f->is_number()) return std::nullopt;
  const double v = f->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

double Round3(double v) {
  return std::round(v * 1000.0) / 1000.0;
}

}  // namespace

Result<TrafficProfile> ParseTrafficProfile(const Json& object) {
  const Json* meta = Field(object, "metadata");
  const Json* spec = Field(object, "spec");
  if (meta == nullptr || !meta->is_object()) {
    return Error{0, "Invalid", "TrafficProfile without metadata"};
  }
  TrafficProfile p;
  p.name = String(*meta, "name");
  p.namespace_name = String(*meta, "namespace");
  const std::string who = "TrafficProfile " + p.namespace_name + "/" + p.name;
  if (spec == nullptr || !spec->is_object()) return Error{0, "Invalid", who + ": no spec"};
  p.job_name = String(*spec, "jobName");
  if (p.job_name.empty()) return Error{0, "Invalid", who + ": spec.jobName is required"};
  p.model = String(*spec, "model");
  p.gpu_type = String(*spec, "gpuType");
  p.period_ms = Number(*spec, "periodMs");
  p.gradient_mb = Number(*spec, "gradientMB");
  p.priority_class_name = String(*spec, "priorityClassName");
  p.priority = String(*spec, "priority");
  if (!p.priority.empty() && p.priority != "high" && p.priority != "normal" &&
      p.priority != "low") {
    return Error{0, "Invalid", who + ": spec.priority must be high, normal or low"};
  }
  if (p.period_ms && *p.period_ms <= 0) return Error{0, "Invalid", who + ": spec.periodMs <= 0"};
  if (p.gradient_mb && *p.gradient_mb <= 0) {
    return Error{0, "Invalid", who + ": spec.gradientMB <= 0"};
  }
  if (p.model.empty() && !(p.period_ms && p.gradient_mb)) {
    return Error{0, "Invalid", who + ": needs spec.model or spec.periodMs and spec.gradientMB"};
  }
  if (const Json* status = Field(object, "status"); status != nullptr) {
    p.measured_period_ms = Number(*status, "measuredPeriodMs");
    p.measured_comm_ms = Number(*status, "measuredCommMs");
    if (const auto b = Number(*status, "bytesPerPhase"); b && *b >= 0) {
      p.bytes_per_phase = static_cast<int64_t>(*b);
    }
  }
  return p;
}

Result<std::vector<TrafficProfile>> ListTrafficProfiles(Client& client, const std::string& ns,
                                                        int* skipped) {
  auto list = client.List(resources::TrafficProfiles(), ns);
  if (!list) return list.GetError();
  std::vector<TrafficProfile> out;
  int bad = 0;
  for (const Json& item : (*list)["items"]) {
    auto p = ParseTrafficProfile(item);
    if (p) {
      out.push_back(std::move(*p));
    } else {
      ++bad;
    }
  }
  if (skipped != nullptr) *skipped = bad;
  return out;
}

NodeInfo ParseNode(const Json& object) {
  NodeInfo n;
  if (const Json* meta = Field(object, "metadata"); meta != nullptr) {
    n.name = String(*meta, "name");
    if (const Json* labels = Field(*meta, "labels"); labels != nullptr && labels->is_object()) {
      for (const auto& [k, v] : labels->items()) {
        if (v.is_string()) n.labels.emplace(k, v.get<std::string>());
      }
    }
  }
  if (const Json* spec = Field(object, "spec"); spec != nullptr) {
    if (const Json* u = Field(*spec, "unschedulable"); u != nullptr && u->is_boolean()) {
      n.unschedulable = u->get<bool>();
    }
  }
  return n;
}

Result<std::vector<NodeInfo>> ListNodes(Client& client, const std::string& label_selector) {
  ListOptions o;
  o.label_selector = label_selector;
  auto list = client.List(resources::Nodes(), "", o);
  if (!list) return list.GetError();
  std::vector<NodeInfo> out;
  for (const Json& item : (*list)["items"]) {
    NodeInfo n = ParseNode(item);
    if (!n.name.empty()) out.push_back(std::move(n));
  }
  return out;
}

std::string RackOf(const NodeInfo& node, const std::vector<std::string>& rack_labels) {
  for (const std::string& key : rack_labels) {
    const auto it = node.labels.find(key);
    if (it != node.labels.end() && !it->second.empty()) return it->second;
  }
  return {};
}

std::string LinkObjectName(const std::string& link_name) {
  // RFC 1123 subdomain: lower-case alphanumerics, '-' and '.', alphanumeric at both ends.
  std::string out;
  for (const char ch : link_name) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      out.push_back(static_cast<char>(std::tolower(c)));
    } else if (c == '.' || c == '-') {
      out.push_back(ch);
    } else {
      out.push_back('-');
    }
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(0, 1);
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  if (out.size() > 253) out.resize(253);
  if (out.empty()) out = "link";
  return out;
}

Json ToJson(const LinkScheduleSpec& spec) {
  Json s = {{"capacityGbps", spec.capacity_gbps}};
  if (!spec.kind.empty()) s["kind"] = spec.kind;
  if (!spec.nodes.empty()) s["nodes"] = spec.nodes;
  return s;
}

Json ToJson(const LinkScheduleStatus& status) {
  Json jobs = Json::array();
  for (const LinkScheduleJob& j : status.jobs) {
    jobs.push_back({{"name", j.name},
                    {"priority", j.priority},
                    {"periodMs", Round3(j.period_ms)},
                    {"offsetMs", Round3(std::max(0.0, j.offset_ms))},
                    {"windowMs", Round3(j.window_ms)},
                    {"lateSlackMs", Round3(std::max(0.0, j.late_slack_ms))},
                    {"stretch", Round3(std::max(0.0, j.stretch))},
                    {"bestEffort", j.best_effort}});
  }
  Json s = {{"planVersion", std::max<int64_t>(0, status.plan_version)},
            {"hyperperiodMs", Round3(std::max(0.0, status.hyperperiod_ms))},
            {"plannedUtilization", Round3(std::clamp(status.planned_utilization, 0.0, 1.0))},
            {"minCushionMs", Round3(std::max(0.0, status.min_cushion_ms))},
            {"jobCount", static_cast<int64_t>(status.jobs.size())},
            {"lastUpdate", status.last_update.empty() ? NowRfc3339() : status.last_update},
            {"jobs", jobs}};
  // null removes a stale value (merge-patch semantics) when nothing was measured.
  s["measuredUtilization"] = status.measured_utilization
                                 ? Json(Round3(std::max(0.0, *status.measured_utilization)))
                                 : Json(nullptr);
  return s;
}

Result<LinkScheduleStatus> ParseLinkScheduleStatus(const Json& status) {
  if (!status.is_object()) return Error{0, "Invalid", "LinkSchedule status is not an object"};
  LinkScheduleStatus s;
  s.plan_version = static_cast<int64_t>(Number(status, "planVersion").value_or(0));
  s.hyperperiod_ms = Number(status, "hyperperiodMs").value_or(0);
  s.planned_utilization = Number(status, "plannedUtilization").value_or(0);
  s.measured_utilization = Number(status, "measuredUtilization");
  s.min_cushion_ms = Number(status, "minCushionMs").value_or(0);
  s.last_update = String(status, "lastUpdate");
  if (const Json* jobs = Field(status, "jobs"); jobs != nullptr) {
    if (!jobs->is_array()) return Error{0, "Invalid", "LinkSchedule status.jobs is not a list"};
    for (const Json& j : *jobs) {
      LinkScheduleJob job;
      job.name = String(j, "name");
      if (job.name.empty()) return Error{0, "Invalid", "LinkSchedule status.jobs[] without name"};
      job.priority = static_cast<int>(Number(j, "priority").value_or(0));
      job.period_ms = Number(j, "periodMs").value_or(0);
      job.offset_ms = Number(j, "offsetMs").value_or(0);
      job.window_ms = Number(j, "windowMs").value_or(0);
      job.late_slack_ms = Number(j, "lateSlackMs").value_or(0);
      job.stretch = Number(j, "stretch").value_or(0);
      if (const Json* b = Field(j, "bestEffort"); b != nullptr && b->is_boolean()) {
        job.best_effort = b->get<bool>();
      }
      s.jobs.push_back(std::move(job));
    }
  }
  return s;
}

Status ApplyLinkSchedule(Client& client, const LinkScheduleSpec& spec,
                         const LinkScheduleStatus& status) {
  const Resource r = resources::LinkSchedules();
  const std::string name = LinkObjectName(spec.name);
  if (!(spec.capacity_gbps > 0) || spec.capacity_gbps > 100000) {
    // The CRD requires 0 < capacityGbps <= 100000: say so here rather than as a 422.
    return Error{0, "Invalid",
                 "LinkSchedule " + name + ": capacityGbps must be in (0, 100000], not " +
                     std::to_string(spec.capacity_gbps)};
  }
  auto existing = client.Get(r, "", name);
  if (!existing) {
    if (!existing.GetError().NotFound()) return existing.GetError();
    const Json object = {
        {"apiVersion", "metronome.dev/v1alpha1"},
        {"kind", "LinkSchedule"},
        {"metadata",
         {{"name", name}, {"labels", {{"app.kubernetes.io/managed-by", "metronome-scheduler"}}}}},
        {"spec", ToJson(spec)}};
    auto created = client.Create(r, "", object);
    // Conflict: someone created it meanwhile; it exists, which is all we need.
    if (!created && !created.GetError().Conflict()) return created.GetError();
  }
  auto patched = client.MergePatchStatus(r, "", name, {{"status", ToJson(status)}});
  if (!patched) return patched.GetError();
  return Ok{};
}

LinkScheduleWriter::Outcome LinkScheduleWriter::Write(
    const std::vector<std::pair<LinkScheduleSpec, LinkScheduleStatus>>& links) {
  Outcome out;
  for (const auto& [spec, status] : links) {
    const std::string name = LinkObjectName(spec.name);
    Json fingerprint = ToJson(status);
    fingerprint.erase("lastUpdate");
    std::string text = fingerprint.dump();
    if (const auto it = last_.find(name); it != last_.end() && it->second == text) {
      ++out.unchanged;
      continue;
    }
    if (auto applied = ApplyLinkSchedule(client_, spec, status); !applied) {
      if (out.failed++ == 0) out.first_error = applied.GetError();
      last_.erase(name);
      continue;
    }
    last_[name] = std::move(text);
    ++out.written;
  }
  return out;
}

LinkScheduleWriter::Outcome TrafficProfileStatusWriter::Write(
    const std::vector<TrafficProfileStatus>& statuses) {
  LinkScheduleWriter::Outcome out;
  for (const TrafficProfileStatus& s : statuses) {
    const std::string key = s.namespace_name + "/" + s.name;
    Json figures = {{"measuredPeriodMs", s.measured_period_ms},
                    {"measuredCommMs", s.measured_comm_ms},
                    {"bytesPerPhase", s.bytes_per_phase},
                    {"reportingRanks", s.reporting_ranks}};
    std::string text = figures.dump();
    const auto now = std::chrono::steady_clock::now();
    if (const auto it = last_.find(key);
        it != last_.end() && (it->second.figures == text || now - it->second.at < every_)) {
      ++out.unchanged;
      continue;
    }
    figures["lastUpdate"] = NowRfc3339();
    auto patched = client_.MergePatchStatus(resources::TrafficProfiles(), s.namespace_name, s.name,
                                            {{"status", std::move(figures)}});
    if (!patched) {
      if (out.failed++ == 0) out.first_error = patched.GetError();
      last_.erase(key);
      continue;
    }
    last_[key] = {std::move(text), now};
    ++out.written;
  }
  return out;
}

std::string NowRfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace metronome::kube
