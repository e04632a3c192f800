#include "metronome/planner/ranked_yields.hpp"

#include <algorithm>
#include <cstddef>
#include <span>
#include <unordered_map>

namespace metronome::planner {

namespace {

bool Gated(const JobPlan& p) {
  return !p.best_effort && !AlwaysOpen(p.timetable);
}

// The job of each plan entry: the planner lists both in the same order; others (hand-built
// plans) are looked up by id. nullptr for an entry with no job.
std::vector<const Job*> MatchJobs(const std::vector<Job>& jobs, const Plan& plan) {
  std::vector<const Job*> job(plan.jobs.size(), nullptr);
  std::unordered_map<JobId, const Job*> by_id;
  for (std::size_t i = 0; i < plan.jobs.size(); ++i) {
    if (i < jobs.size() && jobs[i].id == plan.jobs[i].id) {
      job[i] = &jobs[i];
      continue;
    }
    if (by_id.empty()) {
      for (const Job& j : jobs) by_id.emplace(j.id, &j);
    }
    const auto it = by_id.find(plan.jobs[i].id);
    if (it != by_id.end()) job[i] = it->second;
  }
  return job;
}

// The planned jobs with their links, and the jobs on each link, by plan entry. Flat arrays
// (an offset per entry and per link): a plan of thousands of jobs on thousands of links would
// otherwise allocate a vector for each.
class LinkUsers {
 public:
  std::vector<const Job*> job;

  // links_of(i, job): entry i's links (entries with a job only), valid until its next call.
  template <class LinksOf>
  LinkUsers(const Topology& topology, std::vector<const Job*> jobs, LinksOf&& links_of)
      : job(std::move(jobs)), link_at_(job.size() + 1, 0) {
    for (std::size_t i = 0; i < job.size(); ++i) {
      if (job[i] != nullptr) {
        const std::span<const LinkId> crossed = links_of(i, *job[i]);
        links_.insert(links_.end(), crossed.begin(), crossed.end());
      }
      link_at_[i + 1] = links_.size();
    }
    user_at_.assign(topology.LinkCount() + 1, 0);
    for (const LinkId l : links_) ++user_at_[l + 1];
    for (std::size_t l = 1; l < user_at_.size(); ++l) user_at_[l] += user_at_[l - 1];
    users_.resize(links_.size());
    std::vector<std::size_t> next(user_at_.begin(), user_at_.end() - 1);
    for (std::size_t i = 0; i < job.size(); ++i) {
      for (const LinkId l : Links(i)) users_[next[l]++] = i;
    }
  }
  std::span<const LinkId> Links(std::size_t entry) const {
    return {links_.data() + link_at_[entry], link_at_[entry + 1] - link_at_[entry]};
  }
  std::span<const std::size_t> Users(LinkId l) const {
    return {users_.data() + user_at_[l], user_at_[l + 1] - user_at_[l]};
  }

 private:
  std::vector<LinkId> links_;  // every entry's links, entry after entry
  std::vector<std::size_t> link_at_;
  std::vector<std::size_t> users_;  // every link's entries, link after link, ascending
  std::vector<std::size_t> user_at_;
};

// The most jobs ranked below entry a on any of b's links that a crosses: they share its window's
// allowance (PlannerOptions::yield_allowance).
std::size_t RankedBelow(const LinkUsers& u, std::size_t a, std::size_t b) {
  std::size_t most = 1;
  for (const LinkId l : u.Links(b)) {
    const auto users = u.Users(l);
    if (std::find(users.begin(), users.end(), a) == users.end()) continue;
    const auto below =
        static_cast<std::size_t>(std::count_if(users.begin(), users.end(), [&](std::size_t x) {
          return RanksAbove(u.job[a]->priority, u.job[x]->priority);
        }));
    most = std::max(most, below);
  }
  return most;
}

// What entry b yields to, and the gated jobs its ungated traffic meets there (by entry), with
// whether its set holds their windows: RankedYields' yielded_to counts them.
struct Judgement {
  std::shared_ptr<const YieldSet> yields;
  std::vector<std::size_t> meets;
  std::vector<char> covered;  // per meets entry
};

Judgement Judge(const Topology& topology, const LinkUsers& u, const Plan& plan,
                const PlannerOptions& options, std::size_t b) {
  Judgement out;
  const Job& jb = *u.job[b];
  const bool b_gated = Gated(plan.jobs[b]);
  std::vector<std::size_t> above;
  std::vector<std::size_t>& meets = out.meets;
  // The share of the wire the job expects between the windows it yields to: the others that
  // do not yield to it, or to which it does not yield, are there as often as their duty
  // cycles say (on its busiest link).
  double sharing = 1.0;
  for (const LinkId l : u.Links(b)) {
    const double capacity = topology.GetLink(l).capacity_bps;
    const double b_rate = std::min(jb.profile.beta_bps, capacity);
    double others = 0.0;
    for (const std::size_t a : u.Users(l)) {
      if (a == b) continue;
      const double a_rate = std::min(u.job[a]->profile.beta_bps, capacity);
      // Side by side within the capacity: nothing to yield, nothing shared.
      if (a_rate + b_rate <= capacity * (1 + 1e-9)) continue;
      const bool a_gated = Gated(plan.jobs[a]);
      if (a_gated && !b_gated && SlowsMaterially(a_rate, b_rate, capacity) &&
          std::find(meets.begin(), meets.end(), a) == meets.end()) {
        meets.push_back(a);
      }
      if (!a_gated || !RanksAbove(u.job[a]->priority, jb.priority)) {
        others += u.job[a]->profile.DutyCycle();
        continue;
      }
      if (!SlowsMaterially(a_rate, b_rate, capacity)) continue;
      if (std::find(above.begin(), above.end(), a) == above.end()) above.push_back(a);
    }
    sharing = std::max(sharing, 1.0 + others);
  }
  // The highest-ranked first, then the longest duty cycle, then the id (a stable set).
  std::sort(above.begin(), above.end(), [&](std::size_t x, std::size_t y) {
    const Timetable& tx = plan.jobs[x].timetable;
    const Timetable& ty = plan.jobs[y].timetable;
    if (u.job[x]->priority != u.job[y]->priority) {
      return u.job[x]->priority > u.job[y]->priority;
    }
    const double dx = static_cast<double>(tx.window_ns) / static_cast<double>(tx.period_ns);
    const double dy = static_cast<double>(ty.window_ns) / static_cast<double>(ty.period_ns);
    if (dx != dy) return dx > dy;
    return plan.jobs[x].id < plan.jobs[y].id;
  });
  if (above.size() > kMaxYieldWindows) above.resize(kMaxYieldWindows);
  if (!above.empty()) {
    YieldSet y;
    y.need_ns = std::min(static_cast<Nanos>(static_cast<double>(jb.profile.comm_ns) * sharing),
                         jb.profile.period_ns);
    y.max_wait_ns = jb.profile.period_ns;
    for (const std::size_t a : above) {
      // The window and the part of its cushion that its jitter may take: a phase of the job
      // that starts a little late must find the wire still clear at its end.
      const Timetable& t = plan.jobs[a].timetable;
      const auto jitter = static_cast<Nanos>(options.jitter_cushion *
                                             static_cast<double>(u.job[a]->profile.jitter_ns));
      const Nanos guard = std::min(t.late_slack_ns, std::max(options.min_cushion_ns, jitter));
      // A transfer may run into a window by what the least of these cushions absorbs: the
      // job it meets there ends that much late at most, still inside its guard.
      y.tolerance_ns = y.count == 0 ? guard : std::min(y.tolerance_ns, guard);
      // A phase may end this far into it rather than pause: its share of the window's allowance.
      const auto allowance =
          static_cast<Nanos>(options.yield_allowance * static_cast<double>(t.window_ns) /
                             static_cast<double>(RankedBelow(u, a, b)));
      y.allowance_ns = y.count == 0 ? allowance : std::min(y.allowance_ns, allowance);
      y.windows[y.count++] = {t.period_ns, t.offset_ns,
                              std::min(t.window_ns + guard, t.period_ns - 1)};
    }
    // Periods and windows come from a validated plan: this only fills the inverse periods.
    if ((ValidateYieldSet(y) & kYieldRejectMask) != 0) {
      above.clear();
    } else {
      out.yields = std::make_shared<const YieldSet>(y);
    }
  }
  for (const std::size_t a : meets) {
    out.covered.push_back(std::find(above.begin(), above.end(), a) != above.end() ? 1 : 0);
  }
  return out;
}

// What of a job and its plan entry a judgement reads (its own, or as another job's neighbour).
bool SameInputs(const Job& a, const Job& b) {
  return a.id == b.id && a.priority == b.priority && a.profile.period_ns == b.profile.period_ns &&
         a.profile.comm_ns == b.profile.comm_ns && a.profile.beta_bps == b.profile.beta_bps &&
         a.profile.jitter_ns == b.profile.jitter_ns;
}

}  // namespace

bool RanksAbove(int a_priority, int b_priority) {
  return a_priority > b_priority;
}

bool SlowsMaterially(double a_rate, double b_rate, double capacity) {
  return a_rate + b_rate - capacity > 0.25 * a_rate;
}

std::vector<JobYields> RankedYields(const Topology& topology, const std::vector<Job>& jobs,
                                    const Plan& plan, const PlannerOptions& options) {
  const std::size_t n = plan.jobs.size();
  std::vector<LinkId> crossed;
  const LinkUsers u(topology, MatchJobs(jobs, plan), [&](std::size_t, const Job& job) {
    crossed = JobLinks(topology, job);
    return std::span<const LinkId>(crossed);
  });
  std::vector<JobYields> out(n);
  // Per gated job: the ungated jobs that meet it, and those of them whose set holds its window.
  std::vector<std::size_t> met(n, 0);
  std::vector<std::size_t> covered(n, 0);
  for (std::size_t b = 0; b < n; ++b) {
    if (u.job[b] == nullptr) continue;
    Judgement j = Judge(topology, u, plan, options, b);
    out[b].yields = std::move(j.yields);
    for (std::size_t k = 0; k < j.meets.size(); ++k) {
      ++met[j.meets[k]];
      covered[j.meets[k]] += j.covered[k];
    }
  }
  for (std::size_t a = 0; a < n; ++a) {
    out[a].yielded_to =
        u.job[a] != nullptr && Gated(plan.jobs[a]) && met[a] > 0 && met[a] == covered[a];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

struct RankedYieldsMemo::State {
  struct Entry {
    Job job;  // the inputs a judgement reads (SameInputs), nodes and extra links for the links
    JobPlan plan;
    std::vector<LinkId> links;
    std::shared_ptr<const YieldSet> yields;
    std::vector<JobId> meets;
    std::vector<char> covered;
    std::size_t position = 0;  // its plan entry at that call
    std::uint64_t seen = 0;    // the call that last saw it
  };
  std::unordered_map<JobId, Entry> entries;
  std::unordered_map<JobId, std::pair<std::uint32_t, std::uint32_t>> met;  // gated: met, covered
  std::uint64_t calls = 0;
  bool whole = true;  // false while a call runs: one that threw half-way left it inconsistent
};

RankedYieldsMemo::RankedYieldsMemo() : state_(std::make_unique<State>()) {}
RankedYieldsMemo::~RankedYieldsMemo() = default;
RankedYieldsMemo::RankedYieldsMemo(RankedYieldsMemo&&) noexcept = default;
RankedYieldsMemo& RankedYieldsMemo::operator=(RankedYieldsMemo&&) noexcept = default;

std::vector<JobYields> RankedYields(const Topology& topology, const std::vector<Job>& jobs,
                                    const Plan& plan, const PlannerOptions& options,
                                    RankedYieldsMemo& memo) {
  using Entry = RankedYieldsMemo::State::Entry;
  RankedYieldsMemo::State& st = *memo.state_;
  if (!st.whole) {
    st.entries.clear();
    st.met.clear();
  }
  st.whole = false;
  const std::uint64_t call = ++st.calls;
  const std::size_t n = plan.jobs.size();
  std::vector<const Job*> matched = MatchJobs(jobs, plan);
  std::vector<Entry*> entry(n, nullptr);
  std::vector<char> dirty(topology.LinkCount(), 0);
  bool reordered = false;  // the entries' order decides sums: another order judges all again
  std::size_t last_position = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (matched[i] == nullptr) continue;
    const Job& job = *matched[i];
    const JobPlan& planned = plan.jobs[i];
    auto [it, fresh] = st.entries.try_emplace(planned.id);
    Entry& e = it->second;
    entry[i] = &e;
    if (!fresh) {
      reordered = reordered || e.position < last_position;
      last_position = e.position;
    }
    e.position = i;
    e.seen = call;
    const bool moved = fresh || e.job.nodes != job.nodes || e.job.extra_links != job.extra_links;
    if (!moved && SameInputs(e.job, job) && e.plan.timetable == planned.timetable &&
        e.plan.best_effort == planned.best_effort) {
      continue;
    }
    for (const LinkId l : e.links) dirty[l] = 1;
    if (moved) e.links = JobLinks(topology, job);
    for (const LinkId l : e.links) dirty[l] = 1;
    e.job = job;
    e.plan = planned;
  }
  const auto take_back = [&st](Entry& e) {  // e's contributions to the counts of those it met
    for (std::size_t k = 0; k < e.meets.size(); ++k) {
      auto m = st.met.find(e.meets[k]);
      if (m == st.met.end()) continue;
      --m->second.first;
      m->second.second -= e.covered[k];
      if (m->second.first == 0 && m->second.second == 0) st.met.erase(m);
    }
    e.meets.clear();
    e.covered.clear();
  };
  for (auto it = st.entries.begin(); it != st.entries.end();) {
    if (it->second.seen == call) {
      ++it;
      continue;
    }
    for (const LinkId l : it->second.links) dirty[l] = 1;
    take_back(it->second);
    it = st.entries.erase(it);
  }
  const LinkUsers u(topology, std::move(matched), [&](std::size_t i, const Job&) {
    return std::span<const LinkId>(entry[i]->links);
  });
  for (std::size_t b = 0; b < n; ++b) {
    if (u.job[b] == nullptr) continue;
    const auto links = u.Links(b);
    if (!reordered &&
        std::none_of(links.begin(), links.end(), [&](LinkId l) { return dirty[l]; })) {
      continue;
    }
    Entry& e = *entry[b];
    take_back(e);
    Judgement j = Judge(topology, u, plan, options, b);
    e.yields = std::move(j.yields);
    e.covered = std::move(j.covered);
    for (std::size_t k = 0; k < j.meets.size(); ++k) {
      const JobId met = plan.jobs[j.meets[k]].id;
      e.meets.push_back(met);
      auto& counts = st.met[met];
      ++counts.first;
      counts.second += e.covered[k];
    }
  }
  st.whole = true;
  std::vector<JobYields> out(n);
  for (std::size_t a = 0; a < n; ++a) {
    if (entry[a] == nullptr) continue;
    out[a].yields = entry[a]->yields;
    const auto m = st.met.find(plan.jobs[a].id);
    out[a].yielded_to = Gated(plan.jobs[a]) && m != st.met.end() && m->second.first > 0 &&
                        m->second.first == m->second.second;
  }
  return out;
}

}  // namespace metronome::planner
