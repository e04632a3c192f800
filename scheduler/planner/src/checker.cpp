// The independent feasibility checker (see checker.hpp). Deliberately written without the
// planner's interval structure: a plain sweep (or sampling) of each link's circle, and pairwise
// gcd arithmetic.
#include "metronome/planner/checker.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace metronome::planner {

namespace {

struct Window {
  std::size_t job;
  Nanos period, offset, width;
  double height;
  Nanos slack;
};

Nanos FloorMod(Nanos x, Nanos m) {
  return ((x % m) + m) % m;
}

}  // namespace

std::string CheckReport::Summary() const {
  std::string s = ok ? "ok" : "infeasible";
  for (const std::string& e : errors) s += "\n  " + e;
  return s;
}

CheckReport CheckPlan(const Problem& problem, const Plan& plan, const CheckOptions& options) {
  CheckReport report;
  auto fail = [&](std::string message) {
    report.ok = false;
    if (report.errors.size() < 50) report.errors.push_back(std::move(message));
  };
  std::unordered_map<JobId, const JobPlan*> entries;
  for (const JobPlan& e : plan.jobs) {
    if (!entries.emplace(e.id, &e).second) fail("job " + std::to_string(e.id) + ": two entries");
  }
  const Topology& topo = problem.topology;
  std::vector<std::vector<Window>> on_link(topo.LinkCount());
  for (std::size_t j = 0; j < problem.jobs.size(); ++j) {
    const Job& job = problem.jobs[j];
    const std::string who = "job " + std::to_string(job.id) + ": ";
    auto it = entries.find(job.id);
    if (it == entries.end()) {
      fail(who + "missing from the plan");
      continue;
    }
    const JobPlan& e = *it->second;
    if (e.best_effort) continue;  // ungated: not part of the timetable
    const std::vector<LinkId> links = JobLinks(topo, job);
    if (links.empty()) continue;
    if (e.timetable.period_ns < job.profile.period_ns) {
      fail(who + "period below its natural period");
    }
    if (e.timetable.window_ns < job.profile.comm_ns) {
      fail(who + "window shorter than its communication");
    }
    if (e.timetable.offset_ns < 0 || e.timetable.offset_ns >= e.timetable.period_ns) {
      fail(who + "offset outside [0, period)");
    }
    if (e.timetable.late_slack_ns < 0) fail(who + "negative late slack");
    if (e.timetable.period_ns <= 0) continue;
    for (const LinkId l : links) {
      const double h = std::min(job.profile.beta_bps, topo.GetLink(l).capacity_bps);
      on_link[l].push_back({j, e.timetable.period_ns, e.timetable.offset_ns, e.timetable.window_ns,
                            h, e.timetable.late_slack_ns});
    }
  }
  report.overload.assign(topo.LinkCount(), 0.0);
  for (LinkId l = 0; l < topo.LinkCount(); ++l) {
    const auto& ws = on_link[l];
    if (ws.size() < 2) continue;
    const double capacity = topo.GetLink(l).capacity_bps;
    const double limit = capacity * (1.0 + options.capacity_tolerance);
    const std::string where = "link " + topo.GetLink(l).name + ": ";
    // Pairs that cannot stack: exact, with the gcd of the two periods.
    for (std::size_t a = 0; a < ws.size(); ++a) {
      for (std::size_t b = a + 1; b < ws.size(); ++b) {
        const Window& x = ws[a];
        const Window& y = ws[b];
        if (x.height + y.height <= limit) continue;
        const Nanos g = std::gcd(x.period, y.period);
        const Nanos d = FloorMod(y.offset - x.offset, g);  // y starts d after some x start
        const std::string pair = where + "jobs " + std::to_string(problem.jobs[x.job].id) +
                                 " and " + std::to_string(problem.jobs[y.job].id);
        if (d < x.width || g - d < y.width) {
          fail(pair + " overlap");
          continue;
        }
        if (options.verify_late_slack) {
          if (d - x.width < x.slack) fail(pair + ": late slack of the first is not free");
          if (g - d - y.width < y.slack) fail(pair + ": late slack of the second is not free");
        }
      }
    }
    // The load over the whole circle: sweep over the lcm, or sample.
    Nanos lcm = 1;
    bool sweep = true;
    for (const Window& w : ws) {
      const Nanos g = std::gcd(lcm, w.period);
      if (lcm / g > std::numeric_limits<Nanos>::max() / w.period) {
        sweep = false;
        break;
      }
      lcm = lcm / g * w.period;
    }
    long long arcs = 0;
    if (sweep) {
      for (const Window& w : ws) arcs += lcm / w.period;
      sweep = arcs <= options.max_sweep_arcs;
    }
    double overload = 0.0;
    double peak = 0.0;
    if (sweep) {
      std::vector<std::pair<Nanos, double>> events;
      events.reserve(static_cast<std::size_t>(arcs) * 4);
      for (const Window& w : ws) {
        for (Nanos t = 0; t < lcm; t += w.period) {
          const Nanos s = FloorMod(w.offset + t, lcm);
          const Nanos e = s + w.width;
          events.emplace_back(s, w.height);
          if (e <= lcm) {
            events.emplace_back(e, -w.height);
          } else {
            events.emplace_back(lcm, -w.height);
            events.emplace_back(0, w.height);
            events.emplace_back(e - lcm, -w.height);
          }
        }
      }
      std::sort(events.begin(), events.end());  // at a tie, ends (negative) come first
      double load = 0.0;
      std::size_t i = 0;
      while (i < events.size()) {
        const Nanos at = events[i].first;
        while (i < events.size() && events[i].first == at) load += events[i++].second;
        const Nanos next = i < events.size() ? events[i].first : lcm;
        if (next > at) {
          peak = std::max(peak, load);
          overload += std::max(0.0, load - capacity) * static_cast<double>(next - at);
        }
      }
      overload /= static_cast<double>(lcm) * capacity;
    } else {
      Nanos span = 0;
      for (const Window& w : ws) span = std::max(span, w.period);
      span *= 1000;
      for (int s = 0; s < options.samples; ++s) {
        const auto t = static_cast<Nanos>(static_cast<double>(span) * (s + 0.5) / options.samples);
        double load = 0.0;
        for (const Window& w : ws) {
          if (FloorMod(t - w.offset, w.period) < w.width) load += w.height;
        }
        peak = std::max(peak, load);
        overload += std::max(0.0, load - capacity);
      }
      overload /= static_cast<double>(options.samples) * capacity;
    }
    report.overload[l] = overload;
    if (peak > limit) {
      fail(where + "load exceeds capacity (peak " + std::to_string(peak / capacity) + " B)");
    }
  }
  return report;
}

}  // namespace metronome::planner
