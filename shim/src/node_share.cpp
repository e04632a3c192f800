#include "node_share.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "metronome/common/errno_text.hpp"
#include "timetable_store.hpp"

namespace metronome::shim {

// "MTRNSHR" and the layout's version: a shim of another layout finds a magic it does not know and
// reports alone.
constexpr uint64_t kShareMagic = 0x4d54524e53485201ull;
constexpr int kFollowerSlots = 64;

static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the segment's atomics are shared between processes: they must be lock-free");

struct alignas(64) CounterSlot {
  std::atomic<uint32_t> pid;     // the follower's (0: free)
  std::atomic<int64_t> seen_ns;  // when it last wrote
  std::atomic<uint64_t> gated, late, failed_open, realigned, yielded;
  std::atomic<int64_t> yield_wait_ns;

  ShareCounters Load() const {
    ShareCounters c;
    c.gated = gated.load(std::memory_order_relaxed);
    c.late = late.load(std::memory_order_relaxed);
    c.failed_open = failed_open.load(std::memory_order_relaxed);
    c.realigned = realigned.load(std::memory_order_relaxed);
    c.yielded = yielded.load(std::memory_order_relaxed);
    c.yield_wait_ns = yield_wait_ns.load(std::memory_order_relaxed);
    return c;
  }
  void Store(const ShareCounters& c) {
    gated.store(c.gated, std::memory_order_relaxed);
    late.store(c.late, std::memory_order_relaxed);
    failed_open.store(c.failed_open, std::memory_order_relaxed);
    realigned.store(c.realigned, std::memory_order_relaxed);
    yielded.store(c.yielded, std::memory_order_relaxed);
    yield_wait_ns.store(c.yield_wait_ns, std::memory_order_relaxed);
  }
};

// Zero bytes are a valid empty segment (a new file reads as zeros).
struct ShareSegment {
  std::atomic<uint64_t> magic;
  std::atomic<uint32_t> leader_pid;
  std::atomic<int64_t> heartbeat_ns;
  std::atomic<int64_t> clock_offset_ns;
  std::atomic<int64_t> clock_error_ns;
  std::atomic<uint32_t> clock_valid;
  CounterSlot retired;  // followers that have exited (pid unused)
  CounterSlot slots[kFollowerSlots];
  TimetableStore store;
};

std::string ShareFileName(uint32_t uid, const std::string& node, const std::string& job) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  const auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 0x100000001b3ull;
    }
  };
  mix(&uid, sizeof(uid));
  mix(node.data(), node.size() + 1);  // with the terminator: ("ab", "c") is not ("a", "bc")
  mix(job.data(), job.size() + 1);
  char name[40];
  std::snprintf(name, sizeof(name), "metronome-%016llx", static_cast<unsigned long long>(h));
  return name;
}

std::unique_ptr<NodeShare> NodeShare::Open(const std::string& dir, const std::string& node,
                                           const std::string& job, int64_t now_ns,
                                           std::string* error) {
  std::unique_ptr<NodeShare> s(new NodeShare());
  s->path_ = dir + "/" + ShareFileName(static_cast<uint32_t>(geteuid()), node, job);
  const auto fail = [&](const char* what, int err) -> std::unique_ptr<NodeShare> {
    if (error != nullptr) {
      *error = s->path_ + ": " + what + (err != 0 ? std::string(" (") + ErrnoText(err) + ")" : "");
    }
    return nullptr;
  };
  s->fd_ = open(s->path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (s->fd_ < 0) return fail("cannot open", errno);
  struct stat st {};
  if (fstat(s->fd_, &st) != 0) return fail("cannot stat", errno);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    return fail("not a private file of this user", 0);
  }
  constexpr auto kSize = static_cast<off_t>(sizeof(ShareSegment));
  if (st.st_size == 0 && ftruncate(s->fd_, kSize) != 0) return fail("cannot size", errno);
  if (st.st_size != 0 && st.st_size != kSize) return fail("another layout (size)", 0);
  void* p = mmap(nullptr, sizeof(ShareSegment), PROT_READ | PROT_WRITE, MAP_SHARED, s->fd_, 0);
  if (p == MAP_FAILED) return fail("cannot map", errno);
  s->seg_ = static_cast<ShareSegment*>(p);
  uint64_t magic = 0;
  if (!s->seg_->magic.compare_exchange_strong(magic, kShareMagic) && magic != kShareMagic) {
    return fail("another layout (magic)", 0);
  }
  if (!s->Lead(now_ns, false)) s->ClaimSlot(now_ns);
  return s;
}

NodeShare::~NodeShare() {
  if (seg_ != nullptr) {
    if (slot_ >= 0) seg_->slots[slot_].pid.store(0, std::memory_order_release);
    munmap(seg_, sizeof(ShareSegment));
  }
  if (fd_ >= 0) close(fd_);  // releases the lock
}

void NodeShare::AbandonAfterFork() noexcept {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  leads_ = false;
  slot_ = -1;
}

bool NodeShare::TryLead(int64_t now_ns, int64_t stale_after_ns) {
  if (leads_) return true;
  return Lead(now_ns, now_ns - seg_->heartbeat_ns.load() <= stale_after_ns);
}

bool NodeShare::Lead(int64_t now_ns, bool carry_on) {
  if (fd_ < 0) return false;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;  // the whole file; l_pid must be 0 for an OFD lock
  if (fcntl(fd_, F_OFD_SETLK, &fl) != 0) return false;
  leads_ = true;
  if (slot_ >= 0) {
    // Its own counters are in its reports from now on.
    seg_->slots[slot_].Store(ShareCounters{});
    seg_->slots[slot_].pid.store(0, std::memory_order_release);
    slot_ = -1;
  }
  if (!carry_on) {
    seg_->store.Clear();
    seg_->clock_valid.store(0);
    seg_->retired.Store(ShareCounters{});
  }
  seg_->leader_pid.store(static_cast<uint32_t>(getpid()));
  seg_->heartbeat_ns.store(now_ns);
  return true;
}

void NodeShare::ClaimSlot(int64_t now_ns) {
  const auto me = static_cast<uint32_t>(getpid());
  slot_ = -1;
  for (int i = 0; i < kFollowerSlots; ++i) {
    uint32_t free = 0;
    if (seg_->slots[i].pid.compare_exchange_strong(free, me)) {
      seg_->slots[i].Store(ShareCounters{});
      seg_->slots[i].seen_ns.store(now_ns, std::memory_order_relaxed);
      slot_ = i;
      return;
    }
  }
}

void NodeShare::Heartbeat(int64_t now_ns) {
  seg_->heartbeat_ns.store(now_ns, std::memory_order_release);
}

void NodeShare::PublishTimetable(const Timetable& t, const YieldSet& yields) {
  seg_->store.Publish(t, yields);
}

void NodeShare::ClearTimetable() {
  seg_->store.Clear();
}

void NodeShare::PublishClock(int64_t server_minus_local_ns, int64_t error_ns) {
  seg_->clock_offset_ns.store(server_minus_local_ns, std::memory_order_relaxed);
  seg_->clock_error_ns.store(error_ns, std::memory_order_relaxed);
  seg_->clock_valid.store(1, std::memory_order_release);
}

ShareCounters NodeShare::FollowerCounters(int64_t now_ns, int64_t stale_after_ns) {
  ShareCounters sum = seg_->retired.Load();
  for (CounterSlot& slot : seg_->slots) {
    if (slot.pid.load(std::memory_order_acquire) == 0) continue;
    const ShareCounters c = slot.Load();
    sum += c;
    // Silent that long: it has exited (a follower writes with every pass of its loop; a pid
    // says nothing across PID namespaces). Keep what it counted, free the slot.
    if (now_ns - slot.seen_ns.load(std::memory_order_relaxed) > stale_after_ns) {
      ShareCounters kept = seg_->retired.Load();
      kept += c;
      seg_->retired.Store(kept);
      slot.Store(ShareCounters{});
      slot.pid.store(0, std::memory_order_release);
    }
  }
  return sum;
}

bool NodeShare::ReadTimetable(Timetable& t, YieldSet& yields, uint64_t& publication) const {
  return seg_->store.Read(t, yields, &publication);
}

bool NodeShare::ReadClock(int64_t& server_minus_local_ns, int64_t& error_ns) const {
  if (seg_->clock_valid.load(std::memory_order_acquire) == 0) return false;
  server_minus_local_ns = seg_->clock_offset_ns.load(std::memory_order_relaxed);
  error_ns = seg_->clock_error_ns.load(std::memory_order_relaxed);
  return true;
}

int64_t NodeShare::LeaderHeartbeatNs() const {
  return seg_->heartbeat_ns.load(std::memory_order_acquire);
}

uint32_t NodeShare::LeaderPid() const {
  return seg_->leader_pid.load(std::memory_order_relaxed);
}

void NodeShare::PublishCounters(const ShareCounters& c, int64_t now_ns) {
  if (slot_ < 0 || seg_->slots[slot_].pid.load() != static_cast<uint32_t>(getpid())) {
    ClaimSlot(now_ns);  // none was free, or the leader took this one back (a stall that long)
    if (slot_ < 0) return;
  }
  seg_->slots[slot_].Store(c);
  seg_->slots[slot_].seen_ns.store(now_ns, std::memory_order_relaxed);
}

}  // namespace metronome::shim
