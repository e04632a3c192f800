// The figures of a run: per job, per link, and the summary (docs/simulator.md, "Metrics").
#include <algorithm>

#include "engine_job.hpp"

namespace metronome::sim::engine {

RunResult CollectResults(const std::string& policy, const std::vector<Job>& jobs,
                         const Cluster& cluster, const LinkTotals& totals) {
  RunResult r;
  r.policy = policy;
  double sum_jct = 0, sum_w = 0, sum_wjct = 0, sum_slow = 0;
  for (const Job& j : jobs) {
    JobResult jr;
    jr.name = j.spec->name;
    jr.model = j.spec->model;
    jr.priority = j.spec->priority;
    jr.gpus = j.spec->gpus;
    jr.iterations = j.spec->iterations;
    jr.nodes_used = static_cast<int>(j.nodes.size());
    jr.links_crossed = static_cast<int>(j.links.size());
    for (const std::uint32_t l : j.links) jr.links.push_back(cluster.links[l].name);
    jr.arrival_s = j.spec->arrival_s;
    jr.start_s = j.start_s;
    jr.finish_s = j.finish_s;
    jr.jct_s = j.finish_s - j.spec->arrival_s;
    const double iters = std::max(1, j.iter);
    jr.mean_iteration_ms = j.sum_iter / iters * 1e3;
    jr.natural_ms = j.natural_s * 1e3;
    jr.slowdown = jr.natural_ms > 0 ? jr.mean_iteration_ms / jr.natural_ms : 1.0;
    jr.comm_ms = j.sum_comm / iters * 1e3;
    jr.gate_wait_ms = j.sum_gate / iters * 1e3;
    jr.fail_opens = j.fail_opens;
    jr.yields = j.yields;
    jr.yield_wait_ms = j.sum_yield / iters * 1e3;
    jr.best_effort = j.best_effort;
    jr.mean_period_ms =
        j.gated_phases > 0 ? j.sum_period / static_cast<double>(j.gated_phases) * 1e3 : 0.0;
    jr.gated_fraction = static_cast<double>(j.gated_phases) / iters;
    jr.period_ms = static_cast<double>(j.last_tt.period_ns) * 1e-6;
    jr.window_ms = static_cast<double>(j.last_tt.window_ns) * 1e-6;
    jr.late_slack_ms = static_cast<double>(j.last_tt.late_slack_ns) * 1e-6;
    const double w = 1.0 + std::max(0, jr.priority);
    sum_jct += jr.jct_s;
    sum_w += w;
    sum_wjct += w * jr.jct_s;
    sum_slow += jr.slowdown;
    r.summary.makespan_s = std::max(r.summary.makespan_s, jr.finish_s);
    r.jobs.push_back(std::move(jr));
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, jobs.size()));
  r.summary.avg_jct_s = sum_jct / n;
  r.summary.weighted_jct_s = sum_wjct / sum_w;
  r.summary.avg_slowdown = sum_slow / n;
  double sum_util = 0, sum_transfer = 0, sum_overlap = 0;
  for (std::size_t l = 0; l < cluster.links.size(); ++l) {
    if (totals.bytes[l] <= 0 || totals.busy_s[l] <= 0) continue;
    LinkResult lr;
    lr.name = cluster.links[l].name;
    lr.capacity_gbps = cluster.links[l].capacity_bytes_per_s / kBytesPerGbit;
    lr.bytes = totals.bytes[l];
    lr.busy_s = totals.busy_s[l];
    lr.utilization = lr.bytes / (cluster.links[l].capacity_bytes_per_s * lr.busy_s);
    lr.overlap_s = totals.overlap_s[l];
    sum_transfer += totals.transfer_s[l];
    sum_overlap += totals.overlap_s[l];
    sum_util += lr.utilization;
    r.links.push_back(std::move(lr));
  }
  if (!r.links.empty()) {
    r.summary.avg_link_utilization = sum_util / static_cast<double>(r.links.size());
  }
  if (sum_transfer > 0) r.summary.overlap_fraction = sum_overlap / sum_transfer;
  return r;
}

}  // namespace metronome::sim::engine
