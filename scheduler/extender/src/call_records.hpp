// What the extender keeps about its calls: each verb's latency histogram (lock-free), a timer
// for one call, and the last filter verdicts that the prioritize call for the same pod reuses.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "evaluation.hpp"
#include "metronome/extender/extender.hpp"

namespace metronome::extender {

class Extender::LatencyRecorder {
 public:
  void Observe(std::chrono::nanoseconds took) {
    const double seconds = std::chrono::duration<double>(took).count();
    const auto& bounds = LatencyHistogram::kBounds;
    const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
    counts_[static_cast<size_t>(bucket)].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, took.count())),
                      std::memory_order_relaxed);
  }

  LatencyHistogram Read() const {
    LatencyHistogram h;
    for (size_t i = 0; i < h.counts.size(); ++i) {
      h.counts[i] = counts_[i].load(std::memory_order_relaxed);
      h.count += h.counts[i];
    }
    h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return h;
  }

 private:
  std::array<std::atomic<uint64_t>, LatencyHistogram::kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

// Times one call: the last-latency gauge and the verb's histogram.
class Timer {
 public:
  Timer(std::atomic<uint64_t>& last_us, Extender::LatencyRecorder& histogram)
      : last_us_(last_us), histogram_(histogram) {}
  ~Timer() {
    const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start_);
    last_us_ =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    histogram_.Observe(took);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  std::atomic<uint64_t>& last_us_;
  Extender::LatencyRecorder& histogram_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The last few filter evaluations: kube-scheduler calls prioritize right after filter for the
// same pod with the nodes that passed, so prioritize can reuse the costs instead of running the
// what-if again. Keyed by the Pod's text and the snapshot it was evaluated against.
struct Extender::Decisions {
  struct Entry {
    size_t pod_hash = 0;
    std::shared_ptr<const Snapshot> snapshot;
    bool scored = false;
    std::unordered_map<std::string, Verdict> verdicts;
  };
  static constexpr size_t kEntries = 32;
  std::mutex mu;
  std::deque<Entry> entries;  // most recent first

  void Put(Entry e) {
    std::lock_guard lock(mu);
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->pod_hash == e.pod_hash) {
        entries.erase(it);
        break;
      }
    }
    entries.push_front(std::move(e));
    if (entries.size() > kEntries) entries.pop_back();
  }

  // The verdicts for `names`, when all were evaluated against `snapshot` for this pod.
  bool Get(size_t pod_hash, const Snapshot* snapshot, const std::vector<std::string>& names,
           bool& scored, std::vector<Verdict>& out) {
    std::lock_guard lock(mu);
    for (const Entry& e : entries) {
      if (e.pod_hash != pod_hash || e.snapshot.get() != snapshot) continue;
      out.assign(names.size(), Verdict{});
      for (size_t i = 0; i < names.size(); ++i) {
        const auto v = e.verdicts.find(names[i]);
        if (v == e.verdicts.end()) return false;
        out[i] = v->second;
      }
      scored = e.scored;
      return true;
    }
    return false;
  }
};

}  // namespace metronome::extender
