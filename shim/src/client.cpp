#include "client.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "device_gate.hpp"
#include "log.hpp"
#include "metronome/common/clock.hpp"
#include "node_share.hpp"
#include "profile_report.hpp"
#include "real_nccl.hpp"
#include "rhythm.hpp"
#include "runtime.hpp"

namespace metronome::shim {
namespace {

constexpr int64_t kHelloRetryNs = 1000 * kMs;
constexpr int64_t kMaxPollNs = 50 * kMs;
constexpr int64_t kRetireGraceNs = 2000 * kMs;
constexpr int64_t kFollowPollNs = 5 * kMs;  // how soon a follower adopts a new timetable
// How often a job whose phase edges the scheduler relays looks for a new one (decision 0029:
// a relay slower than about 2 ms, end to end, loses pairs again).
constexpr int64_t kEdgePollNs = 1 * kMs;
constexpr int64_t kLeadRetryNs = 200 * kMs;  // how soon a follower notices the leader gone
                                             // (and how often it writes its counters)
constexpr uint64_t kNoPublication = ~0ull;
constexpr int64_t kRebaseCheckNs = 60'000 * kMs;  // how often RebaseYields looks at the sets

const char* const kShimVersion = "0.1.0";

// Whether this process's collectives complete on the host before they return (the CPU
// testbed's stand-in): only then are the host's phase edges the phases on the wire. With CUDA in
// the process (libcuda loaded: NCCL's calls return once they are enqueued) the gate kernel takes
// the turns and stamps the edges on the stream, or, without it, the shim takes no turns.
bool CallsCompleteOnHost() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return true;
  dlclose(h);
  return false;
}

// A timetable and its yields as the gate may use them, from a push or from the node's segment
// (both written by another process): ValidateTimetable's check; yields that fail are dropped.
uint32_t Sanitize(Timetable& t, YieldSet& yields) {
  const uint32_t check = ValidateTimetable(t);
  // The decoder validated a push's yields against its epoch (and filled their inverse
  // periods); validating again keeps the store's input checked whoever built them.
  yields.epoch_ns = t.epoch_ns;
  if ((ValidateYieldSet(yields) & kYieldRejectMask) != 0) yields = YieldSet{};
  return check;
}

}  // namespace

Client::Client(Runtime& rt) : rt_(rt) {
  rx_.resize(proto::kMaxMessageBytes + 1);
  rt_.calls_complete_on_host.store(CallsCompleteOnHost());
  if (rt_.GetMode() == Mode::kEnforce &&
      (rt_.calls_complete_on_host.load() || DeviceGate::Status() == DeviceGateStatus::kKernel)) {
    features_ = proto::kFeatureTurns;
  }
}

bool Client::Start() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  DeviceGate::SetWakeFd(wake_fd_);
  // The thread takes no signals: they stay with the application's threads.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  bool ok = true;
  try {
    thread_ = new std::thread([this] { Run(); });
  } catch (...) {
    ok = false;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

void Client::Stop(int64_t timeout_ns) noexcept {
  if (thread_ == nullptr || stop_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    const ssize_t w = write(wake_fd_, &one, sizeof(one));
    (void)w;
  }
  const int64_t deadline = RealtimeNs() + timeout_ns;
  while (!done_.load() && RealtimeNs() < deadline) usleep(1000);
  if (done_.load()) {
    try {
      thread_->join();
    } catch (...) {
    }
  }
}

void Client::AbandonAfterFork() noexcept {
  if (transport_) transport_->AbandonAfterFork();
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

void Client::Run() noexcept {
  pthread_setname_np(pthread_self(), "metronome");
  DeviceGate::ServeWaits(true);
  try {
    Loop();
    if (transport_) {
      SendByes("exit");
      transport_->Close(100);
    }
  } catch (...) {
    MLOG_ERROR("background thread stopped on an unexpected error: running ungated");
    for (JobState* j : rt_.Jobs()) j->store.Clear();
  }
  DeviceGate::ServeWaits(false);
  done_.store(true);
}

bool Client::Connect() {
  const Config& c = rt_.GetConfig();
  transport_ = c.curve_server_key.empty() ? MakeZmtpTransport() : MakeZmqTransport();
  if (!transport_->Open(c)) {
    // No ZeroMQ: keep tracking (observe-only) so that logs still show the rhythm.
    MLOG_ERROR("no connection to the scheduler (%s): running ungated", c.scheduler.c_str());
    transport_.reset();
    return false;
  }
  last_rx_ns_ = RealtimeNs();  // the silence bound counts from here
  MLOG_INFO("scheduler client started: %s via %s", c.scheduler.c_str(), transport_->Describe());
  return true;
}

void Client::WaitForWork(int64_t now) {
  int64_t next = now + (following_ ? kFollowPollNs : SendsEdges() ? kEdgePollNs : kMaxPollNs);
  if (transport_) next = std::min({next, next_ping_ns_, next_report_ns_});
  next = std::min(next, DeviceGate::ServiceWaits(now));
  const auto timeout_ms = static_cast<int>(std::max<int64_t>(0, (next - now + kMs - 1) / kMs));
  if (transport_) {
    transport_->Wait(timeout_ms, wake_fd_);
  } else {
    pollfd p{wake_fd_, POLLIN, 0};
    poll(&p, wake_fd_ >= 0 ? 1 : 0, timeout_ms);
  }
  if (wake_fd_ >= 0) {
    uint64_t v = 0;
    const ssize_t r = read(wake_fd_, &v, sizeof(v));  // non-blocking: drains a wake-up
    (void)r;
  }
}

void Client::Loop() {
  while (!stop_.load()) {
    try {
      WaitForWork(RealtimeNs());
      int64_t now = RealtimeNs();
      if (OpenShares(now) && !transport_ && !connect_failed_) connect_failed_ = !Connect();
      if (transport_) {
        transport_->Service(now);
        Receive();
        now = RealtimeNs();
      }
      DeviceGate::ServiceWaits(now);
      DeviceGate::Recalibrate(now);
      if (transport_) SendEdges();
      DrainEvents();
      following_ = false;
      for (JobState* job : rt_.Jobs()) {
        if (job->share != nullptr && !job->share->Leads() && job->comms.load() != 0) {
          Follow(job, now);
        }
      }
      if (transport_) {
        SendHellos(now);
        if (now >= next_ping_ns_) SendPing(now);
        if (now >= next_report_ns_) {
          SendReports(now);
          next_report_ns_ = now + report_interval_ns_;
        }
        CheckSilence(now);
      }
      if (now >= next_rebase_ns_) {
        RebaseYields(now);
        next_rebase_ns_ = now + kRebaseCheckNs;
      }
      RetireComms(now);
    } catch (...) {
      // bad_alloc or similar: skip this round, never take the process down.
      usleep(10'000);
    }
  }
}

void Client::Send(const proto::Message& m) {
  proto::Encode(m, buf_);
  transport_->Send(buf_);
}

void Client::Receive() {
  for (int i = 0; i < 256; ++i) {
    bool multipart = false;
    if (!transport_->Receive(rx_, multipart)) return;
    const size_t n = rx_.size();
    const int64_t now = RealtimeNs();
    last_rx_ns_ = now;
    if (failed_open_) {
      failed_open_ = false;
      MLOG_INFO("scheduler answers again: re-registering");
    }
    rt_.counters.rx_messages.fetch_add(1);
    if (multipart || n > proto::kMaxMessageBytes) {
      rt_.counters.rx_rejected.fetch_add(1);
      if (reject_logs_++ < 5) {
        MLOG_WARN("rejected a message from the scheduler: %s",
                  multipart ? "several frames" : "too large");
      }
      continue;
    }
    const proto::Decoded d = proto::Decode(rx_.data(), n);
    if (!d.Ok()) {
      rt_.counters.rx_rejected.fetch_add(1);
      if (reject_logs_++ < 5) {
        MLOG_WARN("rejected a message from the scheduler: %s (%s)",
                  std::string(proto::DecodeErrorName(d.error)).c_str(), d.detail.c_str());
      }
      continue;
    }
    Handle(d.message, now);
  }
}

void Client::Handle(const proto::Message& m, int64_t now) {
  if (const auto* w = std::get_if<proto::Welcome>(&m)) {
    rt_.counters.welcomes.fetch_add(1);
    if (awaiting_welcome_.empty()) {
      rt_.counters.rx_rejected.fetch_add(1);
      return;
    }
    JobState* job = awaiting_welcome_.front();
    awaiting_welcome_.erase(awaiting_welcome_.begin());
    job->registered = true;
    scheduler_turns_ = (w->features & proto::kFeatureTurns) != 0;
    const int64_t interval = static_cast<int64_t>(w->report_interval_ms) * kMs;
    report_interval_ns_ = std::clamp<int64_t>(interval, 100 * kMs, 10'000 * kMs);
    next_report_ns_ = std::min(next_report_ns_, now + report_interval_ns_);
    MLOG_INFO("registered with the scheduler: job=%s rank=%u session=%llu", job->job_id.c_str(),
              job->rank, static_cast<unsigned long long>(w->session));
  } else if (const auto* p = std::get_if<proto::ClockPong>(&m)) {
    const size_t idx = p->seq % 16;
    if (p->seq == 0 || p->seq > ping_seq_ || p->seq + 16 <= ping_seq_ ||
        ping_t1_[idx] != p->t1_ns) {
      rt_.counters.rx_rejected.fetch_add(1);
      return;
    }
    ping_t1_[idx] = 0;
    ClockSample s{p->t1_ns, p->t2_ns, p->t3_ns, now};
    const size_t steps = sync_.Steps();
    if (!sync_.AddSample(s)) {
      rt_.counters.rx_rejected.fetch_add(1);
      return;
    }
    rt_.counters.pongs.fetch_add(1);
    if (sync_.Steps() != steps) {
      // A clock stepped: settle the new offset with quick pings again.
      pings_answered_ = 0;
      next_ping_ns_ =
          std::min(next_ping_ns_, now + ClockPingIntervalNs(0, rt_.GetConfig().silence_ns));
      if (step_logs_++ < 10) {  // a clock that keeps jumping must not flood the job's log
        MLOG_WARN("a clock stepped: offset to the scheduler now %lld ns",
                  static_cast<long long>(sync_.OffsetNs()));
      }
    }
    ++pings_answered_;
    const int64_t offset = sync_.OffsetNs();
    rt_.server_minus_local_ns.store(offset);
    DeviceGate::SetServerMinusLocal(offset);
    for (JobState* job : rt_.Jobs()) {
      if (job->share != nullptr && job->share->Leads()) {
        job->share->PublishClock(offset, sync_.ErrorBoundNs());
      }
    }
    if (!rt_.clock_valid.exchange(true)) {
      MLOG_INFO("clock offset to the scheduler: %lld ns (+/- %lld ns)",
                static_cast<long long>(offset), static_cast<long long>(sync_.ErrorBoundNs()));
    }
  } else if (const auto* t = std::get_if<proto::TimetablePush>(&m)) {
    HandleTimetable(*t);
  } else if (const auto* tp = std::get_if<proto::TurnPush>(&m)) {
    HandleTurns(*tp);
  } else if (const auto* te = std::get_if<proto::TurnEdge>(&m)) {
    HandleTurnEdge(*te);
  } else if (const auto* e = std::get_if<proto::Error>(&m)) {
    if (reject_logs_++ < 20) {
      MLOG_WARN("scheduler error %u: %s", static_cast<unsigned>(e->code), e->message.c_str());
    }
    // The scheduler does not know us (it restarted): register again.
    if (e->code == proto::ErrorCode::kUnexpected) MarkUnregistered();
  } else {
    rt_.counters.rx_rejected.fetch_add(1);  // a message only a shim sends
  }
}

void Client::HandleTimetable(const proto::TimetablePush& p) {
  Timetable t = p.timetable;
  YieldSet yields = p.yields;
  const uint32_t check = Sanitize(t, yields);
  if (check & kTimetableRejectMask) {
    rt_.counters.timetables_rejected.fetch_add(1);
    if (reject_logs_++ < 20) {
      MLOG_WARN("rejected timetable v%llu for job %s (check 0x%x: period=%lld window=%lld)",
                static_cast<unsigned long long>(p.timetable.version), p.job_id.c_str(), check,
                static_cast<long long>(p.timetable.period_ns),
                static_cast<long long>(p.timetable.window_ns));
    }
    return;
  }
  bool matched = false;
  for (JobState* job : rt_.Jobs()) {
    if (job->job_id != p.job_id || job->comms.load() == 0) continue;
    if (job->share != nullptr && !job->share->Leads()) continue;  // it follows the segment
    matched = true;
    if (t.version <= job->accepted_version) {
      rt_.counters.timetables_stale.fetch_add(1);
      continue;
    }
    Adopt(job, t, yields, check);
    if (job->share != nullptr) job->share->PublishTimetable(t, yields);
  }
  if (!matched) rt_.counters.rx_rejected.fetch_add(1);
}

void Client::Adopt(JobState* job, const Timetable& t, const YieldSet& yields, uint32_t check) {
  job->accepted_version = t.version;
  const int64_t now = RealtimeNs();
  YieldSet kept = yields;
  RebaseYieldSet(kept, now);  // the gates take times from its epoch (yield.hpp)
  PublishToGates(job, t, kept);
  rt_.counters.timetables_accepted.fetch_add(1);
  if (now - last_tt_log_ns_ >= 1000 * kMs) {
    MLOG_INFO(
        "timetable v%llu for job %s rank %u: period=%.3f ms offset=%.3f ms window=%.3f ms "
        "slack=%.3f ms max_wait=%.3f ms yields=%u%s%s%s (%llu updates not logged)",
        static_cast<unsigned long long>(t.version), job->job_id.c_str(), job->rank,
        static_cast<double>(t.period_ns) / 1e6, static_cast<double>(t.offset_ns) / 1e6,
        static_cast<double>(t.window_ns) / 1e6, static_cast<double>(t.late_slack_ns) / 1e6,
        static_cast<double>(t.max_wait_ns) / 1e6, yields.count, check != 0 ? " (clamped)" : "",
        AlwaysOpen(t) ? " (no gate)" : "",
        job->share != nullptr && !job->share->Leads() ? " (from the node's reporting rank)" : "",
        static_cast<unsigned long long>(tt_log_suppressed_));
    last_tt_log_ns_ = now;
    tt_log_suppressed_ = 0;
  } else {
    ++tt_log_suppressed_;
  }
}

void Client::PublishToGates(JobState* job, const Timetable& t, const YieldSet& yields) {
  job->store.Publish(t, yields);  // an always-open one too: its version is what is reported
  for (CommState* c : rt_.LiveComms()) {
    if (c->job == job && c->device_slot >= 0) {
      // No gate and nothing to yield to: the kernel's slot holds no timetable (were it
      // launched, it would go at once).
      const bool none = AlwaysOpen(t) && yields.count == 0;
      DeviceGate::Publish(c->device_slot, c->device_owner, none ? nullptr : &t, yields,
                          rt_.GetConfig().max_wait_ns);
    }
  }
}

void Client::RebaseYields(int64_t now) {
  for (JobState* job : rt_.Jobs()) {
    if (job->comms.load() == 0) continue;
    Timetable t;
    YieldSet yields;
    if (!job->store.Read(t, yields) || !YieldSetDueForRebase(yields, now)) continue;
    RebaseYieldSet(yields, now);
    PublishToGates(job, t, yields);
  }
}

void Client::HandleTurns(const proto::TurnPush& p) {
  bool matched = false;
  for (JobState* job : rt_.Jobs()) {
    if (job->job_id != p.job_id || job->comms.load() == 0) continue;
    if (job->share != nullptr && !job->share->Leads()) continue;  // followers take no turns
    matched = true;
    if (p.version <= job->turns_version) continue;
    job->turns_version = p.version;
    job->edges_asked.store(p.send_edges);
    job->turn_set = p.turns;  // the decoder validated it; edges start unseen
    PublishTurns(job);
    MLOG_INFO("job %s rank %u takes turns with %u job(s)%s (v%llu)", job->job_id.c_str(), job->rank,
              p.turns.count, p.send_edges ? ", sends its phase edges" : "",
              static_cast<unsigned long long>(p.version));
  }
  if (!matched) rt_.counters.rx_rejected.fetch_add(1);
}

void Client::HandleTurnEdge(const proto::TurnEdge& e) {
  // On the scheduler's clock as this host estimates it (turns wait for that estimate anyway).
  const bool clock = rt_.clock_valid.load();
  const int64_t limit =
      SaturatingAdd(RealtimeNs() + rt_.server_minus_local_ns.load(), kEdgeAheadLimitNs);
  if (clock && e.at_ns > limit) {
    rt_.counters.rx_rejected.fetch_add(1);
    return;
  }
  bool matched = false;
  for (JobState* job : rt_.Jobs()) {
    if (job->job_id != e.job_id || job->comms.load() == 0) continue;
    TurnSet& s = job->turn_set;
    for (uint32_t i = 0; i < s.count; ++i) {
      TurnPartner& p = s.partners[i];
      if (p.job != e.partner) continue;
      matched = true;
      int64_t& edge = e.begun ? p.begun_ns : p.ended_ns;
      // An older edge, or one seen already; unless the one kept is ahead of the clock (the
      // scheduler's clock stepped back since).
      if (e.at_ns <= edge && !(clock && edge > limit)) break;
      edge = e.at_ns;
      PublishTurns(job);
      break;
    }
  }
  if (!matched) rt_.counters.rx_rejected.fetch_add(1);
}

bool Client::SendsEdges() const {
  if (!scheduler_turns_) return false;
  for (JobState* job : rt_.Jobs()) {
    if (job->edges_asked.load() && job->registered) return true;
  }
  return false;
}

void Client::SendEdges() {
  if (!scheduler_turns_ || !rt_.clock_valid.load()) return;
  const int64_t offset = rt_.server_minus_local_ns.load();
  const std::vector<CommState*> comms = rt_.LiveComms();
  for (JobState* job : rt_.Jobs()) {
    if (!job->edges_asked.load() || !job->registered || job->comms.load() == 0) continue;
    CommState* c = RhythmOf(job, comms);
    if (c == nullptr) continue;
    int64_t begun = c->edge_begun_ns.load(std::memory_order_relaxed);
    int64_t ended = c->edge_ended_ns.load(std::memory_order_relaxed);
    // On the device gate the kernels stamped them when the stream got there.
    if (c->device_gate && !DeviceGate::Edges(c->device_slot, c->device_owner, begun, ended)) {
      // No stamps come any more (the context stepped down from the kernels): a begin already
      // sent is closed now, or its partners would hold for it until they take it as quiet.
      if (job->sent_begun_ns > job->sent_ended_ns) {
        // Not before the begin as sent (a stamp may lead the host clock, the offset may move).
        const int64_t at = std::max(RealtimeNs() + offset, job->sent_begun_at_ns);
        job->sent_ended_ns = job->sent_begun_ns;  // closed
        Send(proto::PhaseEdge{job->job_id, job->rank, false, at});
      }
      continue;
    }
    if (begun != job->sent_begun_ns && begun != 0) {
      job->sent_begun_ns = begun;
      job->sent_begun_at_ns = begun + offset;
      Send(proto::PhaseEdge{job->job_id, job->rank, true, job->sent_begun_at_ns});
    }
    if (ended != job->sent_ended_ns && ended >= begun && ended != 0) {
      job->sent_ended_ns = ended;
      Send(proto::PhaseEdge{job->job_id, job->rank, false, ended + offset});
    }
  }
}

void Client::PublishTurns(JobState* job) {
  job->turns.Publish(job->turn_set);
  // The gate kernels get them once the clock is common (the edges are moved onto the GPU timer).
  const bool clock = rt_.clock_valid.load();
  for (CommState* c : rt_.LiveComms()) {
    if (c->job == job && c->device_slot >= 0) {
      DeviceGate::PublishTurns(c->device_slot, c->device_owner, clock ? &job->turn_set : nullptr,
                               rt_.GetConfig().max_wait_ns);
    }
  }
}

void Client::ClearJob(JobState* job) {
  job->store.Clear();
  for (CommState* c : rt_.LiveComms()) {
    if (c->job == job && c->device_slot >= 0) {
      DeviceGate::Publish(c->device_slot, c->device_owner, nullptr, YieldSet{}, 0);
    }
  }
}

bool Client::OpenShares(int64_t now) {
  const Config& cfg = rt_.GetConfig();
  bool reports = false;
  for (JobState* job : rt_.Jobs()) {
    if (job->comms.load() == 0) continue;
    if (cfg.node_share && job->share == nullptr && !job->share_tried) {
      job->share_tried = true;
      std::string error;
      job->share = NodeShare::Open(cfg.share_dir, cfg.node, job->job_id, now, &error).release();
      if (job->share == nullptr) {
        MLOG_WARN("job %s rank %u: reports alone (node sharing: %s)", job->job_id.c_str(),
                  job->rank, error.c_str());
      } else if (job->share->Leads()) {
        MLOG_INFO("job %s rank %u: reports for its ranks on node %s (%s)", job->job_id.c_str(),
                  job->rank, cfg.node.c_str(), job->share->Path().c_str());
      } else {
        MLOG_INFO("job %s rank %u: follows the rank that reports for node %s (pid %u, %s)",
                  job->job_id.c_str(), job->rank, cfg.node.c_str(), job->share->LeaderPid(),
                  job->share->Path().c_str());
      }
    }
    if (job->share == nullptr) {
      reports = true;
    } else if (job->share->Leads()) {
      job->share->Heartbeat(now);
      reports = true;
    }
  }
  return reports;
}

void Client::Follow(JobState* job, int64_t now) {
  NodeShare& share = *job->share;
  const int64_t silence = rt_.GetConfig().silence_ns;
  // Every 200 ms, not every pass: the lock attempt and the counters (the leader reports them
  // about once a second).
  if (now >= job->next_lead_try_ns) {
    job->next_lead_try_ns = now + kLeadRetryNs;
    if (share.TryLead(now, silence)) {
      // Its store, and the segment, keep the timetable and the clock offset until its own
      // registration and pongs bring new ones.
      MLOG_INFO("job %s rank %u: the node's reporting rank has gone: reports for the node now",
                job->job_id.c_str(), job->rank);
      job->registered = false;
      job->last_hello_ns = 0;
      job->share_publication = kNoPublication;
      return;
    }
    share.PublishCounters(CountersOf(job, rt_.LiveComms()), now);
  }
  following_ = true;
  int64_t offset = 0;
  int64_t error = 0;
  if (share.ReadClock(offset, error)) {
    rt_.server_minus_local_ns.store(offset);
    DeviceGate::SetServerMinusLocal(offset);
    if (!rt_.clock_valid.exchange(true)) {
      MLOG_INFO("clock offset to the scheduler (from the node's reporting rank): %lld ns",
                static_cast<long long>(offset));
    }
  }
  if (now - share.LeaderHeartbeatNs() > silence) {
    // The leader is stuck (or gone and no one has taken over yet): fail open.
    if (job->share_publication != kNoPublication && job->store.Version() != 0) {
      rt_.counters.fail_open_events.fetch_add(1);
      MLOG_WARN("job %s rank %u: the node's reporting rank silent for %lld ms: failing open",
                job->job_id.c_str(), job->rank,
                static_cast<long long>((now - share.LeaderHeartbeatNs()) / kMs));
    }
    if (job->share_publication != kNoPublication) ClearJob(job);
    job->share_publication = kNoPublication;
    return;
  }
  Timetable t;
  YieldSet yields;
  uint64_t publication = kNoPublication;
  const bool have = share.ReadTimetable(t, yields, publication);
  if (publication == kNoPublication || publication == job->share_publication) return;
  job->share_publication = publication;
  if (!have) {
    ClearJob(job);
    return;
  }
  const uint32_t check = Sanitize(t, yields);
  if (check & kTimetableRejectMask) {
    rt_.counters.timetables_rejected.fetch_add(1);
    if (reject_logs_++ < 20) {
      MLOG_WARN("rejected timetable v%llu for job %s from the node's segment (check 0x%x)",
                static_cast<unsigned long long>(t.version), job->job_id.c_str(), check);
    }
    return;
  }
  Adopt(job, t, yields, check);
}

void Client::DrainEvents() {
  const auto comms = rt_.LiveComms();
  for (CommState* c : comms) {
    CollEvent e;
    bool any = false;
    while (c->ring.Pop(e)) {
      c->tracker.Add(e);
      any = true;
    }
    if (any) {
      c->estimate = c->tracker.Estimate();
      c->gap_threshold_ns.store(c->estimate.gap_threshold_ns, std::memory_order_relaxed);
      c->phase_bytes.store(c->estimate.bytes, std::memory_order_relaxed);
      c->first_key.store(c->estimate.first_key, std::memory_order_relaxed);
      c->merge_below_ns.store(c->estimate.merge_below_ns, std::memory_order_relaxed);
    }
    if (!c->identity_known.load()) {
      int n = -1;
      int r = -1;
      auto count = Real<Fn::kCommCount>();
      auto rank = Real<Fn::kCommUserRank>();
      if (count && rank && count(c->comm, &n) == ncclSuccess && rank(c->comm, &r) == ncclSuccess &&
          n > 0 && r >= 0) {
        c->nranks.store(static_cast<uint32_t>(n));
        c->rank.store(static_cast<uint32_t>(r));
        c->identity_known.store(true);
        if (c->job->world == 0) c->job->world = static_cast<uint32_t>(n);
      }
    }
  }
  // Per job: only the communicator that carries its rhythm, while the rhythm is stable, is held.
  for (JobState* job : rt_.Jobs()) {
    CommState* rhythm = RhythmOf(job, comms);
    for (CommState* c : comms) {
      if (c->job != job) continue;
      const bool observe = c != rhythm || !MayGate(c->estimate);
      if (c->observe_only.exchange(observe, std::memory_order_relaxed) != observe) {
        MLOG_INFO("communicator %p of job %s: %s", static_cast<void*>(c->comm), job->job_id.c_str(),
                  observe ? (c == rhythm ? "no stable rhythm: observed, never held"
                                         : "not the job's rhythm: observed, never held")
                          : "carries the job's rhythm: gated");
      }
    }
  }
}

CommState* Client::RhythmOf(JobState* job, const std::vector<CommState*>& comms) {
  const PhaseEstimate* estimates[64];
  const void* owners[64];
  std::size_t n = 0;
  for (CommState* c : comms) {
    if (c->job != job || n == 64) continue;
    estimates[n] = &c->estimate;
    owners[n++] = c;
  }
  if (n == 0) return nullptr;
  const void* chosen = ChooseRhythm(job->rhythm, estimates, owners, n);
  for (CommState* c : comms) {
    if (c == chosen) return c;
  }
  return nullptr;
}

void Client::SendHellos(int64_t now) {
  static uint32_t nccl_version = 0;
  if (nccl_version == 0) {
    int v = 0;
    auto get = Real<Fn::kGetVersion>();
    if (get != nullptr && get(&v) == ncclSuccess && v > 0) nccl_version = static_cast<uint32_t>(v);
  }
  for (JobState* job : rt_.Jobs()) {
    if (job->registered || job->comms.load() == 0) continue;
    if (job->share != nullptr && !job->share->Leads()) continue;
    if (job->last_hello_ns != 0 && now - job->last_hello_ns < kHelloRetryNs) continue;
    job->last_hello_ns = now;
    job->bye_sent = false;
    proto::Hello h;
    h.job_id = job->job_id;
    h.node = rt_.GetConfig().node;
    h.rank = job->rank;
    h.world_size = job->world;
    h.priority = job->priority;
    h.pid = static_cast<uint32_t>(getpid());
    h.nccl_version = nccl_version;
    h.shim_version = kShimVersion;
    h.pod_namespace = rt_.GetConfig().pod_namespace;
    h.pod_name = rt_.GetConfig().pod_name;
    h.pod_uid = rt_.GetConfig().pod_uid;
    h.features = features_;
    proto::Encode(h, buf_);
    if (!transport_->Send(buf_)) continue;  // not connected
    rt_.counters.hellos_sent.fetch_add(1);
    if (std::find(awaiting_welcome_.begin(), awaiting_welcome_.end(), job) ==
        awaiting_welcome_.end()) {
      awaiting_welcome_.push_back(job);
    }
    MLOG_DEBUG("hello sent: job=%s rank=%u world=%u", job->job_id.c_str(), job->rank, job->world);
  }
}

void Client::SendPing(int64_t now) {
  ++ping_seq_;
  ping_t1_[ping_seq_ % 16] = now;
  Send(proto::ClockPing{ping_seq_, now});
  next_ping_ns_ = now + ClockPingIntervalNs(pings_answered_, rt_.GetConfig().silence_ns);
}

ShareCounters Client::CountersOf(const JobState* job, const std::vector<CommState*>& comms) {
  ShareCounters k;
  for (const CommState* c : comms) {
    if (c->job != job) continue;
    // Decisions made on the host (host gate, stream waits) are counted in the communicator's
    // state; the gate kernel decides on the GPU and counts in its slot.
    k.gated += c->gated.load();
    k.late += c->late.load();
    k.failed_open += c->failed_open.load();
    k.realigned += c->realigned.load();
    k.yielded += c->yielded.load();
    k.yield_wait_ns += c->yield_wait_ns.load();
    if (c->device_gate) {
      const DeviceGate::Counters d = DeviceGate::KernelCounters(c->device_slot);
      k.gated += d.waits;
      k.late += d.late;
      k.failed_open += d.failed_open;
      k.realigned += d.realigned;
      k.yielded += d.yields;
      k.yield_wait_ns += d.turn_wait_ns;
    }
  }
  return k;
}

void Client::SendReports(int64_t now) {
  const auto comms = rt_.LiveComms();
  const int64_t offset = rt_.server_minus_local_ns.load();
  for (JobState* job : rt_.Jobs()) {
    if (!job->registered || job->comms.load() == 0) continue;
    proto::ProfileReport r;
    r.job_id = job->job_id;
    r.rank = job->rank;
    ShareCounters k = CountersOf(job, comms);
    if (job->share != nullptr) k += job->share->FollowerCounters(now, rt_.GetConfig().silence_ns);
    r.gated = k.gated;
    r.late = k.late;
    r.failed_open = k.failed_open;
    r.realigned = k.realigned;
    r.yielded = k.yielded;
    r.yield_wait_ns = k.yield_wait_ns;
    // The profile of the communicator whose rhythm the gate holds (RhythmComm).
    if (CommState* main = RhythmOf(job, comms)) {
      FillProfile(main->tracker, main->estimate, offset, r);
    }
    r.clock_offset_ns = offset;
    r.clock_error_ns = sync_.ErrorBoundNs();
    r.timetable_version = job->store.Version();
    Send(r);
    rt_.counters.reports_sent.fetch_add(1);
  }
}

void Client::MarkUnregistered() {
  for (JobState* job : rt_.Jobs()) {
    job->registered = false;
    job->last_hello_ns = 0;
    job->accepted_version = 0;  // a restarted scheduler numbers its versions afresh
    job->turns_version = 0;
    job->edges_asked.store(false);
    // Its partners as that scheduler numbered them, and their edges, stop with it.
    job->turn_set = TurnSet{};
    PublishTurns(job);
  }
  awaiting_welcome_.clear();
}

void Client::CheckSilence(int64_t now) {
  if (failed_open_ || now - last_rx_ns_ <= rt_.GetConfig().silence_ns) return;
  failed_open_ = true;
  rt_.counters.fail_open_events.fetch_add(1);
  bool had_timetable = false;
  for (JobState* job : rt_.Jobs()) {
    had_timetable = had_timetable || job->store.Version() != 0;
    job->store.Clear();
    if (job->share != nullptr && job->share->Leads()) job->share->ClearTimetable();
  }
  for (CommState* c : rt_.LiveComms()) {
    if (c->device_slot >= 0) {
      DeviceGate::Publish(c->device_slot, c->device_owner, nullptr, YieldSet{}, 0);
    }
  }
  DeviceGate::ReleaseAll();
  MarkUnregistered();
  MLOG_WARN("scheduler %s silent for %lld ms: %s; will re-register when it answers",
            rt_.GetConfig().scheduler.c_str(), static_cast<long long>((now - last_rx_ns_) / kMs),
            had_timetable ? "failing open (ungated)" : "running ungated");
}

void Client::RetireComms(int64_t now) {
  // A caller may still be inside a call on a destroyed communicator (another thread aborted it
  // while this one was held at its gate and then for a turn, each up to max wait): its state
  // outlives those holds.
  const int64_t grace = kRetireGraceNs + 2 * rt_.GetConfig().max_wait_ns;
  for (CommState* c : rt_.TakeRetired(now - grace)) delete c;
  for (JobState* job : rt_.Jobs()) {
    if (job->comms.load() != 0) continue;
    if (job->share != nullptr) {
      // The job has left this process: another of its ranks on the node may lead now, with the
      // timetable the segment holds.
      delete job->share;
      job->share = nullptr;
      job->share_tried = false;
      job->share_publication = kNoPublication;
    }
    if (job->bye_sent || job->last_hello_ns == 0 || !transport_) continue;
    job->bye_sent = true;
    job->registered = false;
    job->store.Clear();
    Send(proto::Bye{job->job_id, job->rank, "communicator destroyed"});
  }
}

void Client::SendByes(const char* reason) {
  for (JobState* job : rt_.Jobs()) {
    if (job->bye_sent || job->last_hello_ns == 0) continue;
    job->bye_sent = true;
    Send(proto::Bye{job->job_id, job->rank, reason});
  }
}

}  // namespace metronome::shim
