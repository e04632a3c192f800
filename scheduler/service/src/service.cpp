#include "metronome/service/service.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "metronome/common/clock.hpp"
#include "metronome/controller/rules.hpp"
#include "metronome/service/routes.hpp"

namespace metronome::service {

using controller::Decision;
using controller::OfflineTask;
using controller::ReportVerdict;

namespace {

ServiceConfig Resolve(ServiceConfig cfg) {
  cfg.Validate();
  if (!cfg.topology_file.empty()) cfg.topology = LoadTopologyFile(cfg.topology_file);
  return cfg;
}

proto::ErrorCode CodeFor(proto::DecodeError e) {
  switch (e) {
    case proto::DecodeError::kVersion:
      return proto::ErrorCode::kVersion;
    case proto::DecodeError::kBadField:
      return proto::ErrorCode::kInvalid;
    default:
      return proto::ErrorCode::kMalformed;
  }
}

std::string Printable(const std::string& identity) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

constexpr size_t kMaxBatch = 4096;  // messages handled before the tick and the plan listener
constexpr size_t kMaxDecisions = 16;

}  // namespace

Service::Service(ServiceConfig config)
    : config_(Resolve(std::move(config))),
      http_(std::make_unique<HttpServer>(metrics_)),
      planner_(config_.topology, config_.planning),
      link_names_(planner_.LinkNames()) {
  summary_ = planner_.Summary();
  links_ = summary_.links;
  // HTTPS when configured, for every user of the library (a bad file: ConfigError).
  if (config_.http_tls.enabled()) http_->EnableTls(config_.http_tls);
  http_->AddRouteGroup(std::make_shared<StatusRoutes>(*this));
  http_->AddRouteGroup(std::make_shared<TimelineRoutes>());
}

Service::~Service() {
  Stop();
}

void Service::Start() {
  started_ns_ = RealtimeNs();
  context_ = std::make_unique<zmq::context_t>(1);
  socket_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::router);
  socket_->set(zmq::sockopt::router_mandatory, 1);
  socket_->set(zmq::sockopt::linger, 0);
  socket_->set(zmq::sockopt::sndhwm, 10'000);
  // Thousands of shims reconnect at once after a restart: a short accept queue would drop their
  // SYNs and delay them by seconds of TCP retransmission.
  socket_->set(zmq::sockopt::backlog, 4096);
  socket_->set(zmq::sockopt::rcvhwm, 100);  // per peer: backpressure, bounded memory
  // Frames above this drop the connection inside libzmq; up to it, oversized frames reach the
  // decoder, which rejects (and counts) anything above proto::kMaxMessageBytes.
  socket_->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  if (config_.curve.enabled()) {
    const std::string secret =
        ReadCurveKeyFile("curve.secret_key_file", config_.curve.secret_key_file);
    const std::string pub =
        ReadCurveKeyFile("curve.public_key_file", config_.curve.public_key_file);
    char derived[41] = {};
    if (zmq_curve_public(derived, secret.c_str()) != 0) {
      throw ConfigError("curve.secret_key_file", "is not a valid Z85 CURVE secret key");
    }
    if (pub != derived) {
      throw ConfigError("curve.public_key_file", "does not match the secret key");
    }
    socket_->set(zmq::sockopt::curve_server, 1);
    socket_->set(zmq::sockopt::curve_secretkey, secret);
    spdlog::info("zmq: CURVE enabled, server public key {}", pub);
  }
  try {
    socket_->bind(config_.listen);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("zmq: cannot bind " + config_.listen + ": " + e.what());
  }
  bound_endpoint_ = socket_->get(zmq::sockopt::last_endpoint);

  const auto [host, port] = ParseHostPort("http", config_.http);
  http_->Start(host, port);
  metrics_.Links().Set(static_cast<double>(planner_.link_count()));
  spdlog::info("scheduler: listening zmq={} http={}:{} links={} rank_timeout={}ms", bound_endpoint_,
               host, http_->port(), planner_.link_count(), config_.registry.rank_timeout_ms);

  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("scheduler: eventfd failed");
  endpoint_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "mtr-endpoint");  // names show in top -H, perf, gdb
    EndpointLoop();
  });
  planning_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "mtr-planner");
    PlanningLoop();
  });
  if (plan_listener_) {
    listener_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "mtr-listener");
      ListenerLoop();
    });
  }
  if (config_.controller.offline_interval_ms > 0) {
    offline_thread_ = std::jthread([this](std::stop_token st) {
      pthread_setname_np(pthread_self(), "mtr-offline");
      OfflineLoop(st);
    });
  }
}

void Service::Stop() {
  if (stopping_.exchange(true)) return;
  if (offline_thread_.joinable()) {
    offline_thread_.request_stop();
    offline_cv_.notify_all();
    offline_thread_.join();
  }
  {
    std::lock_guard lock(mu_);  // no lost wake-up between the planner's check and its wait
  }
  plan_cv_.notify_all();
  listener_cv_.notify_all();
  if (planning_thread_.joinable()) planning_thread_.join();
  if (listener_thread_.joinable()) listener_thread_.join();
  if (endpoint_thread_.joinable()) endpoint_thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  if (http_) http_->Stop();
  socket_.reset();
  context_.reset();
  spdlog::info("scheduler: stopped");
}

// ---------------------------------------------------------------------------------------------
// The endpoint thread.

void Service::EndpointLoop() {
  const int64_t tick_ns = config_.controller.tick_ms * 1'000'000;
  int64_t next_tick = RealtimeNs() + tick_ns;
  std::vector<zmq::pollitem_t> items = {{socket_->handle(), 0, ZMQ_POLLIN, 0},
                                        {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  std::vector<zmq::message_t> parts;
  std::vector<std::string> frames;
  while (!stopping_) {
    const int64_t now0 = RealtimeNs();
    const auto wait_ms = std::clamp<int64_t>((next_tick - now0) / 1'000'000, 0, 50);
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms));
    if ((items[1].revents & ZMQ_POLLIN) != 0) {
      uint64_t n = 0;
      (void)!::read(wake_fd_, &n, sizeof n);
    }
    for (size_t i = 0; i < kMaxBatch; ++i) {
      parts.clear();
      zmq::recv_result_t got;
      try {
        got = zmq::recv_multipart(*socket_, std::back_inserter(parts), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t& e) {
        spdlog::warn("zmq: receive failed: {}", e.what());
        break;
      }
      if (!got) break;
      const int64_t t_recv = RealtimeNs();
      frames.clear();
      for (auto& p : parts) frames.emplace_back(static_cast<const char*>(p.data()), p.size());
      bool plan_work = false;
      {
        std::lock_guard lock(mu_);
        HandleFrames(frames, t_recv);
        FlushOutbox();  // also sends what the planning thread queued meanwhile
        plan_work = !pending_.empty();
      }
      if (plan_work) plan_cv_.notify_one();  // now, not after the batch: joins wait for no one
    }
    bool plan_work = false;
    {
      std::lock_guard lock(mu_);
      const int64_t now = RealtimeNs();
      if (now >= next_tick) {
        Tick(now);
        next_tick = now + tick_ns;
      }
      FlushOutbox();
      plan_work = !pending_.empty();
    }
    if (plan_work) plan_cv_.notify_one();
  }
}

void Service::WakeEndpoint() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

ClusterView Service::View() {
  std::lock_guard lock(mu_);
  ClusterView v;
  v.plan_version = plan_version_;
  v.topology = config_.topology;
  for (const auto& [name, job] : jobs_) {
    extender::JobSnapshot j;
    j.name = name;
    j.priority = job.priority;
    for (const auto& [r, rank] : job.ranks) j.nodes.push_back(rank.node);
    if (job.has_profile) {
      j.period_ns = job.period_ns;
      j.comm_ns = job.comm_ns;
      j.bytes_per_phase = job.bytes_per_phase;
    }
    j.planned = job.planned;
    j.best_effort = job.best_effort;
    j.timetable = job.timetable;
    v.jobs.push_back(std::move(j));
  }
  return v;
}

void Service::NotifyPlanListener() {
  if (!plan_listener_) return;
  uint64_t version = 0;
  {
    std::lock_guard lock(mu_);
    version = plan_version_;
  }
  if (version == notified_version_) return;
  notified_version_ = version;
  try {
    plan_listener_(View());
  } catch (const std::exception& e) {
    spdlog::error("scheduler: plan listener failed: {}", e.what());
  }
}

void Service::FlushOutbox() {
  for (auto& o : outbox_) {
    try {
      const auto a = socket_->send(zmq::buffer(o.identity),
                                   zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      const auto b = a ? socket_->send(zmq::buffer(o.payload), zmq::send_flags::dontwait)
                       : zmq::send_result_t{};
      if (!a || !b) {
        metrics_.SendFailed("queue_full").Increment();
        continue;
      }
      metrics_.Sent(o.type).Increment();
    } catch (const zmq::error_t& e) {
      metrics_.SendFailed(e.num() == EHOSTUNREACH ? "peer_gone" : "error").Increment();
    }
  }
  outbox_.clear();
}

void Service::Queue(const std::string& identity, const proto::Message& m) {
  outbox_.push_back({identity, proto::Encode(m), proto::TypeName(proto::TypeOf(m)).data()});
}

void Service::Reject(ClientState* client, const std::string& identity, proto::ErrorCode code,
                     const std::string& reason, const std::string& message) {
  metrics_.Rejected(reason).Increment();
  if (client != nullptr) ++client->rejected;
  spdlog::debug("zmq: rejected from {}: {} ({})", Printable(identity), reason, message);
  proto::Error err;
  err.code = code;
  err.message = reason + ": " + message;
  Queue(identity, err);
}

void Service::HandleFrames(std::vector<std::string>& frames, int64_t t_recv) {
  if (frames.empty()) return;
  const std::string& identity = frames[0];
  auto it = clients_.find(identity);
  if (it == clients_.end()) {
    if (clients_.size() >= config_.registry.max_clients) {
      Reject(nullptr, identity, proto::ErrorCode::kUnexpected, "capacity",
             "too many clients (" + std::to_string(clients_.size()) + ")");
      return;
    }
    it = clients_.emplace(identity, ClientState{}).first;
    it->second.identity = identity;
    it->second.first_seen_ns = t_recv;
  }
  ClientState& client = it->second;
  client.last_seen_ns = t_recv;
  ++client.messages;
  if (frames.size() != 2) {
    metrics_.Received("invalid").Increment();
    Reject(&client, identity, proto::ErrorCode::kMalformed, "multipart",
           "expected one frame per message, got " + std::to_string(frames.size() - 1));
    return;
  }
  const proto::Decoded d = proto::Decode(frames[1]);
  if (!d.ok()) {
    metrics_.Received("invalid").Increment();
    Reject(&client, identity, CodeFor(d.error), std::string(proto::DecodeErrorName(d.error)),
           d.detail);
    return;
  }
  const auto type = proto::TypeOf(d.message);
  metrics_.Received(std::string(proto::TypeName(type))).Increment();
  switch (type) {
    case proto::MessageType::kHello:
      HandleHello(client, std::get<proto::Hello>(d.message), t_recv);
      break;
    case proto::MessageType::kClockPing: {
      const auto& ping = std::get<proto::ClockPing>(d.message);
      proto::ClockPong pong;
      pong.seq = ping.seq;
      pong.t1_ns = ping.t1_ns;
      pong.t2_ns = t_recv;
      pong.t3_ns = RealtimeNs();
      Queue(identity, pong);
      FlushOutbox();  // t3 is "now": send at once
      break;
    }
    case proto::MessageType::kProfileReport:
      HandleReport(client, std::get<proto::ProfileReport>(d.message), t_recv);
      break;
    case proto::MessageType::kBye:
      HandleBye(client, std::get<proto::Bye>(d.message), t_recv);
      break;
    case proto::MessageType::kError: {
      const auto& e = std::get<proto::Error>(d.message);
      spdlog::warn("zmq: client {} reports an error: code={} {}", Printable(identity),
                   static_cast<uint32_t>(e.code), e.message);
      break;
    }
    default:
      Reject(&client, identity, proto::ErrorCode::kUnexpected, "unexpected",
             std::string(proto::TypeName(type)) + " is sent by the scheduler, not to it");
      break;
  }
}

void Service::HandleHello(ClientState& client, const proto::Hello& m, int64_t now) {
  if (m.job_id.empty()) {
    Reject(&client, client.identity, proto::ErrorCode::kInvalid, "invalid", "empty job_id");
    return;
  }
  auto it = jobs_.find(m.job_id);
  if (it == jobs_.end()) {
    JobState job;
    job.name = m.job_id;
    job.id = ++next_job_id_;
    job.priority = m.priority;
    job.world_size = m.world_size;
    job.created_ns = now;
    job_names_[job.id] = job.name;
    it = jobs_.emplace(m.job_id, std::move(job)).first;
    spdlog::info("registry: job {} created (id {}, world size {}, priority {})", m.job_id,
                 it->second.id, m.world_size, m.priority);
  }
  JobState& job = it->second;
  if (job.world_size != m.world_size) {
    Reject(&client, client.identity, proto::ErrorCode::kInvalid, "invalid",
           "world_size " + std::to_string(m.world_size) + " differs from job " + m.job_id + "'s " +
               std::to_string(job.world_size));
    return;
  }
  auto rit = job.ranks.find(m.rank);
  const bool again = rit != job.ranks.end();
  if (again && rit->second.identity != client.identity) {
    auto old = clients_.find(rit->second.identity);
    if (old != clients_.end()) old->second.members.erase({m.job_id, m.rank});
  }
  RankState& rank = job.ranks[m.rank];
  rank.rank = m.rank;
  rank.node = m.node;
  rank.identity = client.identity;
  rank.session = ++next_session_;
  rank.pid = m.pid;
  rank.shim_version = m.shim_version;
  rank.registered_ns = now;
  rank.last_seen_ns = now;
  client.members.insert({m.job_id, m.rank});
  metrics_.Registrations(again ? "reregistration" : "new").Increment();
  spdlog::info("registry: {} job={} rank={}/{} node={} pid={} session={} client={}",
               again ? "re-registered" : "registered", m.job_id, m.rank, m.world_size, m.node,
               m.pid, rank.session, Printable(client.identity));

  proto::Welcome w;
  w.session = rank.session;
  w.report_interval_ms = config_.registry.report_interval_ms;
  w.server_time_ns = RealtimeNs();
  Queue(client.identity, w);

  if (m.priority > job.priority) {
    job.priority = m.priority;
    if (job.planned) pending_.push_back({Pending::kReplan, job.id, "priority", now});
  }
  if (job.planned && job.has_profile) {
    // Node set may have changed (a rank moved): the links follow from the nodes.
    std::vector<std::string> now_links;
    for (uint32_t l : planner_.JobLinks(ToPlanJob(job))) now_links.push_back(link_names_[l]);
    if (now_links != job.links) {
      pending_.push_back({Pending::kReplan, job.id, "nodes", now});
    }
  }
  if (job.planned) PushTimetable(job, rank, "register", now);
}

void Service::PushTimetable(JobState& job, RankState& rank, const char* reason, int64_t now) {
  proto::TimetablePush p;
  p.job_id = job.name;
  p.timetable = job.timetable;  // an ungated job's is always open: sent as an explicit "no gate"
  Queue(rank.identity, p);
  rank.last_push_ns = now;
  metrics_.TimetablePushes(reason).Increment();
}

void Service::Decide(JobState& job, const char* decision, const std::string& detail) {
  Decide(job, decision, spdlog::level::info, detail);
}

void Service::Decide(JobState& job, const char* decision, spdlog::level::level_enum level,
                     const std::string& detail) {
  metrics_.ControllerDecisions(decision).Increment();
  spdlog::log(level, "controller: job={} decision={} {}", job.name, decision, detail);
  job.decisions.push_back(std::string(decision) + ": " + detail);
  if (job.decisions.size() > kMaxDecisions) job.decisions.erase(job.decisions.begin());
}

void Service::HandleReport(ClientState& client, const proto::ProfileReport& m, int64_t now) {
  auto it = jobs_.find(m.job_id);
  if (it == jobs_.end() || !it->second.ranks.contains(m.rank) ||
      it->second.ranks[m.rank].identity != client.identity) {
    Reject(&client, client.identity, proto::ErrorCode::kUnexpected, "unexpected",
           "report for job " + m.job_id + " rank " + std::to_string(m.rank) +
               " before its hello (register first)");
    return;
  }
  JobState& job = it->second;
  RankState& rank = job.ranks[m.rank];
  const ReportVerdict v = ApplyReport(job, rank, m, config_.controller, config_.planning, now);
  if (v.new_phases > 0) {
    metrics_.PhasesMeasured().Increment(v.new_phases);
    const size_t n = std::min<size_t>(v.new_phases, job.phases.size());
    for (size_t i = job.phases.size() - n; i < job.phases.size(); ++i) {
      if (job.planned && !job.best_effort) {
        metrics_.PhaseLateness().Observe(std::abs(static_cast<double>(job.phases[i].lateness_ns)) *
                                         1e-9);
      }
    }
    metrics_.JobLateness(job.name).Set(job.lateness_ewma_ns * 1e-9);
  }
  if (v.realigned > 0) metrics_.PhasesRealigned().Increment(static_cast<double>(v.realigned));
  if (v.late_phases > 0) {
    metrics_.PhasesLate().Increment(v.late_phases);
    // Logged at info when a streak starts, at debug while it lasts; always counted.
    Decide(job, "hold",
           job.consecutive_late_reports <= 1 ? spdlog::level::info : spdlog::level::debug,
           std::to_string(v.late_phases) + " phase(s) past the cushion (" +
               std::to_string(job.timetable.late_slack_ns) +
               " ns): held to the next window by the gate (stop-and-wait)");
  }
  if (v.first_profile) {
    spdlog::info("registry: job={} profile period={}ns comm={}ns bytes={} confidence={:.2f}",
                 job.name, job.period_ns, job.comm_ns, job.bytes_per_phase, job.confidence);
    pending_.push_back({Pending::kJoin, job.id, "join", now});
  }
  if (v.decision != Decision::kNone) {
    Decide(job, DecisionName(v.decision), v.reason);
    job.last_replan_ns = now;
    pending_.push_back({Pending::kReplan, job.id,
                        v.decision == Decision::kReplanLateness  ? "lateness"
                        : v.decision == Decision::kReplanOverrun ? "overrun"
                                                                 : "profile",
                        now});
  }
  if (v.repush) {
    Decide(job, "repush",
           "rank " + std::to_string(m.rank) + " runs timetable v" +
               std::to_string(m.timetable_version) + ", current v" +
               std::to_string(job.timetable.version));
    PushTimetable(job, rank, "stale", now);
  }
}

void Service::HandleBye(ClientState& client, const proto::Bye& m, int64_t now) {
  (void)now;
  auto it = jobs_.find(m.job_id);
  if (it == jobs_.end() || !it->second.ranks.contains(m.rank) ||
      it->second.ranks[m.rank].identity != client.identity) {
    Reject(&client, client.identity, proto::ErrorCode::kUnexpected, "unexpected",
           "bye for job " + m.job_id + " rank " + std::to_string(m.rank) + ", not registered");
    return;
  }
  it->second.ranks.erase(m.rank);
  client.members.erase({m.job_id, m.rank});
  spdlog::info("registry: bye job={} rank={} reason='{}'", m.job_id, m.rank, m.reason);
  if (it->second.ranks.empty()) RemoveJob(m.job_id, "bye");
}

void Service::RemoveJob(const std::string& name, const char* reason) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return;
  if (it->second.planned || it->second.has_profile) {
    pending_.push_back({Pending::kLeave, it->second.id, "leave", RealtimeNs()});
  }
  for (const auto& [r, rank] : it->second.ranks) {
    auto c = clients_.find(rank.identity);
    if (c != clients_.end()) c->second.members.erase({name, r});
  }
  metrics_.JobsRemoved(reason).Increment();
  metrics_.RemoveJob(name);
  job_names_.erase(it->second.id);
  spdlog::info("registry: job {} removed ({})", name, reason);
  jobs_.erase(it);
}

PlanJob Service::ToPlanJob(const JobState& job) const {
  return controller::ToPlanJob(job, RealtimeNs());
}

// The planning thread: one round takes every change queued since the last, plans them with the
// registry unlocked, then applies the plan under the lock and wakes the endpoint to send.
void Service::PlanningLoop() {
  while (true) {
    std::vector<Pending> work;
    std::vector<PlanJob> adds;  // as the registry has them now, one per job
    std::map<uint64_t, const Pending*> add_reason;
    std::optional<OfflineResult> offline;
    {
      std::unique_lock lock(mu_);
      plan_cv_.wait(lock,
                    [&] { return stopping_ || !pending_.empty() || offline_result_.has_value(); });
      if (stopping_) return;
      work.swap(pending_);
      offline.swap(offline_result_);
      for (const auto& p : work) {
        if (p.kind == Pending::kLeave) continue;
        const auto name = job_names_.find(p.id);
        if (name == job_names_.end()) continue;  // left meanwhile
        const JobState& job = jobs_.at(name->second);
        if (!job.has_profile || add_reason.contains(p.id)) continue;
        add_reason[p.id] = &p;
        adds.push_back(ToPlanJob(job));
      }
    }
    int64_t trigger = RealtimeNs();
    std::map<std::string, int> reasons;
    std::set<uint64_t> refused_ids;
    std::set<uint64_t> widen_refused;  // overrun widenings not taken
    std::optional<PlanSummary> plan;
    const char* plan_reason = "plan";
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard plan_lock(plan_mu_);
      // Leaves first, then every join and re-plan of the round in one planner call.
      for (const auto& p : work) {
        trigger = std::min(trigger, p.trigger_ns);
        if (p.kind != Pending::kLeave) continue;
        try {
          planner_.RemoveJob(p.id);
        } catch (const std::exception& e) {
          metrics_.PlanningErrors().Increment();
          spdlog::error("planner: cannot remove job {}: {}", p.id, e.what());
        }
        ++reasons[p.reason];
      }
      if (!adds.empty()) {
        // Windows that the overrun rule widens are tried one by one, after the rest: one that
        // would stretch its job's period is not taken (PlanningAdapter::WidenWindow).
        std::vector<PlanJob> batch;
        std::vector<PlanJob> widen;
        for (const auto& a : adds) {
          (add_reason.at(a.id)->reason == "overrun" ? widen : batch).push_back(a);
        }
        const PlanningAdapter::RoundOutcome round = planner_.PlanRound(batch, widen);
        widen_refused = round.widen_refused;
        for (const auto& [id, why] : round.refused) {
          refused_ids.insert(id);
          metrics_.PlanningErrors().Increment();
          spdlog::error("planner: cannot plan job {}: {}", id, why);
        }
      }
      if (!work.empty()) {
        metrics_.PlanDuration().Observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        plan = planner_.Summary();
      }
      if (offline && AdoptOffline(*offline)) {
        plan = planner_.Summary();
        if (work.empty()) plan_reason = "offline";
      }
    }
    if (!plan) continue;
    {
      std::lock_guard lock(mu_);
      for (const auto& a : adds) {
        const auto name = job_names_.find(a.id);
        if (refused_ids.contains(a.id) || name == job_names_.end()) continue;
        JobState& job = jobs_.at(name->second);
        if (widen_refused.contains(a.id)) {
          Decide(job, "overrun_refused", spdlog::level::info,
                 "a " + std::to_string(a.phase_floor_ns) +
                     " ns window would stretch the period; the plan stays as it was");
          RecordWidenRefused(job, a);
          continue;
        }
        RecordPlanned(job, a);
        const Pending& p = *add_reason.at(a.id);
        if (p.kind == Pending::kReplan) ++job.replans;
        ++reasons[p.reason];
      }
      for (const auto& [reason, n] : reasons) {
        metrics_.Replans(reason).Increment(n);
        spdlog::debug("planner: re-planned {} change(s) for {}", n, reason);
      }
      ApplyPlan(*plan, trigger, plan_reason);
    }
    WakeEndpoint();
    listener_cv_.notify_one();
  }
}

// The plan listener's thread: the extender rebuilds its state from the view (milliseconds at
// hundreds of jobs), which must not hold up the next planning round. Plan changes that come
// while it runs are coalesced into one call with the latest view.
void Service::ListenerLoop() {
  while (true) {
    NotifyPlanListener();
    std::unique_lock lock(mu_);
    listener_cv_.wait(lock, [&] { return stopping_ || plan_version_ != notified_version_; });
    if (stopping_) return;
  }
}

// Under plan_mu_: adopts a better plan from the background search unless the jobs changed since
// it started or it would move too many of them.
bool Service::AdoptOffline(const OfflineResult& r) {
  switch (planner_.AdoptOffline(r, config_.controller.offline_max_moves)) {
    case PlanningAdapter::Adoption::kNoGain:
      metrics_.OfflineRuns("no_gain").Increment();
      spdlog::debug("offline: no better plan ({})", r.summary);
      return false;
    case PlanningAdapter::Adoption::kStale:
      metrics_.OfflineRuns("stale").Increment();
      spdlog::info("offline: better plan discarded, the jobs changed meanwhile ({})", r.summary);
      return false;
    case PlanningAdapter::Adoption::kTooDisruptive:
      metrics_.OfflineRuns("too_disruptive").Increment();
      spdlog::info("offline: better plan skipped: it moves {} jobs (max {}) ({})", r.moved.size(),
                   config_.controller.offline_max_moves, r.summary);
      return false;
    case PlanningAdapter::Adoption::kRefused:
      return false;
    case PlanningAdapter::Adoption::kApplied:
      break;
  }
  metrics_.OfflineRuns("applied").Increment();
  metrics_.Replans("offline").Increment();
  metrics_.ControllerDecisions("offline_apply").Increment();
  spdlog::info("controller: decision=offline_apply moves {} job(s) ({})", r.moved.size(),
               r.summary);
  return true;
}

void Service::ApplyPlan(const PlanSummary& plan, int64_t trigger_ns, const char* reason) {
  summary_ = plan;
  links_ = summary_.links;
  ++plan_version_;
  last_plan_ns_ = RealtimeNs();
  size_t pushed = 0;
  for (const auto& s : summary_.jobs) {
    const auto name = job_names_.find(s.id);
    if (name == job_names_.end()) continue;
    JobState& job = jobs_.at(name->second);
    const bool was_planned = job.planned;
    uint32_t check = 0;
    if (!AdoptSchedule(job, s, config_.timetable, check)) {
      if ((check & kTimetableRejectMask) != 0) {
        spdlog::error("planner: job {} got an unusable timetable (check {:#x}); not pushed",
                      job.name, check);
      }
      continue;
    }
    const Timetable& tt = job.timetable;
    job.links.clear();
    for (uint32_t l : planner_.JobLinks(ToPlanJob(job))) job.links.push_back(link_names_[l]);
    spdlog::info(
        "planner: job={} v{} {} period={}ns offset={}ns window={}ns slack={}ns max_wait={}ns "
        "links={} slowdown={:.3f}",
        job.name, tt.version,
        AlwaysOpen(tt) ? "not gated"
                       : (s.best_effort ? "best-effort" : (was_planned ? "updated" : "gated")),
        tt.period_ns, tt.offset_ns, tt.window_ns, tt.late_slack_ns, tt.max_wait_ns,
        job.links.size(), s.predicted_slowdown);
    const int64_t now = RealtimeNs();
    for (auto& [r, rank] : job.ranks) {
      PushTimetable(job, rank, reason, now);
      metrics_.PushLatency().Observe(static_cast<double>(now - trigger_ns) * 1e-9);
      ++pushed;
    }
  }
  spdlog::debug("planner: plan v{} applied, {} push(es)", plan_version_, pushed);
}

void Service::Tick(int64_t now) {
  // Silent ranks, then jobs left without ranks.
  const int64_t timeout = config_.registry.rank_timeout_ms * 1'000'000;
  std::vector<std::string> empty;
  for (auto& [name, job] : jobs_) {
    for (auto r = job.ranks.begin(); r != job.ranks.end();) {
      if (now - r->second.last_seen_ns > timeout) {
        spdlog::info("registry: job={} rank={} silent for {} ms: dropped", name, r->first,
                     (now - r->second.last_seen_ns) / 1'000'000);
        metrics_.RankTimeouts().Increment();
        auto c = clients_.find(r->second.identity);
        if (c != clients_.end()) c->second.members.erase({name, r->first});
        r = job.ranks.erase(r);
      } else {
        ++r;
      }
    }
    if (job.ranks.empty()) empty.push_back(name);
  }
  for (const auto& name : empty) RemoveJob(name, "timeout");
  for (auto c = clients_.begin(); c != clients_.end();) {
    if (c->second.members.empty() && now - c->second.last_seen_ns > timeout) {
      c = clients_.erase(c);
    } else {
      ++c;
    }
  }
}

void Service::OfflineLoop(std::stop_token stop) {
  std::mutex m;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lk(m);
      offline_cv_.wait_for(lk, stop,
                           std::chrono::milliseconds(config_.controller.offline_interval_ms),
                           [] { return false; });
    }
    if (stop.stop_requested()) break;
    {
      std::lock_guard lock(mu_);
      if (offline_result_ || summary_.jobs.size() < 2) continue;
    }
    std::shared_ptr<OfflineTask> task;
    {
      std::lock_guard plan_lock(plan_mu_);
      task = planner_.PrepareOffline();
    }
    OfflineResult r =
        PlanningAdapter::RunOffline(*task, config_.controller.offline_budget_ms, stop);
    {
      std::lock_guard lock(mu_);
      offline_result_ = std::move(r);
    }
    plan_cv_.notify_one();
  }
}

double Service::MeasuredUtilization(const std::string& link) const {
  std::unordered_map<std::string, double> capacity;
  for (const auto& l : links_) capacity[l.name] = l.capacity_bytes_per_s;
  const double cap = capacity[link];
  if (cap <= 0.0) return 0.0;
  double u = 0.0;
  for (const auto& [name, job] : jobs_) {
    if (!job.has_profile || job.period_ns <= 0) continue;
    if (std::find(job.links.begin(), job.links.end(), link) == job.links.end()) continue;
    double rate = 0.0;  // bytes per second while communicating
    if (job.bytes_per_phase > 0 && job.comm_ns > 0) {
      rate = static_cast<double>(job.bytes_per_phase) * 1e9 / static_cast<double>(job.comm_ns);
    } else {
      // Bytes unknown: the job runs at its bottleneck's capacity during its phase.
      rate = cap;
      for (const auto& l : job.links) rate = std::min(rate, capacity[l] > 0 ? capacity[l] : rate);
    }
    u += std::min(rate, cap) / cap * static_cast<double>(job.comm_ns) /
         static_cast<double>(job.period_ns);
  }
  return u;
}

void Service::RefreshGauges() {
  std::lock_guard lock(mu_);
  size_t ranks = 0, planned = 0, best_effort = 0;
  std::map<std::string, int> per_link;
  for (const auto& [name, job] : jobs_) {
    ranks += job.ranks.size();
    if (job.planned) ++planned;
    if (job.planned && job.best_effort) ++best_effort;
    for (const auto& l : job.links) ++per_link[l];
  }
  metrics_.Jobs().Set(static_cast<double>(jobs_.size()));
  metrics_.JobsPlanned().Set(static_cast<double>(planned));
  metrics_.JobsBestEffort().Set(static_cast<double>(best_effort));
  metrics_.Ranks().Set(static_cast<double>(ranks));
  metrics_.Clients().Set(static_cast<double>(clients_.size()));
  metrics_.Links().Set(static_cast<double>(links_.size()));
  for (const auto& l : links_) {
    metrics_.LinkPlannedUtilization(l.name).Set(l.served_load);
    metrics_.LinkMeasuredUtilization(l.name).Set(MeasuredUtilization(l.name));
    metrics_.LinkMinCushion(l.name).Set(
        l.min_cushion_ns < 0 ? -1.0 : static_cast<double>(l.min_cushion_ns) * 1e-9);
    metrics_.LinkJobs(l.name).Set(per_link[l.name]);
  }
}

}  // namespace metronome::service
