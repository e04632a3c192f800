#include "runtime.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>

#include "client.hpp"
#include "device_gate.hpp"
#include "host_gate.hpp"
#include "log.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/nccl_datatype.hpp"
#include "node_share.hpp"
#include "real_nccl.hpp"

namespace metronome::shim {

std::atomic<bool> g_shim_active{false};

namespace {

std::atomic<Runtime*> g_runtime{nullptr};
// A removed slot: the address of a byte no CommState can have (not an integer cast, which
// performance-no-int-to-ptr flags).
alignas(CommState) unsigned char g_tombstone_byte;
CommState* const kTombstone = reinterpret_cast<CommState*>(&g_tombstone_byte);

thread_local ThreadState t_state __attribute__((tls_model("initial-exec")));

size_t HashPtr(const void* p) {
  uint64_t x = reinterpret_cast<uintptr_t>(p);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<size_t>(x);
}

uint64_t Fnv1a(const void* data, size_t n) {
  const auto* b = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

void AtforkPrepare() {
  Runtime::Get().PrepareFork();
}
void AtforkParent() {
  Runtime::Get().ParentAfterFork();
}
void AtforkChild() {
  Runtime::Get().ChildAfterFork();
}

void AtExit() {
  Runtime* rt = g_runtime.load();
  if (rt != nullptr) rt->StopClient(300'000'000);
}

// Runs when the shim is loaded: reads the settings. Starts nothing.
__attribute__((constructor)) void ShimLoad() {
  Runtime& rt = Runtime::Get();
  (void)rt;
  pthread_atfork(&AtforkPrepare, &AtforkParent, &AtforkChild);
  DetectStaticNccl();
}

}  // namespace

ThreadState& Tls() noexcept {
  return t_state;
}

size_t DataTypeSize(ncclDataType_t t) noexcept {
  // An unknown type still counts its elements (as bytes): the profile only needs a size.
  const size_t size = NcclTypeSize(t);
  return size != 0 ? size : 1;
}

Runtime& Runtime::Get() noexcept {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (__builtin_expect(rt != nullptr, 1)) return *rt;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  rt = g_runtime.load();
  if (rt == nullptr) {
    alignas(Runtime) static unsigned char storage[sizeof(Runtime)];
    Config c;
    try {
      c = ConfigFromEnv();
    } catch (...) {
    }
    SetLogLevel(c.log_level);
    rt = new (storage) Runtime(c);  // never destroyed
    g_runtime.store(rt, std::memory_order_release);
    if (!c.warnings.empty()) MLOG_WARN("settings: %s", c.warnings.c_str());
    MLOG_DEBUG("loaded: mode=%s gate=%s scheduler=%s", ModeName(c.mode), GateKindName(c.gate),
               c.scheduler.c_str());
  }
  return *rt;
}

void Runtime::InstallForTesting(Runtime* rt) noexcept {
  g_runtime.store(rt, std::memory_order_release);
  g_shim_active.store(rt != nullptr && rt->GetMode() != Mode::kOff);
}

Runtime::Runtime(const Config& c) : config_(c), mode_(c.mode) {
  g_shim_active.store(mode_ != Mode::kOff);
}

std::string Runtime::DeriveJobId(const CommOrigin& o) const {
  if (!config_.job.empty()) return config_.job;
  char buf[64];
  if (o.id != nullptr) {
    std::snprintf(buf, sizeof(buf), "nccl-%016llx",
                  static_cast<unsigned long long>(Fnv1a(o.id->internal, sizeof(o.id->internal))));
    return buf;
  }
  const std::string host = config_.node + "/" + std::to_string(getpid());
  std::snprintf(buf, sizeof(buf), "local-%016llx",
                static_cast<unsigned long long>(Fnv1a(host.data(), host.size())));
  return buf;
}

bool Runtime::Insert(CommState* st) noexcept {
  const size_t h = HashPtr(st->comm);
  for (size_t i = 0; i < kTableSize; ++i) {
    auto& slot = table_[(h + i) % kTableSize];
    CommState* cur = slot.load(std::memory_order_relaxed);
    if (cur == nullptr || cur == kTombstone) {
      slot.store(st, std::memory_order_release);
      return true;
    }
  }
  return false;
}

CommState* Runtime::Find(ncclComm_t comm) const noexcept {
  const size_t h = HashPtr(comm);
  for (size_t i = 0; i < kTableSize; ++i) {
    CommState* cur = table_[(h + i) % kTableSize].load(std::memory_order_acquire);
    if (cur == nullptr) return nullptr;
    if (cur != kTombstone && cur->comm == comm) return cur;
  }
  return nullptr;
}

CommState* Runtime::OnCommCreated(ncclComm_t comm, const CommOrigin& origin) noexcept {
  if (comm == nullptr || mode_ == Mode::kOff) return nullptr;
  CommState* st = nullptr;
  try {
    st = new CommState();
    st->comm = comm;
    int nranks = origin.nranks;
    int rank = origin.rank;
    if (nranks < 0 || rank < 0) {
      auto count = Real<Fn::kCommCount>();
      auto user_rank = Real<Fn::kCommUserRank>();
      if (count == nullptr || count(comm, &nranks) != ncclSuccess) nranks = -1;
      if (user_rank == nullptr || user_rank(comm, &rank) != ncclSuccess) rank = -1;
    }
    if (nranks >= 0 && rank >= 0) {
      st->nranks.store(static_cast<uint32_t>(nranks));
      st->rank.store(static_cast<uint32_t>(rank));
      st->identity_known.store(true);
    }
    st->gap_threshold_ns.store(st->tracker.Estimate().gap_threshold_ns);

    // The device gate is prepared here, where the communicator's CUDA context is current.
    if (mode_ == Mode::kEnforce && config_.gate != GateKind::kHost) {
      st->device_slot = DeviceGate::Prepare(comm, config_.max_wait_ns, st->device_owner);
      st->device_gate = st->device_slot >= 0;
      if (!st->device_gate && config_.gate == GateKind::kDevice && !no_gpu_logged_) {
        MLOG_WARN("METRONOME_GATE=device but the device gate is unavailable: using the host gate");
      }
    }

    std::lock_guard<std::mutex> lock(mu_);
    // The job: a split communicator belongs to its parent's; otherwise (job id, rank).
    JobState* job = nullptr;
    if (origin.parent != nullptr) {
      if (CommState* parent = Find(origin.parent)) job = parent->job;
    }
    if (job == nullptr) {
      const std::string id = DeriveJobId(origin);
      const uint32_t r = st->rank.load();
      for (JobState* j : jobs_) {
        if (j->job_id == id && j->rank == r && j->comms.load() > 0) job = j;
      }
      if (job == nullptr) {
        job = new JobState();
        job->job_id = id;
        job->rank = r;
        job->world = st->nranks.load();
        job->priority = config_.priority;
        jobs_.push_back(job);
      }
    }
    job->comms.fetch_add(1);
    st->job = job;
    if (st->device_slot >= 0) {
      // A communicator joining a job that already has a timetable (a split one) gates at once.
      Timetable t;
      YieldSet y;
      if (job->store.Read(t, y) && (!AlwaysOpen(t) || y.count > 0)) {
        DeviceGate::Publish(st->device_slot, st->device_owner, &t, y, config_.max_wait_ns);
      }
    }
    if (!Insert(st)) {
      MLOG_WARN("more than %zu communicators: %p is not tracked", kTableSize,
                static_cast<void*>(comm));
      job->comms.fetch_sub(1);
      if (st->device_slot >= 0) DeviceGate::ReleaseSlot(st->device_slot);
      delete st;
      return nullptr;
    }
    comms_.push_back(st);
    MLOG_INFO("communicator %p created (%s): job=%s rank=%u/%u gate=%s", static_cast<void*>(comm),
              origin.how, job->job_id.c_str(), st->rank.load(), st->nranks.load(),
              mode_ == Mode::kObserve ? "none (observe)" : (st->device_gate ? "device" : "host"));
  } catch (...) {
    delete st;
    return nullptr;
  }
  StartClientOnce();
  return st;
}

void Runtime::OnCommDestroyed(ncclComm_t comm, const char* how) noexcept {
  if (comm == nullptr || mode_ == Mode::kOff) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t h = HashPtr(comm);
    for (size_t i = 0; i < kTableSize; ++i) {
      auto& slot = table_[(h + i) % kTableSize];
      CommState* cur = slot.load();
      if (cur == nullptr) return;
      if (cur == kTombstone || cur->comm != comm) continue;
      slot.store(kTombstone, std::memory_order_release);
      for (size_t k = 0; k < comms_.size(); ++k) {
        if (comms_[k] == cur) {
          comms_.erase(comms_.begin() + static_cast<long>(k));
          break;
        }
      }
      cur->retired_at_ns = RealtimeNs();
      cur->job->comms.fetch_sub(1);
      DeviceGate::Counters kernel;  // what the gate kernel decided on the GPU (none: zeros)
      if (cur->device_slot >= 0) {
        kernel = DeviceGate::KernelCounters(cur->device_slot);
        DeviceGate::ReleaseSlot(cur->device_slot);
      }
      retired_.push_back(cur);
      MLOG_INFO(
          "communicator %p %s: job=%s rank=%u collectives=%llu phases=%llu gated=%llu "
          "late=%llu failed_open=%llu realigned=%llu",
          static_cast<void*>(comm), how, cur->job->job_id.c_str(), cur->rank.load(),
          static_cast<unsigned long long>(cur->calls.load()),
          static_cast<unsigned long long>(cur->phase_starts.load()),
          static_cast<unsigned long long>(cur->gated.load() + kernel.waits),
          static_cast<unsigned long long>(cur->late.load() + kernel.waits + kernel.failed_open),
          static_cast<unsigned long long>(cur->failed_open.load() + kernel.failed_open),
          static_cast<unsigned long long>(cur->realigned.load() + kernel.realigned));
      return;
    }
  } catch (...) {
  }
}

void Runtime::OnCommPaused(ncclComm_t comm, bool paused, const char* how) noexcept {
  CommState* st = Find(comm);
  if (st == nullptr || st->paused.exchange(paused) == paused) return;
  MLOG_INFO("communicator %p %s: %s", static_cast<void*>(comm), how,
            paused ? "no longer tracked or gated" : "tracked and gated again");
}

int Runtime::TrafficClass() const noexcept {
  return config_.traffic_class[TrafficClassIndex(config_.priority)];
}

uint64_t Runtime::Parts(uint64_t bytes) const noexcept {
  if (mode_ != Mode::kEnforce || t_state.group_depth != 0) return 1;
  return ChunkParts(bytes, config_.chunk_bytes);
}

Runtime::CallToken Runtime::BeforeCollective(CommState* st, Op op, uint64_t bytes,
                                             cudaStream_t stream) noexcept {
  CallToken tok;
  if (st == nullptr || st->paused.load(std::memory_order_relaxed)) return tok;
  tok.st = st;
  tok.op = static_cast<uint32_t>(op);
  tok.bytes = bytes;
  tok.stream = stream;
  tok.start_ns = RealtimeNs();
  const int64_t gap = tok.start_ns - st->last_end_ns.load(std::memory_order_relaxed);
  const uint64_t calls = st->calls.load(std::memory_order_relaxed);
  bool phase_start = calls == 0 || gap > st->gap_threshold_ns.load(std::memory_order_relaxed);
  if (phase_start && calls != 0) {
    // Same rule as the tracker: a moderate gap before a collective that is not the phase's
    // first (by signature) is a bucket waiting for compute, not a new phase.
    const uint64_t fk = st->first_key.load(std::memory_order_relaxed);
    const int64_t merge_below = st->merge_below_ns.load(std::memory_order_relaxed);
    if (fk != 0 && fk != PhaseTracker::Key(tok.op, bytes) && gap < merge_below) {
      phase_start = false;
    }
  }
  if (phase_start) {
    st->phase_issued = 0;
    st->phase_starts.store(st->phase_starts.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
    ThreadState& ts = t_state;
    const bool group_done = ts.group_depth > 0 && ts.group_gated;
    if (mode_ == Mode::kEnforce && !group_done &&
        !st->observe_only.load(std::memory_order_relaxed)) {
      if (ts.group_depth > 0) ts.group_gated = true;
      // The phase starts when the gate lets it go: that is what the tracker and the scheduler
      // (which judges phase starts against the windows) must see.
      bool turns_on_stream = false;
      int64_t released = Gate(st, stream, bytes, true, &turns_on_stream);
      if (!turns_on_stream) {
        if (const int64_t turned = TakeTurn(st, stream, tok.start_ns); turned != 0) {
          released = turned;
        }
      }
      if (released != 0) {
        tok.hold_ns = std::max<int64_t>(released - tok.start_ns, 0);
        tok.start_ns = released;
      }
    }
    if (!st->observe_only.load(std::memory_order_relaxed)) {
      st->edge_begun_ns.store(tok.start_ns, std::memory_order_relaxed);
    }
  } else if (mode_ == Mode::kEnforce && t_state.group_depth == 0 && st->job->store.MayYield() &&
             !st->observe_only.load(std::memory_order_relaxed)) {
    // Inside a phase: the collective yields to the higher-ranked windows, if there are any.
    const int64_t released = Gate(st, stream, bytes, false);
    if (released != 0) {
      tok.hold_ns = std::max<int64_t>(released - tok.start_ns, 0);
      tok.start_ns = released;
    }
  }
  st->phase_issued += bytes;  // after the gate: the rest of the phase it judged began with these
  return tok;
}

void Runtime::AfterCollective(const CallToken& t, ncclResult_t r) noexcept {
  CommState* st = t.st;
  if (st == nullptr) return;
  if (r == ncclInProgress && !st->nonblocking.load(std::memory_order_relaxed)) {
    st->nonblocking.store(true, std::memory_order_relaxed);
  }
  const int64_t end = RealtimeNs();
  st->last_end_ns.store(end, std::memory_order_relaxed);
  // The caller's thread alone writes the pace (NCCL: one thread per communicator), and only
  // for a job that yields: no one else reads it.
  if (st->job->store.MayYield()) {
    WirePace pace{st->ns_per_byte.load(std::memory_order_relaxed)};
    UpdatePace(pace, t.bytes, end - t.start_ns);
    st->ns_per_byte.store(pace.ns_per_byte, std::memory_order_relaxed);
  }
  st->calls.store(st->calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // The collective that completes the phase's bytes ends the phase (the first such one).
  const uint64_t phase_bytes = st->phase_bytes.load(std::memory_order_relaxed);
  if (phase_bytes != 0 && st->phase_issued >= phase_bytes &&
      st->edge_ended_ns.load(std::memory_order_relaxed) <
          st->edge_begun_ns.load(std::memory_order_relaxed)) {
    st->edge_ended_ns.store(end, std::memory_order_relaxed);
    // On a GPU the call returned once enqueued: the phase ends on the wire when the stream gets
    // past this collective, which a kernel enqueued after it stamps (after its group, if any).
    // Not after a call that failed (nothing to wait for) or that NCCL enqueues later itself
    // (ncclInProgress): the kernel would stamp before the collective ran.
    if (st->device_gate && r == ncclSuccess && !st->nonblocking.load(std::memory_order_relaxed) &&
        st->job->edges_asked.load(std::memory_order_relaxed)) {
      ThreadState& ts = t_state;
      if (ts.group_depth > 0) {
        int i = 0;
        while (i < ts.n_end_edges && ts.end_edges[i].st != st) ++i;
        if (i < ThreadState::kMaxGroupEdges) {
          ts.end_edges[i] = {st, t.stream};
          if (i == ts.n_end_edges) ++ts.n_end_edges;
        }
      } else {
        DeviceGate::EnqueueEndEdge(st->device_slot, t.stream);
      }
    }
  }
  st->ring.Push(CollEvent{t.start_ns, end, t.op, t.bytes, t.hold_ns});
}

void Runtime::AfterGroup(ThreadState& ts, ncclResult_t r) noexcept {
  for (int i = 0; i < ts.n_end_edges; ++i) {
    const ThreadState::EndEdge& e = ts.end_edges[i];
    if (r == ncclSuccess) {
      DeviceGate::EnqueueEndEdge(e.st->device_slot, e.stream);
    } else if (r == ncclInProgress) {
      e.st->nonblocking.store(true, std::memory_order_relaxed);  // NCCL launches the group later
    }
  }
  ts.n_end_edges = 0;
}

bool Runtime::TurnsOnStream(const CommState* st) noexcept {
  return st->device_gate && !st->nonblocking.load(std::memory_order_relaxed) &&
         (st->job->turns.MayTakeTurns() || st->job->edges_asked.load(std::memory_order_relaxed));
}

int64_t Runtime::Gate(CommState* st, cudaStream_t stream, uint64_t bytes, bool phase_start,
                      bool* turns_on_stream) noexcept {
  Timetable tt;
  // Most jobs yield to nothing: the set (600 bytes) is neither read nor even zeroed for them.
  std::optional<YieldSet> set;
  uint64_t publication = 0;
  if (st->job->store.MayYield()) {
    if (!st->job->store.Read(tt, set.emplace(), &publication)) return 0;  // no timetable: go
  } else if (!st->job->store.Read(tt)) {
    return 0;
  }
  const YieldSet& yields = set ? *set : kNoYields;
  if (!clock_valid.load(std::memory_order_relaxed)) return 0;  // no common clock: go
  // The scheduler's "no gate" and nothing to yield to: DecideRankedGate would let the phase go;
  // nothing is enqueued on the stream for it either (no kernel launch, no stream wait) and
  // nothing is counted. Inside a phase only the yields hold a collective.
  if (yields.count == 0 && (!phase_start || AlwaysOpen(tt))) return 0;
  YieldRequest y{nullptr, 0, phase_start};
  if (set) {
    FollowSet(st->yield_cursor, publication);
    const WirePace pace{st->ns_per_byte.load(std::memory_order_relaxed)};
    const uint64_t phase_bytes = st->phase_bytes.load(std::memory_order_relaxed);
    y = {&*set, PacedNeed(*set, pace, bytes, phase_bytes), phase_start, &st->yield_cursor,
         PhaseRest(*set, pace, bytes, st->phase_issued, phase_bytes)};
  }
  const int64_t offset = server_minus_local_ns.load(std::memory_order_relaxed);
  if (st->device_gate) {  // also on the legacy default stream (0)
    DeviceGate::HostDecision host;
    const bool turns = phase_start && turns_on_stream != nullptr && TurnsOnStream(st);
    if (DeviceGate::Enqueue(st->device_slot, stream, tt, y, offset, config_.max_wait_ns,
                            st->gate_memory, host, turns)) {
      if (!host.decided && turns) *turns_on_stream = true;
      // The kernel counts its own decisions; a stream wait's are counted here, as the host
      // gate's (the wait itself happens on the stream, so no waited time).
      if (host.decided) {
        if (host.decision.yielded) st->yielded.fetch_add(1, std::memory_order_relaxed);
        if (phase_start) {
          Count(st, host.decision.action, host.decision.lateness_ns, tt, 0,
                host.decision.realigned);
        }
      }
      return 0;
    }
  }
  // A host wait must not happen while the stream is captured into a CUDA graph.
  if (stream != nullptr && DeviceGate::StreamIsCapturing(stream)) {
    st->capture_passes.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  const bool realign = phase_start && MustRealign(st->gate_memory);
  const HostGateOutcome o =
      HostGate(tt, y, RealtimeNs(), offset, config_.max_wait_ns, true, realign);
  if (o.yielded) {
    st->yielded.fetch_add(1, std::memory_order_relaxed);
    st->yield_wait_ns.fetch_add(o.waited_ns, std::memory_order_relaxed);
  }
  if (phase_start) {
    Remember(st->gate_memory, o.realigned);
    Count(st, o.action, o.lateness_ns, tt, o.waited_ns, o.realigned);
  }
  return o.action == GateAction::kWaitUntil ? RealtimeNs() : 0;
}

int64_t Runtime::TakeTurn(CommState* st, cudaStream_t stream, int64_t arrival_ns) noexcept {
  if (st->device_gate) {
    if (TurnsOnStream(st)) DeviceGate::EnqueueTurns(st->device_slot, stream);
    return 0;
  }
  if (!calls_complete_on_host.load(std::memory_order_relaxed)) return 0;
  TurnStore& turns = st->job->turns;
  if (!turns.MayTakeTurns() || !clock_valid.load(std::memory_order_relaxed)) {
    st->turns_in_a_row = 0;
    return 0;
  }
  // Edges arrive on the background thread: each step reads them again. Bounded twice: by the
  // decision (one natural period from arrival, within max wait) and by the steps themselves.
  constexpr int64_t kStepNs = 250'000;
  const int64_t max_steps =
      std::min(config_.max_wait_ns, TimetableLimits{}.max_wait_cap_ns) / kStepNs + 2;
  const int64_t offset = server_minus_local_ns.load(std::memory_order_relaxed);
  const int64_t start = RealtimeNs();
  bool held = false;
  TurnSet s;
  for (int64_t step = 0; step < max_steps && turns.Read(s); ++step) {
    const int64_t now = RealtimeNs();
    const TurnDecision d =
        DecideTurn(s, SaturatingAdd(arrival_ns, offset), SaturatingAdd(now, offset),
                   config_.max_wait_ns, st->turns_in_a_row);
    if (!d.hold) break;
    held = true;
    SleepUntilRealtime(std::min(SaturatingSub(d.until_ns, offset), now + kStepNs), 0);
  }
  st->turns_in_a_row = held ? st->turns_in_a_row + 1 : 0;
  if (!held) return 0;
  const int64_t released = RealtimeNs();
  st->yielded.fetch_add(1, std::memory_order_relaxed);
  st->yield_wait_ns.fetch_add(released - start, std::memory_order_relaxed);
  return released;
}

void Runtime::Count(CommState* st, GateAction action, int64_t lateness_ns, const Timetable& tt,
                    int64_t waited_ns, bool realigned) noexcept {
  if (realigned) st->realigned.fetch_add(1, std::memory_order_relaxed);
  GateDecision d;
  d.action = action;
  d.lateness_ns = lateness_ns;
  if (CountsLate(d, tt)) st->late.fetch_add(1, std::memory_order_relaxed);
  if (action == GateAction::kWaitUntil) {
    st->gated.fetch_add(1, std::memory_order_relaxed);
    st->waited_ns.fetch_add(waited_ns, std::memory_order_relaxed);
  } else if (action == GateAction::kFailOpen) {
    st->failed_open.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<CommState*> Runtime::LiveComms() {
  std::lock_guard<std::mutex> lock(mu_);
  return comms_;
}

std::vector<JobState*> Runtime::Jobs() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_;
}

std::vector<CommState*> Runtime::TakeRetired(int64_t older_than_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CommState*> out;
  std::vector<CommState*> keep;
  for (CommState* c : retired_) (c->retired_at_ns < older_than_ns ? out : keep).push_back(c);
  retired_.swap(keep);
  return out;
}

void Runtime::StartClientOnce() noexcept {
  if (mode_ == Mode::kOff || client_started_.exchange(true)) return;
  try {
    auto* c = new Client(*this);
    client_ = c;
    if (!c->Start()) {
      MLOG_ERROR("background thread could not start: running ungated");
      return;
    }
    static std::atomic<bool> atexit_registered{false};
    if (!atexit_registered.exchange(true)) std::atexit(&AtExit);
  } catch (...) {
    MLOG_ERROR("background thread could not start: running ungated");
  }
}

void Runtime::StopClient(int64_t timeout_ns) noexcept {
  auto* c = static_cast<Client*>(client_);
  if (c != nullptr) c->Stop(timeout_ns);
}

void Runtime::PrepareFork() noexcept {
  mu_.lock();
}
void Runtime::ParentAfterFork() noexcept {
  mu_.unlock();
}

void Runtime::ChildAfterFork() noexcept {
  mu_.unlock();
  // The child has no background thread and must not touch the parent's connection or CUDA
  // state: close the inherited descriptors, forget the rest (leaked on purpose), start clean.
  if (client_ != nullptr) static_cast<Client*>(client_)->AbandonAfterFork();
  client_ = nullptr;
  for (JobState* j : jobs_) {
    if (j->share != nullptr) j->share->AbandonAfterFork();  // the lock stays the parent's
  }
  client_started_.store(false);
  for (auto& slot : table_) slot.store(nullptr, std::memory_order_relaxed);
  comms_.clear();
  jobs_.clear();
  retired_.clear();
  clock_valid.store(false);
  server_minus_local_ns.store(0);
  t_state = ThreadState{};
  DeviceGate::ForgetAfterFork();
}

}  // namespace metronome::shim
