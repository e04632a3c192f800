#include "device_gate.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "cuda_driver.hpp"
#include "gpu_timer.hpp"
#include "host_gate.hpp"
#include "log.hpp"
#include "metronome/common/clock.hpp"

#if METRONOME_HAVE_GATE_KERNEL
#include "gate_fatbin.inc"  // kGateFatbin: the kernels, for sm_75/80/90 + compute_90 PTX
#endif

namespace metronome::shim {

namespace {

struct ContextEntry {
  CUcontext ctx = nullptr;
  // Read on the caller's path; lowered (kernel -> stream waits -> host gate) by Degrade when the
  // driver fails or a kernel overstays, never raised again.
  std::atomic<DeviceGateStatus> status{DeviceGateStatus::kUnavailable};
  CUfunction gate = nullptr;
  CUfunction edge = nullptr;  // the end-edge kernel
  // Calibrated under State::mu (when the context is first prepared, then by Recalibrate on the
  // background thread); its offset read anywhere.
  GpuTimer timer;
};

constexpr int kMaxContexts = 16;

// A stream wait's release: ticket `ticket` at `until_mono` (CLOCK_MONOTONIC, so that a step of
// the wall clock does not move it). The ticket is stored last (release).
struct PendingWait {
  std::atomic<int64_t> until_mono{0};
  std::atomic<uint32_t> ticket{0};
};
// Waits one communicator may have pending: a host more than this many gated collectives ahead of
// its GPU has the oldest released at once.
constexpr uint32_t kPendingWaits = 16;

// Tickets compare in the wrap-around sense, as the driver's GEQ wait does.
bool TicketReached(uint32_t value, uint32_t ticket) {
  return static_cast<int32_t>(value - ticket) >= 0;
}

struct State {
  std::mutex mu;
  bool logged_unavailable = false;
  CudaDriver drv;                   // loaded under `mu`
  DeviceGateSlot* slots = nullptr;  // host view, kMaxSlots of them
  CUdeviceptr slots_dev = 0;        // device view
  bool used[DeviceGate::kMaxSlots] = {};
  // Who holds each slot (Prepare's count; 0: free): written under `mu`, read by Edges without it.
  std::atomic<uint64_t> owner[DeviceGate::kMaxSlots] = {};
  uint64_t prepared = 0;
  std::atomic<uint64_t> fallbacks{0};
  int64_t next_recalibration_check_ns = 0;  // background thread
  // Edges: each slot's last kernel stamps (begin, end) and their local times, converted once, so
  // that a new calibration does not move an edge already sent.
  int64_t edge_gpu[DeviceGate::kMaxSlots][2] = {};
  int64_t edge_local[DeviceGate::kMaxSlots][2] = {};
  ContextEntry* slot_ctx[DeviceGate::kMaxSlots] = {};
  ContextEntry contexts[kMaxContexts];
  int n_contexts = 0;
  // Stream-wait gate: tickets issued (callers), each ticket's release time (a ring per slot,
  // written by the caller that took the ticket), and the last one the background thread
  // released. Only while the background thread runs (ServeWaits): nothing else releases them.
  std::atomic<uint32_t> issued[DeviceGate::kMaxSlots] = {};
  PendingWait pending[DeviceGate::kMaxSlots][kPendingWaits];
  uint32_t serviced[DeviceGate::kMaxSlots] = {};  // background thread
  std::atomic<bool> waits_served{false};
  std::atomic<int64_t> server_minus_local{0};
  std::atomic<int> wake_fd{-1};
  std::atomic<bool> any{false};
  std::atomic<bool> disabled{false};  // in a forked child
  // How StreamIsCapturing asks (CaptureQuery); resolved once, by Prepare or the first query.
  std::atomic<int> capture_query{0};
  std::atomic<int (*)(cudaStream_t, int*)> capture_runtime{nullptr};
  // The watchdog (background thread): the kernel launch count it last saw running on each slot,
  // and since when (local time).
  uint64_t watched_launch[DeviceGate::kMaxSlots] = {};
  int64_t watched_since[DeviceGate::kMaxSlots] = {};
};

State& S() {
  static State* s = new State();  // never destroyed
  return *s;
}

// Moves a slot's release word up to `ticket`, never back: the background thread, a communicator's
// end and the client's stop all write it, and a stream wait whose ticket was released once must
// not be held again (the GPU may reach it later).
void RaiseRelease(DeviceGateSlot& g, uint32_t ticket) {
  auto* word = const_cast<uint32_t*>(&g.release);
  uint32_t cur = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  while (
      !TicketReached(cur, ticket) &&
      !__atomic_compare_exchange_n(word, &cur, ticket, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
}

// How a stream's capture status is asked: the application's CUDA runtime where it has one (its
// own answer), else the driver's entry point, else not at all (no CUDA: nothing is captured).
enum CaptureQuery : int { kCaptureUnresolved = 0, kCaptureRuntime, kCaptureDriver, kCaptureNone };

// Under s.mu. The runtime function is stored before the state that says to use it (release).
void ResolveCaptureQuery(State& s) {
  if (s.capture_query.load(std::memory_order_acquire) != kCaptureUnresolved) return;
  using RuntimeFn = int (*)(cudaStream_t, int*);
  const auto found = reinterpret_cast<RuntimeFn>(dlsym(RTLD_DEFAULT, "cudaStreamIsCapturing"));
  s.capture_runtime.store(found, std::memory_order_relaxed);
  int q = kCaptureNone;
  if (found != nullptr) {
    q = kCaptureRuntime;
  } else if (!s.disabled.load() && s.drv.Load(false) && s.drv.stream_is_capturing != nullptr) {
    q = kCaptureDriver;
  }
  s.capture_query.store(q, std::memory_order_release);
}

void LogUnavailableOnce(State& s, const char* why) {
  if (s.logged_unavailable) return;
  s.logged_unavailable = true;
  MLOG_INFO("device gate unavailable (%s): using the host gate", why);
}

// The next gate down for a context whose driver failed: stream waits where the driver has them
// (and they have not failed themselves), else the host gate. Logged once per step; lock-free
// (the caller's path calls it when a launch fails).
void Degrade(State& s, ContextEntry& e, const char* why, int code) {
  DeviceGateStatus cur = e.status.load();
  DeviceGateStatus next = DeviceGateStatus::kUnavailable;
  if (cur == DeviceGateStatus::kKernel && s.drv.stream_wait_value32 != nullptr) {
    next = DeviceGateStatus::kWaitValue;
  }
  if (cur == DeviceGateStatus::kUnavailable || !e.status.compare_exchange_strong(cur, next)) return;
  s.fallbacks.fetch_add(1);
  const char* then = next == DeviceGateStatus::kWaitValue ? "stream waits" : "the host gate";
  if (code != 0) {
    MLOG_WARN("device gate: %s (CUDA error %d): %s from now on", why, code, then);
  } else {
    MLOG_WARN("device gate: %s: %s from now on", why, then);
  }
}

ContextEntry* EntryFor(State& s, CUcontext ctx) {
  for (int i = 0; i < s.n_contexts; ++i) {
    if (s.contexts[i].ctx == ctx) return &s.contexts[i];
  }
  if (s.n_contexts >= kMaxContexts) return nullptr;
  ContextEntry* e = &s.contexts[s.n_contexts++];
  e->ctx = ctx;
  CudaDriver& d = s.drv;
  CUdevice dev = 0;
  int major = 0;
  int minor = 0;
  if (d.ctx_get_device(&dev) == CUDA_SUCCESS) {
    d.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    d.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  }
#if METRONOME_HAVE_GATE_KERNEL
  if (major * 10 + minor >= 75) {
    CUmodule mod = nullptr;
    if (d.module_load_data(&mod, kGateFatbin) == CUDA_SUCCESS &&
        d.module_get_function(&e->gate, mod, "metronome_gate_kernel") == CUDA_SUCCESS &&
        d.module_get_function(&e->edge, mod, "metronome_edge_kernel") == CUDA_SUCCESS) {
      char why[96] = "";
      if (e->timer.Prepare(d, mod, why, sizeof(why)) &&
          e->timer.Calibrate(d, RealtimeNs(), 200'000'000, true, why, sizeof(why))) {
        e->status.store(DeviceGateStatus::kKernel);
        MLOG_INFO(
            "device gate: spin kernel loaded for sm_%d%d; GPU timer calibrated against the host "
            "clock (host - gpu = %lld ns)",
            major, minor, static_cast<long long>(e->timer.HostMinusGpuNs()));
        return e;
      }
      // Its waits would aim at the wrong moments: the host decides instead.
      s.fallbacks.fetch_add(1);
      const bool waits = d.stream_wait_value32 != nullptr;
      if (waits) e->status.store(DeviceGateStatus::kWaitValue);
      MLOG_WARN("device gate: the GPU timer cannot be calibrated (%s): %s from now on", why,
                waits ? "stream waits" : "the host gate");
      return e;
    }
    s.fallbacks.fetch_add(1);
    MLOG_WARN("device gate: the kernel does not load on sm_%d%d", major, minor);
  }
#endif
  if (d.stream_wait_value32 != nullptr) {
    e->status.store(DeviceGateStatus::kWaitValue);
    MLOG_INFO(
        "device gate: sm_%d%d has no gate kernel: using stream waits "
        "(cuStreamWaitValue32) released by the background thread",
        major, minor);
  }
  return e;
}

// The slot's context while it gates with the kernel; nullptr otherwise (or for no slot).
ContextEntry* KernelContext(State& s, int slot) {
  if (slot < 0 || slot >= DeviceGate::kMaxSlots || s.slots == nullptr) return nullptr;
  ContextEntry* e = s.slot_ctx[slot];
  if (e == nullptr || e->status.load(std::memory_order_relaxed) != DeviceGateStatus::kKernel) {
    return nullptr;
  }
  return e;
}

CUdeviceptr SlotOnDevice(const State& s, int slot) {
  return s.slots_dev + static_cast<CUdeviceptr>(slot) * sizeof(DeviceGateSlot);
}

// One block of 32 threads of `f` on `stream` (the kernels use one). A launch that fails lowers
// the context's gate (Degrade) and returns false.
bool Launch(State& s, ContextEntry& e, CUfunction f, cudaStream_t stream, void** params,
            const char* why) {
  const CUresult r = s.drv.launch_kernel(f, 1, 1, 1, 32, 1, 1, 0,
                                         reinterpret_cast<CUstream>(stream), params, nullptr);
  if (r == CUDA_SUCCESS) return true;
  Degrade(s, e, why, static_cast<int>(r));
  return false;
}

// Whether `owner` still holds `slot` (a stale list of communicators may name a slot released and
// handed out again since).
bool Owns(const State& s, int slot, uint64_t owner) {
  return slot >= 0 && slot < DeviceGate::kMaxSlots && s.slots != nullptr && owner != 0 &&
         s.owner[slot].load(std::memory_order_acquire) == owner;
}

// With `mu` held, as every writer of a slot's sequence locks: two writers interleaving their
// increments could leave one odd, and every kernel would then fail open.
void WriteServerOffset(State& s, int slot) {
  const ContextEntry* e = s.slot_ctx[slot];
  if (e == nullptr) return;
  DeviceGateSlot& g = s.slots[slot];
  const int64_t v = s.server_minus_local.load() + e->timer.HostMinusGpuNs();
  g.seq = g.seq + 1;
  __sync_synchronize();
  g.server_minus_gpu_ns = v;
  __sync_synchronize();
  g.seq = g.seq + 1;
}

}  // namespace

int DeviceGate::Prepare(ncclComm_t comm, int64_t max_wait_cap_ns, uint64_t& owner) noexcept {
  (void)comm;
  owner = 0;
  State& s = S();
  if (s.disabled.load()) return -1;
  std::lock_guard<std::mutex> lock(s.mu);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): Metronome never calls setenv
  const char* gate_env = std::getenv("METRONOME_GATE");
  const bool force = gate_env != nullptr && std::strcmp(gate_env, "device") == 0;
  if (!s.drv.Load(force)) {
    LogUnavailableOnce(s, force ? "no GPU driver: libcuda.so.1 not found"
                                : "this process does not use CUDA (libcuda.so.1 not loaded)");
    return -1;
  }
  // Resolved here, off the caller's path (a communicator's set-up), so that its first query
  // finds it.
  ResolveCaptureQuery(s);
  CUcontext ctx = nullptr;
  if (s.drv.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    LogUnavailableOnce(s, "no GPU or no current CUDA context");
    return -1;
  }
  if (s.slots == nullptr) {
    void* host = nullptr;
    if (s.drv.mem_host_alloc(&host, sizeof(DeviceGateSlot) * kMaxSlots,
                             CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) !=
            CUDA_SUCCESS ||
        s.drv.mem_host_get_device_pointer(&s.slots_dev, host, 0) != CUDA_SUCCESS) {
      LogUnavailableOnce(s, "mapped host memory unavailable");
      return -1;
    }
    std::memset(host, 0, sizeof(DeviceGateSlot) * kMaxSlots);
    s.slots = static_cast<DeviceGateSlot*>(host);
  }
  ContextEntry* e = EntryFor(s, ctx);
  if (e == nullptr || e->status == DeviceGateStatus::kUnavailable) {
    LogUnavailableOnce(s, "neither the gate kernel nor stream waits work on this GPU");
    return -1;
  }
  for (int i = 0; i < kMaxSlots; ++i) {
    if (s.used[i]) continue;
    s.used[i] = true;
    s.slot_ctx[i] = e;
    DeviceGateSlot& g = s.slots[i];
    g.seq = g.seq + 2;  // keep it even
    g.valid = 0;
    g.since_realign = GateMemory{}.since_realign;
    g.realigned = 0;
    g.waits = 0;  // the counts the communicator reports are its own
    g.failed_open = 0;
    g.late = 0;
    g.yields = 0;
    g.max_wait_cap_ns = max_wait_cap_ns;
    g.turn_seq = g.turn_seq + 2;
    g.turn_count = 0;
    g.turns_in_a_row = 0;
    g.turn_wait_ns = 0;
    g.edge_begun_gpu_ns = 0;
    g.edge_ended_gpu_ns = 0;
    RaiseRelease(g, s.issued[i].load());
    WriteServerOffset(s, i);
    owner = ++s.prepared;
    s.owner[i].store(owner, std::memory_order_release);  // after the slot is set up (Edges)
    s.any.store(true);
    return i;
  }
  return -1;
}

void DeviceGate::ReleaseSlot(int slot) noexcept {
  State& s = S();
  if (slot < 0 || slot >= kMaxSlots || s.slots == nullptr || s.disabled.load()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  DeviceGateSlot& g = s.slots[slot];
  g.valid = 0;
  // A kernel still held on the slot would no longer be watched: it is let go.
  g.cancel = g.cancel + 1;
  __sync_synchronize();
  RaiseRelease(g, s.issued[slot].load());
  s.used[slot] = false;
  s.owner[slot].store(0, std::memory_order_release);
}

DeviceGateStatus DeviceGate::Status() noexcept {
  State& s = S();
  if (s.disabled.load()) return DeviceGateStatus::kUnavailable;
  std::lock_guard<std::mutex> lock(s.mu);
  return s.n_contexts > 0 ? s.contexts[0].status.load() : DeviceGateStatus::kUnavailable;
}

bool DeviceGate::Enqueue(int slot, cudaStream_t stream, const Timetable& tt, const YieldRequest& y,
                         int64_t server_minus_local_ns, int64_t max_wait_ns, GateMemory& memory,
                         HostDecision& decided, bool turns) noexcept {
  decided = HostDecision{};
  State& s = S();
  if (slot < 0 || slot >= kMaxSlots || s.slots == nullptr) return false;
  ContextEntry* e = s.slot_ctx[slot];
  if (e == nullptr) return false;
  auto* cu_stream = reinterpret_cast<CUstream>(stream);
  const DeviceGateStatus status = e->status.load(std::memory_order_relaxed);
  if (status == DeviceGateStatus::kKernel) {
    CUdeviceptr arg = SlotOnDevice(s, slot);
    int64_t need = y.need_ns;
    int64_t rest = y.rest_ns;
    uint32_t what = kGateDecide | (y.phase_start ? (turns ? kGateTurns : 0u) : kGateMidPhase);
    uint32_t generation = s.slots[slot].cancel;
    void* params[] = {&arg, &need, &rest, &what, &generation};
    // A launch that fails leaves this collective to the host gate.
    return Launch(s, *e, e->gate, stream, params, "the gate kernel does not launch");
  }
  if (status != DeviceGateStatus::kWaitValue || !s.waits_served.load() ||
      StreamIsCapturing(stream)) {
    return false;
  }
  // Decided here, at the call: the host's gate memory serves (the kernel keeps its own).
  // It counts (memory, decision) only once it stands: a stream wait that cannot be enqueued
  // leaves the phase to the host gate, which decides again.
  // Inside a phase the gate memory is neither read nor written (only phase starts realign).
  const GateDecision d = DecideHostGate(tt, y, RealtimeNs(), server_minus_local_ns, max_wait_ns,
                                        y.phase_start && MustRealign(memory));
  if (d.action != GateAction::kWaitUntil) {
    if (y.phase_start) Remember(memory, d.realigned);
    decided = {true, d};
    return true;
  }
  const uint32_t ticket = s.issued[slot].fetch_add(1) + 1;
  const CUdeviceptr flag = SlotOnDevice(s, slot) + offsetof(DeviceGateSlot, release);
  const CUresult r = s.drv.stream_wait_value32(cu_stream, flag, ticket, CU_STREAM_WAIT_VALUE_GEQ);
  // Every ticket taken is published, so that the background thread goes past it in order.
  PendingWait& p = s.pending[slot][ticket % kPendingWaits];
  p.until_mono.store(r == CUDA_SUCCESS ? MonotonicNs() + (d.until_ns - RealtimeNs()) : 0,
                     std::memory_order_relaxed);
  p.ticket.store(ticket, std::memory_order_release);
  if (r != CUDA_SUCCESS) {
    RaiseRelease(s.slots[slot], ticket);
    Degrade(s, *e, "stream waits fail", static_cast<int>(r));
    return false;
  }
  // The background thread stopped meanwhile (the process ends): nothing else would release it.
  if (!s.waits_served.load()) RaiseRelease(s.slots[slot], ticket);
  if (y.phase_start) Remember(memory, d.realigned);
  decided = {true, d};
  const int fd = s.wake_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const uint64_t one = 1;
    const ssize_t w = write(fd, &one, sizeof(one));
    (void)w;
  }
  return true;
}

bool DeviceGate::EnqueueTurns(int slot, cudaStream_t stream) noexcept {
  State& s = S();
  ContextEntry* e = KernelContext(s, slot);
  if (e == nullptr) return false;
  CUdeviceptr arg = SlotOnDevice(s, slot);
  int64_t need = 0;
  int64_t rest = -1;
  uint32_t what = kGateTurns;
  uint32_t generation = s.slots[slot].cancel;
  void* params[] = {&arg, &need, &rest, &what, &generation};
  return Launch(s, *e, e->gate, stream, params, "the gate kernel does not launch");
}

bool DeviceGate::EnqueueEndEdge(int slot, cudaStream_t stream) noexcept {
  State& s = S();
  ContextEntry* e = KernelContext(s, slot);
  if (e == nullptr) return false;
  CUdeviceptr arg = SlotOnDevice(s, slot);
  void* params[] = {&arg};
  return Launch(s, *e, e->edge, stream, params, "the edge kernel does not launch");
}

bool DeviceGate::StreamIsCapturing(cudaStream_t stream) noexcept {
  if (stream == nullptr) return false;  // the legacy default stream cannot be captured
  State& s = S();
  int st = s.capture_query.load(std::memory_order_acquire);
  if (st == kCaptureUnresolved) {
    if (s.disabled.load()) return false;
    // The caller's path never waits for the lock (a calibration holds it for up to 200 ms):
    // while another thread holds it, the answer is unknown, as when the query fails.
    std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
    if (!lock.owns_lock()) return true;
    ResolveCaptureQuery(s);
    st = s.capture_query.load(std::memory_order_relaxed);
  }
  if (st == kCaptureRuntime) {
    // Stored before the state was published (release/acquire).
    const auto fn = s.capture_runtime.load(std::memory_order_relaxed);
    int status = 0;
    return fn != nullptr && fn(stream, &status) == 0 && status != 0;
  }
  if (st == kCaptureDriver) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUresult r = s.drv.stream_is_capturing(reinterpret_cast<CUstream>(stream), &status);
    if (r != CUDA_SUCCESS) {
      // Unknown: it may be capturing, and a host wait then only delays the capture. The phase
      // goes ungated (observed).
      static std::atomic<bool> logged{false};
      if (!logged.exchange(true)) {
        MLOG_WARN("device gate: the capture query fails (CUDA error %d): such phases go ungated",
                  static_cast<int>(r));
      }
      return true;
    }
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  return false;
}

void DeviceGate::Publish(int slot, uint64_t owner, const Timetable* tt, const YieldSet& yields,
                         int64_t max_wait_cap_ns) noexcept {
  State& s = S();
  if (s.slots == nullptr || s.disabled.load()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!Owns(s, slot, owner)) return;
  DeviceGateSlot& g = s.slots[slot];
  g.seq = g.seq + 1;
  __sync_synchronize();
  if (tt == nullptr) {
    g.valid = 0;
  } else {
    g.version = static_cast<int64_t>(tt->version);
    g.epoch_ns = tt->epoch_ns;
    g.period_ns = tt->period_ns;
    g.offset_ns = tt->offset_ns;
    g.window_ns = tt->window_ns;
    g.late_slack_ns = tt->late_slack_ns;
    g.max_wait_ns = std::min(tt->max_wait_ns, max_wait_cap_ns);
    g.max_wait_cap_ns = max_wait_cap_ns;
    const uint32_t n = yields.count < kMaxYieldWindows ? yields.count : kMaxYieldWindows;
    g.yield_epoch_ns = yields.epoch_ns;
    g.yield_need_ns = yields.need_ns;
    g.yield_max_wait_ns = yields.max_wait_ns;
    g.yield_tolerance_ns = yields.tolerance_ns;
    g.yield_allowance_ns = yields.allowance_ns;
    for (uint32_t i = 0; i < n; ++i) {
      g.yield_windows[i][0] = yields.windows[i].period_ns;
      g.yield_windows[i][1] = yields.windows[i].offset_ns;
      g.yield_windows[i][2] = yields.windows[i].window_ns;
    }
    g.yield_count = n;
    g.valid = 1;
  }
  __sync_synchronize();
  g.seq = g.seq + 1;
}

void DeviceGate::SetServerMinusLocal(int64_t v) noexcept {
  State& s = S();
  s.server_minus_local.store(v);
  if (s.slots == nullptr || s.disabled.load()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  for (int i = 0; i < kMaxSlots; ++i) {
    if (s.used[i]) WriteServerOffset(s, i);
  }
}

void DeviceGate::PublishTurns(int slot, uint64_t owner, const TurnSet* turns,
                              int64_t max_wait_ns) noexcept {
  State& s = S();
  if (s.slots == nullptr || s.disabled.load()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!Owns(s, slot, owner)) return;
  const ContextEntry* e = s.slot_ctx[slot];
  if (e == nullptr) return;
  // Scheduler clock to the GPU's timer; an edge not seen yet stays 0.
  const int64_t server_minus_gpu = s.server_minus_local.load() + e->timer.HostMinusGpuNs();
  const auto on_gpu = [&](int64_t t) { return t == 0 ? 0 : SaturatingSub(t, server_minus_gpu); };
  DeviceGateSlot& g = s.slots[slot];
  g.turn_seq = g.turn_seq + 1;
  __sync_synchronize();
  const uint32_t n = turns == nullptr ? 0 : std::min(turns->count, kMaxTurnPartners);
  if (turns != nullptr) {
    g.turn_wire_ns = turns->wire_ns;
    g.turn_period_ns = turns->period_ns;
    g.turn_max_wait_ns = max_wait_ns;
    for (uint32_t i = 0; i < n; ++i) {
      const TurnPartner& p = turns->partners[i];
      g.turn_partners[i][0] = p.higher ? 1 : 0;
      g.turn_partners[i][1] = p.wire_ns;
      g.turn_partners[i][2] = p.compute_ns;
      g.turn_partners[i][3] = on_gpu(p.begun_ns);
      g.turn_partners[i][4] = on_gpu(p.ended_ns);
    }
  }
  g.turn_count = n;
  __sync_synchronize();
  g.turn_seq = g.turn_seq + 1;
}

bool DeviceGate::Edges(int slot, uint64_t owner, int64_t& begun_local_ns,
                       int64_t& ended_local_ns) noexcept {
  State& s = S();
  begun_local_ns = 0;
  ended_local_ns = 0;
  if (s.disabled.load() || !Owns(s, slot, owner)) return false;
  // Once the context stepped down no kernel stamps the stream's edges: the last stamps (or those
  // of kernels that left when cancelled) are not its phases.
  const ContextEntry* e = KernelContext(s, slot);
  if (e == nullptr) return false;
  // Each stamp is one aligned 8-byte store by the GPU: read whole. Each is moved onto the local
  // clock once, with the calibration of the moment it is first seen.
  const auto local = [&](int k, int64_t stamp) {
    if (stamp == 0) return int64_t{0};
    if (stamp != s.edge_gpu[slot][k]) {
      s.edge_gpu[slot][k] = stamp;
      s.edge_local[slot][k] = SaturatingAdd(stamp, e->timer.HostMinusGpuNs());
    }
    return s.edge_local[slot][k];
  };
  begun_local_ns = local(0, s.slots[slot].edge_begun_gpu_ns);
  ended_local_ns = local(1, s.slots[slot].edge_ended_gpu_ns);
  return true;
}

int64_t DeviceGate::ServiceWaits(int64_t now) noexcept {
  State& s = S();
  if (!s.any.load(std::memory_order_relaxed) || s.slots == nullptr) return INT64_MAX;
  int64_t next = Watch(now);
  // Each slot's tickets in order, each at its own time: a later wait (the host runs ahead of
  // its GPU) neither delays an earlier one nor is released with it.
  for (int i = 0; i < kMaxSlots; ++i) {
    DeviceGateSlot& g = s.slots[i];
    const uint32_t issued = s.issued[i].load(std::memory_order_acquire);
    uint32_t& done = s.serviced[i];
    const uint32_t released = __atomic_load_n(const_cast<uint32_t*>(&g.release), __ATOMIC_ACQUIRE);
    if (TicketReached(released, done)) done = released;  // a communicator's end released them
    while (!TicketReached(done, issued)) {
      const uint32_t k = done + 1;
      const PendingWait& p = s.pending[i][k % kPendingWaits];
      const uint32_t t = p.ticket.load(std::memory_order_acquire);
      if (t != k && !TicketReached(t, k)) break;  // its caller has not published it yet
      // At its time; at once where a later ticket took its place in the ring (more waits
      // pending than it holds).
      if (t == k) {
        const int64_t mono = MonotonicNs();
        const int64_t left = p.until_mono.load(std::memory_order_relaxed) - mono;
        if (left > kSpinLeadNs) {
          next = std::min(next, now + left - kSpinLeadNs);
          break;
        }
        if (left > 0) SleepUntilRealtime(RealtimeNs() + left);
      }
      RaiseRelease(g, k);
      done = k;
    }
  }
  return next;
}

int64_t DeviceGate::Watch(int64_t now) noexcept {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
  if (!lock.owns_lock()) return now + kWatchPollNs;  // Prepare or a Degrade: look again soon
  // How long a kernel has held is timed on CLOCK_MONOTONIC: a step of the wall clock neither
  // releases one that waits legitimately nor hides one that is stuck.
  const int64_t mono = MonotonicNs();
  bool kernels = false;
  for (int i = 0; i < kMaxSlots; ++i) {
    ContextEntry* e = s.slot_ctx[i];
    if (!s.used[i] || e == nullptr) continue;
    DeviceGateSlot& g = s.slots[i];
    if (e->status.load() == DeviceGateStatus::kKernel) kernels = true;
    const uint64_t launched = g.launches;
    if (launched == g.finished) continue;   // none running
    kernels = true;                         // this one, whatever the context gates with now
    if (launched != s.watched_launch[i]) {  // another kernel runs now: it starts its clock
      s.watched_launch[i] = launched;
      s.watched_since[i] = mono;
      continue;
    }
    // No kernel holds a stream longer than the cap (realigning or yielding; a plain wait's max
    // wait is below it). One still there after that, and the margin the watchdog's own polling
    // takes, is stuck: every kernel of the context's slots is released (the same GPU timer and
    // code), and the context gates on without them.
    if (mono - s.watched_since[i] <= g.max_wait_cap_ns + kWatchPollNs) continue;
    for (int j = 0; j < kMaxSlots; ++j) {
      if (s.used[j] && s.slot_ctx[j] == e) s.slots[j].cancel = s.slots[j].cancel + 1;
    }
    __sync_synchronize();
    s.watched_since[i] = mono;
    Degrade(s, *e, "a gate kernel overstayed its bound and was released", 0);
  }
  return kernels ? now + kWatchPollNs : INT64_MAX;
}

void DeviceGate::ReleaseAll() noexcept {
  State& s = S();
  if (s.slots == nullptr) return;
  for (int i = 0; i < kMaxSlots; ++i) RaiseRelease(s.slots[i], s.issued[i].load());
}

void DeviceGate::ServeWaits(bool serving) noexcept {
  State& s = S();
  // Cleared before the release: a caller that enqueued a wait after it releases its own.
  s.waits_served.store(serving);
  if (!serving) ReleaseAll();
}

void DeviceGate::ForgetAfterFork() noexcept {
  // CUDA cannot be used in a forked child: the device gate is off there.
  State& s = S();
  s.disabled.store(true);
  s.slots = nullptr;
  s.any.store(false);
  s.n_contexts = 0;
  s.drv.Disable();
  for (auto& u : s.used) u = false;
  for (auto& o : s.owner) o.store(0);
  s.wake_fd.store(-1);
}

DeviceGate::Counters DeviceGate::KernelCounters(int slot) noexcept {
  State& s = S();
  Counters c;
  if (slot < 0 || slot >= kMaxSlots || s.slots == nullptr) return c;
  c.waits = s.slots[slot].waits;
  c.failed_open = s.slots[slot].failed_open;
  c.late = s.slots[slot].late;
  c.realigned = s.slots[slot].realigned;
  c.yields = s.slots[slot].yields;
  c.turn_wait_ns = s.slots[slot].turn_wait_ns;
  return c;
}

uint64_t DeviceGate::Fallbacks() noexcept {
  return S().fallbacks.load();
}

int64_t DeviceGate::HostMinusGpuNs() noexcept {
  State& s = S();
  return s.n_contexts > 0 ? s.contexts[0].timer.HostMinusGpuNs() : 0;
}

void DeviceGate::Recalibrate(int64_t now) noexcept {
#if METRONOME_HAVE_GATE_KERNEL
  State& s = S();
  // Once a second; a step of the wall clock back, which it looks for, must not put the next
  // look off by the step.
  const int64_t wait = s.next_recalibration_check_ns - now;
  if (!s.any.load(std::memory_order_relaxed) || s.disabled.load() ||
      (wait > 0 && wait <= kRecalibrateCheckNs)) {
    return;
  }
  s.next_recalibration_check_ns = now + kRecalibrateCheckNs;
  CudaDriver& d = s.drv;
  // Never blocks on a timer kernel that did not start: it must be able to ask whether it left.
  if (d.ctx_push_current == nullptr || d.ctx_pop_current == nullptr || d.stream_query == nullptr ||
      d.exchange_capture_mode == nullptr) {
    return;
  }
  std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
  if (!lock.owns_lock()) return;  // Prepare: next time
  // While the application captures a CUDA graph in the global mode (PyTorch's default), a call
  // that may be unsafe during capture, made by any thread in that mode, fails and invalidates the
  // capture. The calibration's calls touch only its own stream: this thread takes the relaxed
  // mode for them, and gives its mode back after.
  CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d.exchange_capture_mode(&capture_mode) != CUDA_SUCCESS) return;
  for (int c = 0; c < s.n_contexts; ++c) {
    ContextEntry& e = s.contexts[c];
    if (e.status.load() != DeviceGateStatus::kKernel || !e.timer.Prepared()) continue;
    bool in_use = false;
    for (int i = 0; i < kMaxSlots && !in_use; ++i) in_use = s.used[i] && s.slot_ctx[i] == &e;
    bool stepped = false;
    if (!in_use || !e.timer.Due(now, kRecalibrateNs, kClockStepNs, stepped)) continue;
    if (d.ctx_push_current(e.ctx) != CUDA_SUCCESS) continue;
    char why[96] = "";
    const int64_t before = e.timer.HostMinusGpuNs();
    // A GPU too busy to start the timer kernel within 20 ms keeps the last calibration.
    const bool ok = e.timer.Calibrate(d, now, 20'000'000, false, why, sizeof(why));
    CUcontext popped = nullptr;
    d.ctx_pop_current(&popped);
    if (!ok) {
      MLOG_DEBUG("device gate: the GPU timer is not calibrated again (%s): keeping %lld ns", why,
                 static_cast<long long>(before));
      continue;
    }
    const int64_t offset = e.timer.HostMinusGpuNs();
    MLOG_DEBUG("device gate: GPU timer calibrated again: host - gpu = %lld ns (%+lld ns)%s",
               static_cast<long long>(offset), static_cast<long long>(offset - before),
               stepped ? " after a clock step" : "");
    for (int i = 0; i < kMaxSlots; ++i) {
      if (s.used[i] && s.slot_ctx[i] == &e) WriteServerOffset(s, i);
    }
  }
  d.exchange_capture_mode(&capture_mode);
#else
  (void)now;
#endif
}

void DeviceGate::SetWakeFd(int fd) noexcept {
  S().wake_fd.store(fd);
}

}  // namespace metronome::shim
