// The interval structure: which offsets of a job are free at a given period.
//
// Objective: answer, exactly and fast, "at period T, which offsets φ ∈ [0, T) let job j's
// windows [φ + kT, φ + kT + w) avoid every gated window on every link it crosses (or, for
// rectangles that stack, keep the sum of heights within capacity)?"
//
// Because the periods on a link nest (harmonic_periods.cpp), another job i with period T_i
// forbids, for j, the open interval (φ_i − w, φ_i + w_i) folded modulo T when T divides T_i, and
// T/T_i such intervals when T_i divides T. Here w is the width a window reserves: the
// communication plus the minimum cushion after it (PlannerOptions::min_cushion_ns, jitter). The
// forbidden intervals of all links are collected, sorted and merged; their complement is the set of
// free ranges. When rectangles can stack (h_i + h_j ≤ B for some i), the link's load profile over
// its hyperperiod is swept instead and the stretches where load > B − h_j are what is forbidden.
//
// Cost: with a arcs (intervals) on the job's links, O(a log a) per query.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "workspace.hpp"

namespace metronome::planner::detail {

namespace {
constexpr Nanos kMaxCopies = 1 << 16;  // forbidden intervals per neighbour
constexpr Nanos kMaxArcs = 1 << 17;    // arcs in one stacking sweep
}  // namespace

Nanos LcmCapped(Nanos a, Nanos b) {
  if (a <= 0 || b <= 0) return 0;
  const Nanos g = std::gcd(a, b);
  if (a / g > kMaxHyperperiod / b) return 0;
  return a / g * b;
}

Workspace::Workspace(Topology topo, PlannerOptions opts)
    : topology(std::move(topo)),
      options(opts),
      link_jobs(topology.LinkCount()),
      link_best_effort(topology.LinkCount()),
      chains(topology.LinkCount()),
      profiles_(topology.LinkCount()) {}

JobShape Workspace::ShapeFor(const Job& job) const {
  JobShape s;
  s.links = JobLinks(topology, job);
  s.height.reserve(s.links.size());
  for (const LinkId l : s.links) {
    s.height.push_back(std::min(job.profile.beta_bps, topology.GetLink(l).capacity_bps));
  }
  s.p = job.profile.period_ns;
  s.w = job.profile.comm_ns;
  // The headroom is what stop-and-wait needs, not a harmonic stretch: max_stretch does not
  // bound it (also not in the no-stretch ablation); it is at most P. It is rounded up to a
  // whole percent of P, so that jobs of equal or harmonic natural periods and similar relative
  // jitter keep equal or harmonic periods (a fixed grid would break 123 ms : 246 ms).
  const auto sigma = static_cast<double>(job.profile.jitter_ns);
  const Nanos headroom = std::clamp<Nanos>(std::llround(options.jitter_headroom * sigma), 0, s.p);
  s.t0 = s.p;
  if (headroom > 0) {
    const Nanos percent = (headroom * 100 + s.p - 1) / s.p;  // ≤ 100; no overflow below ~1e16
    s.t0 = s.p + (s.p * percent + 99) / 100;
  }
  s.headroom_t0 = s.t0;
  if (options.cushion) {
    const Nanos jitter_gap = std::llround(options.jitter_cushion * sigma);
    s.gap = std::max(options.min_cushion_ns, jitter_gap);
    s.waiting_gap = std::max(options.min_cushion_ns, jitter_gap / 3);  // 1σ: see gap_at
  }
  s.weight = PriorityWeight(job.priority);
  s.priority = job.priority;
  return s;
}

std::uint32_t Workspace::AddJob(const Job& job) {
  ResolvedJob r{job, ShapeFor(job), true};
  std::uint32_t j = 0;
  if (!free_indices.empty()) {
    j = free_indices.back();
    free_indices.pop_back();
    r.shape.self = static_cast<std::int32_t>(j);
    jobs[j] = std::move(r);
    slots[j] = Slot{};
  } else {
    j = static_cast<std::uint32_t>(jobs.size());
    r.shape.self = static_cast<std::int32_t>(j);
    jobs.push_back(std::move(r));
    slots.emplace_back();
  }
  index[job.id] = j;
  return j;
}

void Workspace::KillJob(std::uint32_t j) {
  Unplace(j);
  jobs[j].alive = false;
  auto it = index.find(jobs[j].job.id);
  if (it != index.end() && it->second == j) index.erase(it);
  free_indices.push_back(j);
}

std::int32_t Workspace::Find(JobId id) const {
  auto it = index.find(id);
  return it == index.end() ? kNoOwner : static_cast<std::int32_t>(it->second);
}

void Workspace::PlaceGated(std::uint32_t j, Nanos period, Nanos offset) {
  Unplace(j);
  Slot& s = slots[j];
  const JobShape& shape = jobs[j].shape;
  s.period = period;
  s.offset = Mod(offset, period);
  if (shape.links.empty()) {
    s.state = SlotState::kNoLinks;
    return;
  }
  s.state = SlotState::kGated;
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    const LinkId l = shape.links[k];
    link_jobs[l].push_back({j, shape.height[k]});
    auto& chain = chains[l];
    auto it = std::lower_bound(chain.begin(), chain.end(), std::pair<Nanos, int>{period, 0});
    if (it != chain.end() && it->first == period) {
      ++it->second;
    } else {
      chain.insert(it, {period, 1});
    }
    UpdateProfile(l, j, shape.height[k], +1.0);
  }
}

void Workspace::PlaceBestEffort(std::uint32_t j) {
  Unplace(j);
  Slot& s = slots[j];
  s.state = SlotState::kBestEffort;
  s.period = jobs[j].shape.p;
  s.offset = 0;
  for (const LinkId l : jobs[j].shape.links) link_best_effort[l].push_back(j);
}

void Workspace::UnplaceAll(std::span<const std::uint32_t> js) {
  constexpr std::size_t kBatch = 8;
  if (js.size() >= kBatch) {
    for (const std::uint32_t j : js) {
      if (slots[j].state != SlotState::kGated) continue;
      for (const LinkId l : jobs[j].shape.links) profiles_[l].q = 0;
    }
  }
  for (const std::uint32_t j : js) Unplace(j);
}

void Workspace::Unplace(std::uint32_t j) {
  Slot& s = slots[j];
  const JobShape& shape = jobs[j].shape;
  if (s.state == SlotState::kGated) {
    for (std::size_t k = 0; k < shape.links.size(); ++k) {
      const LinkId l = shape.links[k];
      std::erase_if(link_jobs[l], [j](const Occupant& o) { return o.job == j; });
      auto& chain = chains[l];
      auto it = std::lower_bound(chain.begin(), chain.end(), std::pair<Nanos, int>{s.period, 0});
      if (it != chain.end() && it->first == s.period && --it->second == 0) chain.erase(it);
      UpdateProfile(l, j, shape.height[k], -1.0);
    }
  } else if (s.state == SlotState::kBestEffort) {
    for (const LinkId l : shape.links) std::erase(link_best_effort[l], j);
  }
  s.state = SlotState::kUnplaced;
}

void Workspace::SetOffset(std::uint32_t j, Nanos offset) {
  Slot& s = slots[j];
  const JobShape& shape = jobs[j].shape;
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    UpdateProfile(shape.links[k], j, shape.height[k], -1.0);
  }
  s.offset = Mod(offset, s.period);
  for (std::size_t k = 0; k < shape.links.size(); ++k) {
    UpdateProfile(shape.links[k], j, shape.height[k], +1.0);
  }
}

// Appends job j's windows over [0, q) (its slot, each w + gap long) to events_ as a step
// function: (instant, +height) where one opens, (instant, −height) where it closes.
void Workspace::WindowEvents(std::uint32_t j, double height, Nanos q) const {
  const Slot& sj = slots[j];
  const Nanos width = jobs[j].shape.w + GapAt(jobs[j].shape, sj.period);
  for (Nanos t = 0; t < q; t += sj.period) {
    const Nanos a = Mod(sj.offset + t, q);
    const Nanos e = a + width;
    events_.emplace_back(a, height);
    if (e <= q) {
      events_.emplace_back(e, -height);
    } else {
      events_.emplace_back(q, -height);
      events_.emplace_back(0, height);
      events_.emplace_back(e - q, -height);
    }
  }
}

void Workspace::AddWindows(const Profile& in, std::uint32_t j, double height, Profile& out) const {
  const Nanos q = in.q;
  events_.clear();
  WindowEvents(j, height, q);
  std::sort(events_.begin(), events_.end());
  out.q = q;
  out.seg.clear();
  double base = 0.0;
  double mine = 0.0;
  std::size_t i = 0;  // next segment of `in`
  std::size_t e = 0;  // next event of the job's windows
  const auto next_event = [&](std::size_t at) {
    return at < events_.size() ? events_[at].first : q;
  };
  while (i < in.seg.size() || e < events_.size()) {
    if (in.coalesced && mine == 0.0 && i < in.seg.size() && in.seg[i].first < next_event(e)) {
      // Between the job's windows the profile carries over as it is (a load plus +0.0 is the
      // load: none is −0.0, sums of positive heights from +0.0), so its segments up to the next
      // event are copied at once: being coalesced they differ from each other, and only the
      // first may repeat the load on which the job's last window closed.
      const auto from = in.seg.begin() + static_cast<std::ptrdiff_t>(i);
      const auto to = std::lower_bound(from, in.seg.end(), next_event(e),
                                       [](const auto& seg, Nanos t) { return seg.first < t; });
      const bool repeats = !out.seg.empty() && out.seg.back().second == from->second;
      out.seg.insert(out.seg.end(), repeats ? from + 1 : from, to);
      base = (to - 1)->second;
      i = static_cast<std::size_t>(to - in.seg.begin());
      continue;
    }
    const Nanos at = std::min(i < in.seg.size() ? in.seg[i].first : q,
                              e < events_.size() ? events_[e].first : q);
    if (at >= q) break;
    while (i < in.seg.size() && in.seg[i].first == at) base = in.seg[i++].second;
    while (e < events_.size() && events_[e].first == at) mine += events_[e++].second;
    if (!out.seg.empty() && out.seg.back().second == base + mine) continue;
    out.seg.emplace_back(at, base + mine);
  }
}

// Keeps a current profile current when job j's windows come (sign +1) or go (−1), rather than
// rebuilding it at the next query: stage 3 slides jobs one at a time, and a rebuild sorts every
// window of the link. A change of the link's hyperperiod makes it stale instead.
void Workspace::UpdateProfile(LinkId l, std::uint32_t j, double height, double sign) const {
  Profile& prof = profiles_[l];
  if (prof.q == 0) return;
  if (prof.q != Hyperperiod(l)) {
    prof.q = 0;
    return;
  }
  static thread_local Profile next;
  AddWindows(prof, j, sign * height, next);
  std::swap(prof.seg, next.seg);
  prof.coalesced = true;
  prof.peaks.clear();
}

void Workspace::Block(Nanos start, Nanos len, Nanos period, std::int32_t owner) const {
  if (len <= 0) return;
  if (len >= period) {
    all_blocked_ = true;
    return;
  }
  const Nanos s = Mod(start, period);
  if (s + len <= period) {
    blocked_.push_back({s, s + len - 1, owner});
  } else {
    blocked_.push_back({s, period - 1, owner});
    blocked_.push_back({0, s + len - 1 - period, owner});
  }
}

const Workspace::Profile& Workspace::LinkProfile(LinkId l) const {
  Profile& prof = profiles_[l];
  const Nanos q = Hyperperiod(l);
  if (prof.q == q) return prof;
  prof.q = q;
  prof.seg.clear();
  // Where one window closes as another of the same height opens, a segment repeats the load.
  prof.coalesced = false;
  prof.peaks.clear();
  events_.clear();
  for (const Occupant& o : link_jobs[l]) WindowEvents(o.job, o.height, q);
  std::sort(events_.begin(), events_.end());
  double load = 0.0;
  std::size_t i = 0;
  while (i < events_.size()) {
    const Nanos at = events_[i].first;
    while (i < events_.size() && events_[i].first == at) load += events_[i++].second;
    if (at < q) prof.seg.emplace_back(at, load);
  }
  return prof;
}

const std::vector<double>& Workspace::Peaks(Profile& prof) {
  if (prof.peaks.empty() && !prof.seg.empty()) {
    prof.peaks.reserve((prof.seg.size() + kPeakRun - 1) / kPeakRun);
    for (std::size_t from = 0; from < prof.seg.size(); from += kPeakRun) {
      const std::size_t to = std::min(prof.seg.size(), from + kPeakRun);
      double peak = prof.seg[from].second;
      for (std::size_t i = from + 1; i < to; ++i) peak = std::max(peak, prof.seg[i].second);
      prof.peaks.push_back(peak);
    }
  }
  return prof.peaks;
}

void Workspace::BlockLink(const JobShape& shape, std::size_t k, Nanos period) const {
  const LinkId l = shape.links[k];
  const double capacity = topology.GetLink(l).capacity_bps;
  const double h = shape.height[k];
  const double eps = 1e-9 * capacity;
  const Nanos w = shape.w + GapAt(shape, period);  // each window reserves its cushion after it
  bool exclusive = true;  // every other rectangle on the link is too tall to share with ours
  for (const Occupant& o : link_jobs[l]) {
    if (static_cast<std::int32_t>(o.job) != shape.self && o.height + h <= capacity + eps) {
      exclusive = false;
      break;
    }
  }
  if (exclusive) {
    for (const Occupant& o : link_jobs[l]) {
      const auto i = static_cast<std::int32_t>(o.job);
      if (i == shape.self) continue;
      const Slot& si = slots[o.job];
      const Nanos wi = jobs[o.job].shape.w + GapAt(jobs[o.job].shape, si.period);
      // Windows of periods T and T_i meet iff their offsets differ by less than the windows
      // modulo g = gcd(T, T_i): one forbidden interval per g, T/g of them in [0, T). Nested
      // periods give g = min(T, T_i), the most room; unrelated ones fit only in a small g.
      const Nanos g = std::gcd(period, si.period);
      const Nanos len = wi + w - 1;
      if (len <= 0) continue;
      if (len >= g || period / g > kMaxCopies) {
        all_blocked_ = true;
        return;
      }
      for (Nanos start = si.offset; start < si.offset + period; start += g) {
        Block(start - w + 1, len, period, i);
      }
    }
    return;
  }
  // Rectangles may stack: sweep the load over Q = lcm(T, H) and forbid where it exceeds B − h.
  const Nanos h_link = Hyperperiod(l);
  const Nanos q = h_link > 0 ? LcmCapped(period, h_link) : 0;
  Nanos arcs = 0;
  for (const Occupant& o : link_jobs[l]) arcs += q > 0 ? q / slots[o.job].period : 0;
  if (q == 0 || arcs > kMaxArcs) {  // too long a circle to certify: no offset is offered
    all_blocked_ = true;
    return;
  }
  // The load profile of the link over its hyperperiod H, cached per link until its windows
  // change; over Q it repeats Q/H times. A job on the link leaves its own windows out: they are
  // subtracted on the fly (its window at an instant is a modulo), where a profile rebuilt per
  // query made the cushions of a link with k jobs cost k sorts of all its windows.
  const Profile& prof = LinkProfile(l);
  const double limit = capacity - h + eps;  // a load above it leaves no room for the window
  bool self_here = false;
  double self_height = 0.0;
  for (const Occupant& o : link_jobs[l]) {
    if (static_cast<std::int32_t>(o.job) == shape.self) {
      self_here = true;
      self_height = o.height;
    }
  }
  const Slot* self_slot = self_here ? &slots[static_cast<std::uint32_t>(shape.self)] : nullptr;
  const Nanos self_width =
      self_here ? jobs[static_cast<std::uint32_t>(shape.self)].shape.w +
                      GapAt(jobs[static_cast<std::uint32_t>(shape.self)].shape, self_slot->period)
                : 0;
  // Forbids the offsets whose window would meet [at, next) if the load there is too high.
  const auto check = [&](Nanos base, Nanos at, Nanos next, double load) {
    if (next > at && load > limit) {
      Block(base + at - w + 1, next - at + w - 1, period, kNoOwner);
    }
    return all_blocked_;
  };
  // A run of segments whose highest load leaves room for this job's window (its own windows
  // there only lower the load) blocks nothing: check() would find no load over the limit.
  const std::vector<double>& peaks = Peaks(profiles_[l]);
  for (Nanos base = 0; base < q; base += h_link) {
    for (std::size_t i = 0; i < prof.seg.size(); ++i) {
      if (i % kPeakRun == 0 && peaks[i / kPeakRun] <= limit) {
        i += kPeakRun - 1;
        continue;
      }
      const Nanos at = prof.seg[i].first;
      const Nanos next = i + 1 < prof.seg.size() ? prof.seg[i + 1].first : h_link;
      const double load = prof.seg[i].second;
      if (!self_here) {
        if (check(base, at, next, load)) return;
        continue;
      }
      // The job's own windows split the segment where they begin or end inside it (a window
      // of another job may begin exactly where its own ends, at the same height).
      for (Nanos t = at; t < next;) {
        const Nanos into = Mod(t - self_slot->offset, self_slot->period);
        const bool inside = into < self_width;
        const Nanos end =
            std::min(next, t + (inside ? self_width - into : self_slot->period - into));
        if (check(base, t, end, inside ? load - self_height : load)) return;
        t = end;
      }
    }
  }
}

void Workspace::FreeRanges(const JobShape& shape, Nanos period, std::vector<FreeRange>& out,
                           std::int64_t only_link) const {
  out.clear();
  blocked_.clear();
  all_blocked_ = false;
  for (std::size_t k = 0; k < shape.links.size() && !all_blocked_; ++k) {
    if (only_link >= 0 && shape.links[k] != static_cast<LinkId>(only_link)) continue;
    BlockLink(shape, k, period);
  }
  if (all_blocked_) return;
  if (blocked_.empty()) {
    out.push_back({0, period - 1, kNoOwner, kNoOwner, true});
    return;
  }
  std::sort(blocked_.begin(), blocked_.end(),
            [](const Blocked& x, const Blocked& y) { return x.lo < y.lo; });
  // Merge into runs; a run remembers who starts it (lo) and who ends it (hi).
  struct Run {
    Nanos lo, hi;
    std::int32_t first, last;
  };
  static thread_local std::vector<Run> runs;
  runs.clear();
  for (const Blocked& b : blocked_) {
    if (!runs.empty() && b.lo <= runs.back().hi + 1) {
      if (b.hi > runs.back().hi) {
        runs.back().hi = b.hi;
        runs.back().last = b.owner;
      }
    } else {
      runs.push_back({b.lo, b.hi, b.owner, b.owner});
    }
  }
  const std::size_t n = runs.size();
  for (std::size_t k = 0; k < n; ++k) {
    const Run& next = runs[(k + 1) % n];
    Nanos a = runs[k].hi + 1;
    Nanos b = next.lo - 1 + (k + 1 < n ? 0 : period);
    if (a > b) continue;
    if (a >= period) {
      a -= period;
      b -= period;
    }
    out.push_back({a, b, runs[k].last, next.first, false});
  }
}

bool Workspace::RangeContaining(const JobShape& shape, Nanos period, Nanos offset, FreeRange& out,
                                std::int64_t only_link) const {
  static thread_local std::vector<FreeRange> ranges;
  FreeRanges(shape, period, ranges, only_link);
  const Nanos phi = Mod(offset, period);
  for (const FreeRange& r : ranges) {
    if ((r.a <= phi && phi <= r.b) || (r.a <= phi + period && phi + period <= r.b)) {
      out = r;
      return true;
    }
  }
  return false;
}

}  // namespace metronome::planner::detail
