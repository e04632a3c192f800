// The registry's state as Prometheus families, built at each scrape (the service adds this as a
// collector of its Metrics): the counts, each link's plan and load, each job's lateness and
// yields. Read from the registry a slice of jobs at a time, as the status API reads it: a scrape
// of thousands of jobs and links holds no report behind it for long, and nothing is set per
// report or per job in a metrics family (whose removal of one series searched all of them).
#include <prometheus/metric_family.h>

#include <vector>

#include "registry.hpp"

namespace metronome::service {

using prometheus::MetricFamily;
using prometheus::MetricType;

std::vector<MetricFamily> Registry::MetricFamilies() const {
  const Tally t = Count();
  const LinkLoads loads = CollectLinkLoads();
  std::vector<MetricFamily> out;
  const auto single = [&](const char* name, const char* help, size_t value) {
    out.push_back(Metrics::Family(name, help, MetricType::Gauge));
    Metrics::AddSample(out.back(), {}, static_cast<double>(value));
  };
  single("metronome_jobs", "Jobs in the registry", t.jobs);
  single("metronome_jobs_planned", "Jobs with a timetable", t.planned);
  single("metronome_jobs_best_effort", "Jobs planned best-effort (ungated)", t.best_effort);
  single("metronome_ranks", "Registered ranks", t.ranks);
  single("metronome_clients", "Connected clients (ZeroMQ peers seen)", t.clients);
  single("metronome_links", "Links in the topology", t.links);

  MetricFamily planned = Metrics::Family("metronome_link_planned_utilization",
                                         "Contention-free share of the link the plan serves (0..1)",
                                         MetricType::Gauge);
  MetricFamily measured = Metrics::Family(
      "metronome_link_measured_utilization",
      "Share of the link the jobs' measured profiles use (0..1)", MetricType::Gauge);
  MetricFamily cushion = Metrics::Family("metronome_link_min_cushion_seconds",
                                         "Smallest gap after a gated window on the link (-1: none)",
                                         MetricType::Gauge);
  MetricFamily jobs =
      Metrics::Family("metronome_link_jobs", "Jobs crossing the link", MetricType::Gauge);
  for (const auto& l : loads.links) {
    const auto on = loads.jobs.find(l.name);
    const auto load = loads.measured.find(l.name);
    Metrics::AddSample(planned, {{"link", l.name}}, l.served_load);
    Metrics::AddSample(measured, {{"link", l.name}},
                       load == loads.measured.end() ? 0.0 : load->second);
    Metrics::AddSample(cushion, {{"link", l.name}},
                       l.min_cushion_ns < 0 ? -1.0 : static_cast<double>(l.min_cushion_ns) * 1e-9);
    Metrics::AddSample(jobs, {{"link", l.name}},
                       on == loads.jobs.end() ? 0.0 : static_cast<double>(on->second.size()));
  }

  // A job's series from its first measured phase (lateness) or its first hold (yields) on.
  MetricFamily lateness = Metrics::Family(
      "metronome_job_lateness_seconds",
      "Moving average of a job's phase start minus its window opening", MetricType::Gauge);
  MetricFamily yields = Metrics::Family(
      "metronome_job_yields_total", "Collectives a job's shims held for higher-priority windows",
      MetricType::Counter);
  MetricFamily yield_wait = Metrics::Family(
      "metronome_job_yield_wait_seconds_total",
      "Time a job's collectives waited for higher-priority windows", MetricType::Counter);
  ForEachJobSliced([&](const std::string& name, const JobState& job) {
    if (job.phases_seen > 0) {
      Metrics::AddSample(lateness, {{"job", name}}, job.lateness_ewma_ns * 1e-9);
    }
    if (job.yielded > 0) {
      Metrics::AddSample(yields, {{"job", name}}, static_cast<double>(job.yielded));
      Metrics::AddSample(yield_wait, {{"job", name}},
                         static_cast<double>(job.yield_wait_ns) * 1e-9);
    }
  });
  for (auto* f : {&planned, &measured, &cushion, &jobs, &lateness, &yields, &yield_wait}) {
    out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace metronome::service
