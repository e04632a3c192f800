// NodeShare: the ranks of one job on one node share one registration with the scheduler.
//
// A cluster of 8-GPU nodes has eight ranks of a job on each node, all in one rhythm (they meet
// in every collective) and all on one clock (CLOCK_REALTIME of one host). One of them talks to
// the scheduler for the node, the leader; the others, followers, send nothing:
//   - the segment: a small file in /dev/shm (METRONOME_SHARE_DIR), mode 0600, named by a hash of
//     the user, the node and the job, mapped by every rank of the job on the node;
//   - the leader holds an open-file-description lock on it (released by the kernel when the
//     leader exits or dies, whatever the way), and publishes there the timetable in force with
//     its yields (a TimetableStore: a sequence lock, no pointers), the clock offset and a
//     heartbeat; a rank that leads from its start clears what an earlier process left there;
//   - a follower copies a new timetable from the segment into its own store after validating it
//     (the gate reads only process memory), treats a heartbeat older than the fail-open bound as
//     no timetable, writes its gate counters into its slot (the leader's reports add them up),
//     and tries the lock now and then: when
//     the leader has gone it leads, keeping the timetable in the segment until its own
//     registration brings a new one (the job keeps its slot through the change).
// Anything unexpected (no /dev/shm, another user's file, another layout) leaves the rank to
// report alone, as every rank did before: sharing is an optimization, never a dependency.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "metronome/common/timetable.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::shim {

// A follower's gate counters, as a report carries them.
struct ShareCounters {
  uint64_t gated = 0;
  uint64_t late = 0;
  uint64_t failed_open = 0;
  uint64_t realigned = 0;
  uint64_t yielded = 0;
  int64_t yield_wait_ns = 0;

  ShareCounters& operator+=(const ShareCounters& o) {
    gated += o.gated;
    late += o.late;
    failed_open += o.failed_open;
    realigned += o.realigned;
    yielded += o.yielded;
    yield_wait_ns += o.yield_wait_ns;
    return *this;
  }
};

struct ShareSegment;

class NodeShare {
 public:
  // Opens (creating) the segment of (node, job) in `dir` and tries to lead. A rank that leads
  // from the start starts the segment afresh: what it holds is an earlier process's, perhaps
  // from another scheduler. nullptr, with `error` set, when it cannot be shared.
  static std::unique_ptr<NodeShare> Open(const std::string& dir, const std::string& node,
                                         const std::string& job, int64_t now_ns,
                                         std::string* error);
  ~NodeShare();
  NodeShare(const NodeShare&) = delete;
  NodeShare& operator=(const NodeShare&) = delete;

  bool Leads() const { return leads_; }
  const std::string& Path() const { return path_; }
  // A follower tries to take the lock (one system call). True when it leads from now on. A
  // leader that has just gone leaves its timetable to the new one, who carries on with it; one
  // whose heartbeat is older than `stale_after_ns` (its followers have failed open) leaves
  // nothing.
  bool TryLead(int64_t now_ns, int64_t stale_after_ns);
  // In a forked child: drop the descriptor (the lock stays with the parent's).
  void AbandonAfterFork() noexcept;

  // The leader's side.
  void Heartbeat(int64_t now_ns);
  void PublishTimetable(const Timetable& t, const YieldSet& yields);
  void ClearTimetable();
  void PublishClock(int64_t server_minus_local_ns, int64_t error_ns);
  // The followers' counters, those of followers that have exited included (a follower's slot
  // silent for `stale_after_ns` is taken back).
  ShareCounters FollowerCounters(int64_t now_ns, int64_t stale_after_ns);

  // The follower's side. ReadTimetable: false when the segment holds none; `publication`
  // changes with every publication.
  bool ReadTimetable(Timetable& t, YieldSet& yields, uint64_t& publication) const;
  // False when the leader has not measured the clock yet.
  bool ReadClock(int64_t& server_minus_local_ns, int64_t& error_ns) const;
  int64_t LeaderHeartbeatNs() const;
  uint32_t LeaderPid() const;
  void PublishCounters(const ShareCounters& c, int64_t now_ns);

 private:
  NodeShare() = default;
  // Takes the lock; `carry_on`: keep the timetable, the clock and the counters in the segment.
  bool Lead(int64_t now_ns, bool carry_on);
  void ClaimSlot(int64_t now_ns);

  int fd_ = -1;
  ShareSegment* seg_ = nullptr;
  bool leads_ = false;
  int slot_ = -1;  // the follower's counter slot (-1: none free)
  std::string path_;
};

// The segment's file name for (uid, node, job): "metronome-<16 hex digits>".
std::string ShareFileName(uint32_t uid, const std::string& node, const std::string& job);

}  // namespace metronome::shim
