// The shim's process-wide state: settings, the registry of communicators and jobs, the per-thread
// state, and the caller-path logic run around every intercepted collective.
//
// The caller's path (BeforeCollective/AfterCollective) takes no lock, allocates nothing and makes
// no system call: a lock-free lookup of the communicator, two reads of the vDSO clock, a few
// relaxed atomics, and a push into the communicator's single-producer ring. Everything else
// (phase tracking, reporting, timetables) happens on the background thread (client.cpp), which
// starts with the first communicator.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "config.hpp"
#include "metronome/common/yield.hpp"
#include "phase_tracker.hpp"
#include "rhythm.hpp"
#include "spsc_ring.hpp"
#include "timetable_store.hpp"
#include "turn_store.hpp"

namespace metronome::shim {

enum class Op : uint32_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kAlltoAll = 6,
  kGather = 7,
  kScatter = 8,
  kSend = 9,
  kRecv = 10,
};

size_t DataTypeSize(ncclDataType_t t) noexcept;

struct CommState;

// Per thread: re-entrancy depth (NCCL calls its own public functions) and group nesting.
struct ThreadState {
  int depth = 0;
  int group_depth = 0;
  bool group_gated = false;  // the current outermost group already passed its gate
  // Phases that ended inside a group, one per communicator: their end-edge kernels are enqueued
  // once the group is (NCCL launches a group's collectives at its end). A group of more
  // communicators than this stamps the first ones' ends; the others' partners see the phase
  // end at their quiet bound.
  static constexpr int kMaxGroupEdges = 8;
  struct EndEdge {
    CommState* st = nullptr;
    cudaStream_t stream = nullptr;
  };
  EndEdge end_edges[kMaxGroupEdges];
  int n_end_edges = 0;
};
ThreadState& Tls() noexcept;

class NodeShare;

// One job as the scheduler sees it: (job id, rank). Communicators split from a parent share it.
struct JobState {
  std::string job_id;
  uint32_t rank = 0;
  uint32_t world = 0;
  int32_t priority = 1;
  TimetableStore store;
  TurnStore turns;  // whom it takes turns with, and their edges (common/turn.hpp)
  std::atomic<int> comms{0};
  // Background thread only.
  bool registered = false;
  int64_t last_hello_ns = 0;
  uint64_t accepted_version = 0;
  bool bye_sent = false;
  // Taking turns: the version of the set in force, the set with the edges relayed so far, and
  // which of its own edges it sent last.
  uint64_t turns_version = 0;
  TurnSet turn_set;
  // Written by the background thread, read there and on the caller's path (a job asked for its
  // phase edges sends them, and on a GPU stamps them on the stream).
  std::atomic<bool> edges_asked{false};
  int64_t sent_begun_ns = 0;  // local clock, as stamped
  int64_t sent_ended_ns = 0;
  int64_t sent_begun_at_ns = 0;  // the last begin as sent (scheduler clock)
  RhythmChoice rhythm;           // which of its communicators the gate holds (rhythm.hpp)
  // The job's ranks on this node (node_share.hpp): nullptr until opened, or when this rank
  // reports alone. Owned here; never freed while the job has communicators.
  NodeShare* share = nullptr;
  bool share_tried = false;
  uint64_t share_publication = ~0ull;  // the last one a follower adopted
  int64_t next_lead_try_ns = 0;
};

struct CommState {
  ncclComm_t comm = nullptr;
  JobState* job = nullptr;
  uint64_t device_owner = 0;  // its hold on the device gate slot (DeviceGate::Prepare)
  std::atomic<bool> identity_known{false};
  bool device_gate = false;  // gate with the device gate (else the host gate)
  std::atomic<uint32_t> rank{0};
  std::atomic<uint32_t> nranks{0};
  int device_slot = -1;
  uint32_t turns_in_a_row = 0;  // caller's thread: its phases just before that held for a turn
  // Revoked or suspended (ncclCommRevoke, ncclCommSuspend): its calls are neither tracked nor
  // gated until it resumes; its state is freed at destroy as any other's.
  std::atomic<bool> paused{false};
  // NCCL answered one of its calls ncclInProgress (a nonblocking communicator): it launches the
  // collectives later, from its own thread, so no kernel enqueued after a call is behind it. It
  // takes no turns on the stream and stamps no edges.
  std::atomic<bool> nonblocking{false};
  // Written by the background thread: not the communicator that carries its job's rhythm, or
  // no stable rhythm (rhythm.hpp): tracked and reported, never held.
  std::atomic<bool> observe_only{false};
  // Written by the caller's thread.
  std::atomic<int64_t> last_end_ns{0};
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> phase_starts{0};
  std::atomic<uint64_t> gated{0};
  std::atomic<uint64_t> late{0};
  std::atomic<uint64_t> failed_open{0};
  std::atomic<uint64_t> realigned{0};  // late phases held to their window (MustRealign)
  std::atomic<uint64_t> capture_passes{0};
  std::atomic<int64_t> waited_ns{0};
  std::atomic<uint64_t> yielded{0};       // collectives held for higher-ranked windows
  std::atomic<int64_t> yield_wait_ns{0};  // ... and for how long (host gate)
  std::atomic<double> ns_per_byte{0.0};   // common's WirePace of its collectives
  GateMemory gate_memory;  // the host gate's, between phases (NCCL: one thread per comm)
  // Written by the background thread, read by the caller's.
  std::atomic<int64_t> gap_threshold_ns{1'000'000};
  std::atomic<uint64_t> first_key{0};
  std::atomic<int64_t> merge_below_ns{0};
  std::atomic<uint64_t> phase_bytes{0};  // the tracker's bytes per phase (0: not known yet)
  // Caller's thread: the bytes of the phase's collectives so far (common's PhaseRest), and the
  // host gate's cursor over the windows it yields to (placed here, before the next cache-line
  // aligned member, as it is one itself).
  uint64_t phase_issued = 0;
  YieldCursor yield_cursor;
  SpscRing<CollEvent, 1024> ring;
  // Background thread only.
  PhaseTracker tracker;
  PhaseEstimate estimate;
  int64_t retired_at_ns = 0;
  // The phase edges of the rhythm it carries, local clock (the background thread sends them
  // when asked: turn.hpp): the start of its latest phase, and the end of the last collective
  // that completed a phase's bytes. Written by the caller's thread; last, where they add no
  // padding before the aligned members above.
  std::atomic<int64_t> edge_begun_ns{0};
  std::atomic<int64_t> edge_ended_ns{0};
};

// How a communicator came to be (for its identity).
struct CommOrigin {
  const char* how = "";
  const ncclUniqueId* id = nullptr;  // InitRank*, InitRankScalable (first id)
  ncclComm_t parent = nullptr;       // Split, Shrink
  int nranks = -1;                   // -1: ask the communicator
  int rank = -1;
};

struct RuntimeCounters {
  std::atomic<uint64_t> rx_messages{0};
  std::atomic<uint64_t> rx_rejected{0};  // malformed or unexpected messages
  std::atomic<uint64_t> timetables_accepted{0};
  std::atomic<uint64_t> timetables_rejected{0};
  std::atomic<uint64_t> timetables_stale{0};
  std::atomic<uint64_t> welcomes{0};
  std::atomic<uint64_t> hellos_sent{0};
  std::atomic<uint64_t> reports_sent{0};
  std::atomic<uint64_t> fail_open_events{0};  // scheduler went silent: timetables dropped
  std::atomic<uint64_t> pongs{0};
};

class Runtime {
 public:
  static constexpr size_t kTableSize = 1024;

  // The process-wide instance, created at load and never destroyed (no exit-time destructor
  // can race the background thread).
  static Runtime& Get() noexcept;

  explicit Runtime(const Config& c);

  const Config& GetConfig() const { return config_; }
  Mode GetMode() const { return mode_; }

  // Registry (communicator creation and destruction: rare, may lock and allocate).
  CommState* OnCommCreated(ncclComm_t comm, const CommOrigin& origin) noexcept;
  void OnCommDestroyed(ncclComm_t comm, const char* how) noexcept;
  void OnCommPaused(ncclComm_t comm, bool paused, const char* how) noexcept;
  // The traffic class (ncclConfig_t::trafficClass) for this process's communicators from the
  // job's priority (METRONOME_TRAFFIC_CLASS), or -1: leave NCCL's.
  int TrafficClass() const noexcept;
  CommState* Find(ncclComm_t comm) const noexcept;

  // The caller's path.
  struct CallToken {
    CommState* st = nullptr;
    int64_t start_ns = 0;  // when the call went ahead (after any gate hold)
    int64_t hold_ns = 0;   // how long the gate held it
    uint32_t op = 0;
    uint64_t bytes = 0;
    cudaStream_t stream = nullptr;
  };
  CallToken BeforeCollective(ncclComm_t comm, Op op, uint64_t bytes, cudaStream_t stream) noexcept {
    return BeforeCollective(Find(comm), op, bytes, stream);
  }
  CallToken BeforeCollective(CommState* st, Op op, uint64_t bytes, cudaStream_t stream) noexcept;
  // `r`: what NCCL answered the call.
  void AfterCollective(const CallToken& t, ncclResult_t r) noexcept;
  // The outermost group of this thread ended (`r`: ncclGroupEnd's answer; on success its
  // collectives are on their streams).
  static void AfterGroup(ThreadState& ts, ncclResult_t r) noexcept;
  // How many parts an element-wise collective of `bytes` is issued in: common's ChunkParts with
  // METRONOME_CHUNK_KIB in enforce mode outside groups, else 1. Every rank of a communicator
  // must issue the same calls, so this depends on nothing that differs between ranks (a
  // timetable, a clock, a fault seen by one of them): only on the call and the job's settings.
  uint64_t Parts(uint64_t bytes) const noexcept;

  // Clock: scheduler time = local time + offset. Valid once a ping/pong exchange succeeded.
  std::atomic<int64_t> server_minus_local_ns{0};
  std::atomic<bool> clock_valid{false};
  // Whether the collectives complete on the host before they return (no CUDA in the process:
  // the CPU testbed): only then does the host gate take turns (elsewhere the gate kernel does).
  // Set before the background thread starts.
  std::atomic<bool> calls_complete_on_host{false};

  RuntimeCounters counters;

  // For the background thread: snapshots under the registry lock.
  std::vector<CommState*> LiveComms();
  std::vector<JobState*> Jobs();
  std::vector<CommState*> TakeRetired(int64_t older_than_ns);
  std::mutex& RegistryMutex() { return mu_; }

  bool ClientStarted() const { return client_started_.load(); }
  void StartClientOnce() noexcept;
  void StopClient(int64_t timeout_ns) noexcept;  // for tests and exit

  // fork(): the child starts clean (no thread, no socket, no communicators).
  void PrepareFork() noexcept;
  void ParentAfterFork() noexcept;
  void ChildAfterFork() noexcept;

  // Tests: a runtime of their own.
  static void InstallForTesting(Runtime* rt) noexcept;

 private:
  // Returns the local time the host gate released the caller, or 0 when it did not hold it.
  // The gate for one collective of `bytes`: at a phase start the timetable and the yields,
  // inside a phase the yields alone. Returns the local release time when it held the caller.
  // `turns_on_stream`: set when the gate kernel it enqueued also takes the phase's turns.
  int64_t Gate(CommState* st, cudaStream_t stream, uint64_t bytes, bool phase_start,
               bool* turns_on_stream = nullptr) noexcept;
  // Counts one gate decision made on the host (the host gate's, or a stream wait's).
  static void Count(CommState* st, GateAction action, int64_t lateness_ns, const Timetable& tt,
                    int64_t waited_ns, bool realigned) noexcept;
  // After the gate let a phase go: holds it while a partner's turn lasts (common's DecideTurn),
  // in short sleeps that read the edges the background thread keeps. Returns the local release
  // time when it held the caller, else 0. With the device gate the hold is a kernel on `stream`
  // instead (the caller is not held).
  int64_t TakeTurn(CommState* st, cudaStream_t stream, int64_t arrival_ns) noexcept;
  // Whether a device-gated communicator's phase starts need the kernel for turns or edges.
  static bool TurnsOnStream(const CommState* st) noexcept;
  bool Insert(CommState* st) noexcept;
  std::string DeriveJobId(const CommOrigin& o) const;

  Config config_;
  Mode mode_;
  std::mutex mu_;
  std::atomic<CommState*> table_[kTableSize] = {};
  std::vector<JobState*> jobs_;
  std::vector<CommState*> comms_;    // live
  std::vector<CommState*> retired_;  // destroyed, freed later by the background thread
  std::atomic<bool> client_started_{false};
  void* client_ = nullptr;  // Client*, leaked after fork
  bool no_gpu_logged_ = false;
};

// True when the shim intercepts (mode != off); read on every call.
extern std::atomic<bool> g_shim_active;

}  // namespace metronome::shim
