// The scheduler client: the shim's one background thread (started with the first communicator).
//
// It owns a DEALER connection to METRONOME_SCHEDULER (transport.hpp: ZMTP spoken directly, or
// libzmq for CURVE) and, in a loop woken at least every
// 50 ms (or earlier by a socket message or a stream-wait release):
//   - drains each communicator's event ring into its PhaseTracker and publishes the learned
//     phase-start threshold back to the caller's path;
//   - sends a hello per job (job id, rank) until the scheduler welcomes it, clock pings
//     (ClockPingIntervalNs: 5 a second until the estimate settles or after a clock step, then
//     one every 2 s) into a ClockSync, and a profile report per registered job about once a
//     second;
//   - receives timetable pushes: ValidateTimetable, then a newer version replaces the one in
//     force (TimetableStore, read by the gate without a lock); rejected ones are counted;
//   - fails open (drops every timetable) when the scheduler has been silent for
//     METRONOME_FAILOPEN_MS, and re-registers when it answers again;
//   - shares the job's registration with its other ranks on the node (node_share.hpp): the
//     leader does all of the above for them and publishes the timetable and the clock offset in
//     the node's segment; a follower opens no connection and adopts what the segment holds
//     (checked every 5 ms), and leads when the leader has gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "metronome/common/clock_sync.hpp"
#include "metronome/common/protocol.hpp"
#include "node_share.hpp"
#include "transport.hpp"

namespace metronome::shim {

class Runtime;
struct JobState;
struct CommState;

class Client {
 public:
  explicit Client(Runtime& rt);
  bool Start();
  // Asks the thread to send its byes and stop; waits up to `timeout_ns` for it.
  void Stop(int64_t timeout_ns) noexcept;
  // In a forked child (no thread there): close the inherited descriptors, touch nothing else.
  void AbandonAfterFork() noexcept;

 private:
  void Run() noexcept;
  void Loop();
  void WaitForWork(int64_t now);
  bool Connect();
  // Node sharing: opens each job's segment once; true when some job reports for itself.
  bool OpenShares(int64_t now);
  void Follow(JobState* job, int64_t now);
  // A validated timetable into the job's store and its communicators' device slots.
  void Adopt(JobState* job, const Timetable& t, const YieldSet& yields, uint32_t check);
  // The store's and the device gates' copies of a job's timetable and yields.
  void PublishToGates(JobState* job, const Timetable& t, const YieldSet& yields);
  // Moves the epoch of every kept yield set that has grown far from `now` (RebaseYieldSet).
  void RebaseYields(int64_t now);
  void ClearJob(JobState* job);
  void Send(const proto::Message& m);
  void Receive();
  void Handle(const proto::Message& m, int64_t now);
  void HandleTimetable(const proto::TimetablePush& p);
  // Taking turns (common/turn.hpp): a new set, a partner's edge, and this job's own edges sent
  // while the scheduler asks for them.
  void HandleTurns(const proto::TurnPush& p);
  void HandleTurnEdge(const proto::TurnEdge& e);
  // The job's turn set (JobState::turn_set) to its gates: the host's store and its kernels' slots.
  void PublishTurns(JobState* job);
  void SendEdges();
  bool SendsEdges() const;
  void DrainEvents();
  // The job's communicator whose rhythm is gated and reported (ChooseRhythm), or nullptr.
  static CommState* RhythmOf(JobState* job, const std::vector<CommState*>& comms);
  void SendHellos(int64_t now);
  void SendReports(int64_t now);
  // The gate counters of the job's communicators in this process.
  static ShareCounters CountersOf(const JobState* job, const std::vector<CommState*>& comms);
  void SendPing(int64_t now);
  void CheckSilence(int64_t now);
  void RetireComms(int64_t now);
  void SendByes(const char* reason);
  void MarkUnregistered();

  Runtime& rt_;
  std::unique_ptr<Transport> transport_;  // opened when a job first reports for itself
  bool connect_failed_ = false;
  bool following_ = false;  // some job follows its node's leader this pass
  int wake_fd_ = -1;
  std::thread* thread_ = nullptr;  // leaked at exit on purpose
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};

  ClockSync sync_{16};
  uint64_t ping_seq_ = 0;
  int64_t ping_t1_[16] = {};
  uint64_t pings_answered_ = 0;
  uint64_t step_logs_ = 0;  // clock steps logged
  int64_t next_ping_ns_ = 0;
  int64_t next_report_ns_ = 0;
  int64_t next_rebase_ns_ = 0;
  int64_t report_interval_ns_ = 1'000'000'000;
  int64_t last_rx_ns_ = 0;        // last message from the scheduler (0 = never)
  bool scheduler_turns_ = false;  // its welcome says it relays phase edges
  uint32_t features_ = 0;         // what this shim's hellos announce (protocol Feature bits)
  bool failed_open_ = false;      // inside an outage
  std::vector<JobState*> awaiting_welcome_;
  std::string buf_;
  std::string rx_;
  int64_t last_tt_log_ns_ = 0;
  uint64_t tt_log_suppressed_ = 0;
  uint64_t reject_logs_ = 0;
};

}  // namespace metronome::shim
