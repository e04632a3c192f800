#include "metronome/service/metrics.hpp"

#include <prometheus/text_serializer.h>

#include <limits>
#include <utility>

#include "metronome/extender/extender.hpp"

namespace metronome::service {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// One bucket layout (100 µs to 1 s) for every latency histogram, the extender's included.
Histogram::BucketBoundaries LatencyBuckets() {
  const auto& b = extender::LatencyHistogram::kBounds;
  return {b.begin(), b.end()};
}

using Labels = std::vector<ClientMetric::Label>;

ClientMetric Sample(Labels labels, double value, MetricType type) {
  ClientMetric m;
  m.label = std::move(labels);
  (type == MetricType::Gauge ? m.gauge.value : m.counter.value) = value;
  return m;
}

ClientMetric HistogramSample(Labels labels, const extender::LatencyHistogram& h) {
  ClientMetric m;
  m.label = std::move(labels);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum_seconds;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    m.histogram.bucket.push_back({cumulative, i < h.kBounds.size()
                                                  ? h.kBounds[i]
                                                  : std::numeric_limits<double>::infinity()});
  }
  return m;
}

MetricFamily Family(const char* name, const char* help, MetricType type,
                    std::vector<ClientMetric> samples) {
  return MetricFamily{name, help, type, std::move(samples)};
}

// A counter family with one sample per verb.
MetricFamily PerVerb(const char* name, const char* help, uint64_t filter, uint64_t prioritize) {
  return Family(
      name, help, MetricType::Counter,
      {Sample({{"verb", "filter"}}, static_cast<double>(filter), MetricType::Counter),
       Sample({{"verb", "prioritize"}}, static_cast<double>(prioritize), MetricType::Counter)});
}

MetricFamily Single(const char* name, const char* help, uint64_t value,
                    MetricType type = MetricType::Counter) {
  return Family(name, help, type, {Sample({}, static_cast<double>(value), type)});
}

}  // namespace

std::vector<MetricFamily> KubeMetricFamilies(const KubeStats& s) {
  std::vector<MetricFamily> out;
  MetricFamily lists = Family("metronome_kube_lists_total",
                              "Lists of a watched resource: 1, and one more after each 410 Gone "
                              "or failed watch",
                              MetricType::Counter, {});
  MetricFamily errors = Family("metronome_kube_watch_errors_total",
                               "Failed lists and watches of a watched resource (each retried)",
                               MetricType::Counter, {});
  for (const KubeStats::Watched& w : s.watched) {
    lists.metric.push_back(
        Sample({{"resource", w.resource}}, static_cast<double>(w.lists), MetricType::Counter));
    errors.metric.push_back(
        Sample({{"resource", w.resource}}, static_cast<double>(w.errors), MetricType::Counter));
  }
  out.push_back(std::move(lists));
  out.push_back(std::move(errors));
  out.push_back(Single("metronome_kube_request_retries_total",
                       "API server requests sent again after a failure or a 429/5xx answer",
                       s.retries));
  out.push_back(Family(
      "metronome_kube_unreadable_objects",
      "Objects in the caches that do not parse and are left out, at the last refresh",
      MetricType::Gauge,
      {Sample({{"kind", "TrafficProfile"}}, static_cast<double>(s.unreadable_profiles),
              MetricType::Gauge),
       Sample({{"kind", "Pod"}}, static_cast<double>(s.unreadable_pods), MetricType::Gauge)}));
  out.push_back(Family(
      "metronome_kube_write_failures_total",
      "Writes the API server refused or did not answer: LinkSchedules, TrafficProfile statuses",
      MetricType::Counter,
      {Sample({{"kind", "LinkSchedule"}}, static_cast<double>(s.schedule_write_failures),
              MetricType::Counter),
       Sample({{"kind", "TrafficProfile"}}, static_cast<double>(s.profile_write_failures),
              MetricType::Counter)}));
  return out;
}

std::vector<MetricFamily> ExtenderMetricFamilies(const extender::ExtenderStats& s) {
  std::vector<MetricFamily> out;
  out.push_back(PerVerb("metronome_extender_requests_total",
                        "kube-scheduler extender calls received, by verb (malformed ones included)",
                        s.filter_requests, s.prioritize_requests));
  out.push_back(PerVerb("metronome_extender_bad_requests_total",
                        "Extender calls answered 400 because the ExtenderArgs body was malformed, "
                        "by verb",
                        s.filter_bad_requests, s.prioritize_bad_requests));
  out.push_back(Family("metronome_extender_request_duration_seconds",
                       "Time the extender took to answer a call (parse, what-if, reply; HTTP "
                       "transfer not included), by verb",
                       MetricType::Histogram,
                       {HistogramSample({{"verb", "filter"}}, s.filter_latency),
                        HistogramSample({{"verb", "prioritize"}}, s.prioritize_latency)}));
  out.push_back(Single("metronome_extender_internal_errors_total",
                       "Extender calls that failed inside the handler and answered with an error "
                       "(a bug: kube-scheduler then places the pod without the extender)",
                       s.internal_errors));
  out.push_back(Single("metronome_extender_nodes_filtered_out_total",
                       "Nodes removed by filter (FailedNodes): the pod would break a "
                       "higher-priority job's timetable there",
                       s.nodes_filtered_out));
  out.push_back(Single("metronome_extender_never_starve_passes_total",
                       "Filter calls where every node would break a higher-priority timetable and "
                       "all were passed (never_starve)",
                       s.never_starve_passes));
  out.push_back(Family(
      "metronome_extender_neutral_answers_total",
      "Calls answered without an opinion (all nodes pass, equal scores), by reason: the pod names "
      "no job (no_job), its job has no traffic profile (no_profile), or the planner refused the "
      "job as the pod describes it (planner_refused: no opinion on the candidates it refused)",
      MetricType::Counter,
      {Sample({{"reason", "no_job"}}, static_cast<double>(s.pods_without_job), MetricType::Counter),
       Sample({{"reason", "no_profile"}}, static_cast<double>(s.pods_without_profile),
              MetricType::Counter),
       Sample({{"reason", "planner_refused"}}, static_cast<double>(s.planner_refusals),
              MetricType::Counter)}));
  out.push_back(Single("metronome_extender_bad_annotations_total",
                       "Calls whose pod has metronome.dev annotations that cannot be read (not a "
                       "priority, not a positive number, not a rank count): ignored, logged once "
                       "per pod in a row",
                       s.bad_annotations));
  out.push_back(Single("metronome_extender_reused_decisions_total",
                       "Prioritize calls answered from the same pod's filter verdicts",
                       s.reused_decisions));
  out.push_back(
      Single("metronome_extender_snapshot_rebuilds_total",
             "Planner snapshots the extender rebuilt (new cluster state, newly seen nodes)",
             s.snapshot_rebuilds));
  out.push_back(Single("metronome_extender_state_version",
                       "Plan version of the cluster state the extender answers from",
                       s.state_version, MetricType::Gauge));
  return out;
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  received_ = &BuildCounter()
                   .Name("metronome_messages_received_total")
                   .Help("Messages received at the ZeroMQ endpoint, by type")
                   .Register(r);
  sent_ = &BuildCounter()
               .Name("metronome_messages_sent_total")
               .Help("Messages sent to shims, by type")
               .Register(r);
  rejected_ = &BuildCounter()
                   .Name("metronome_rejected_messages_total")
                   .Help("Messages rejected (answered with an Error), by reason")
                   .Register(r);
  send_failed_ = &BuildCounter()
                      .Name("metronome_send_failures_total")
                      .Help("Messages that could not be sent (peer gone, queue full), by reason")
                      .Register(r);
  registrations_ = &BuildCounter()
                        .Name("metronome_registrations_total")
                        .Help("Hellos accepted: new ranks and re-registrations")
                        .Register(r);
  jobs_removed_ = &BuildCounter()
                       .Name("metronome_jobs_removed_total")
                       .Help("Jobs removed from the registry, by reason (bye, timeout)")
                       .Register(r);
  replans_ = &BuildCounter()
                  .Name("metronome_replans_total")
                  .Help("Planner runs, by trigger (join, leave, lateness, profile, offline)")
                  .Register(r);
  decisions_ = &BuildCounter()
                    .Name("metronome_controller_decisions_total")
                    .Help("Controller decisions, by kind")
                    .Register(r);
  offline_runs_ = &BuildCounter()
                       .Name("metronome_offline_runs_total")
                       .Help("Background recalculations, by outcome")
                       .Register(r);
  pushes_ = &BuildCounter()
                 .Name("metronome_timetable_pushes_total")
                 .Help("Timetables sent to ranks, by reason (plan, register, stale)")
                 .Register(r);
  turn_edges_ = &BuildCounter()
                     .Name("metronome_turn_edges_total")
                     .Help(
                         "Phase edges received from shims, by outcome (relayed, no_partner: no "
                         "job takes turns with it, other_rank: a lower rank speaks for the job, "
                         "off: controller.turns is false, ahead: dated more than 100 ms ahead "
                         "of the scheduler's clock, refused)")
                     .Register(r);
  turn_edges_relayed_ = &BuildCounter()
                             .Name("metronome_turn_edge_messages_total")
                             .Help("Phase edges sent on to the shims of the jobs taking turns")
                             .Register(r)
                             .Add({});
  turn_pushes_ = &BuildCounter()
                      .Name("metronome_turn_pushes_total")
                      .Help("Turn sets (whom a job takes turns with) sent to ranks")
                      .Register(r)
                      .Add({});
  http_requests_ = &BuildCounter()
                        .Name("metronome_http_requests_total")
                        .Help("HTTP requests, by route and status code")
                        .Register(r);
  http_rejected_ = &BuildCounter()
                        .Name("metronome_http_rejected_total")
                        .Help("HTTP requests rejected with a 4xx/5xx JSON error, by route, reason")
                        .Register(r);
  http_latency_ = &BuildHistogram()
                       .Name("metronome_http_request_duration_seconds")
                       .Help("HTTP request handling time, by route")
                       .Register(r);
  phases_measured_ = &BuildCounter()
                          .Name("metronome_phases_measured_total")
                          .Help("Communication phases reported by shims")
                          .Register(r)
                          .Add({});
  phases_late_ = &BuildCounter()
                      .Name("metronome_phases_late_total")
                      .Help("Phases that drifted past their cushion (held to the next window)")
                      .Register(r)
                      .Add({});
  phases_realigned_ = &BuildCounter()
                           .Name("metronome_phases_realigned_total")
                           .Help("Late phases the shims held to their next window (all ranks)")
                           .Register(r)
                           .Add({});
  rank_timeouts_ = &BuildCounter()
                        .Name("metronome_rank_timeouts_total")
                        .Help("Ranks dropped because they stopped reporting")
                        .Register(r)
                        .Add({});
  planning_errors_ = &BuildCounter()
                          .Name("metronome_planning_errors_total")
                          .Help("Jobs the planner refused (invalid profile or topology)")
                          .Register(r)
                          .Add({});
  rounds_yielded_ = &BuildCounter()
                         .Name("metronome_planning_rounds_yielded_total")
                         .Help(
                             "Planning rounds that left the rest of their batch to the next "
                             "round, for changes that waited for their part")
                         .Register(r)
                         .Add({});
  plan_duration_ = &BuildHistogram()
                        .Name("metronome_plan_duration_seconds")
                        .Help("Time spent in the planner per re-plan")
                        .Register(r)
                        .Add({}, LatencyBuckets());
  push_latency_ = &BuildHistogram()
                       .Name("metronome_timetable_push_latency_seconds")
                       .Help("From the message that caused a re-plan to the timetable's send")
                       .Register(r)
                       .Add({}, LatencyBuckets());
  phase_lateness_ = &BuildHistogram()
                         .Name("metronome_phase_lateness_seconds")
                         .Help("|phase start - nearest window opening| of measured phases")
                         .Register(r)
                         .Add({}, LatencyBuckets());
  turn_edge_age_ = &BuildHistogram()
                        .Name("metronome_turn_edge_age_seconds")
                        .Help("From a phase edge on its shim (scheduler clock) to its relay")
                        .Register(r)
                        .Add({}, LatencyBuckets());
  turns_refresh_duration_ =
      &BuildHistogram()
           .Name("metronome_turns_refresh_seconds")
           .Help("Time to recompute whom every job takes turns with (holds the registry)")
           .Register(r)
           .Add({}, LatencyBuckets());
  leader_ = &BuildGauge()
                 .Name("metronome_leader")
                 .Help("1 while this replica plans (the leader, or the only one); 0 on a standby")
                 .Register(r)
                 .Add({});
}

std::vector<MetricFamily> Metrics::Collect() const {
  std::vector<MetricFamily> families = registry_->Collect();
  std::lock_guard lock(collectors_mu_);
  for (const auto& [id, collect] : collectors_) {
    for (auto& f : collect()) families.push_back(std::move(f));
  }
  return families;
}

std::string Metrics::Serialize() const {
  prometheus::TextSerializer s;
  return s.Serialize(Collect());
}

int Metrics::AddCollector(Collector collector) {
  std::lock_guard lock(collectors_mu_);
  collectors_.emplace(next_collector_, std::move(collector));
  return next_collector_++;
}

void Metrics::RemoveCollector(int id) {
  std::lock_guard lock(collectors_mu_);
  collectors_.erase(id);
}

MetricFamily Metrics::Family(const char* name, const char* help, MetricType type) {
  return MetricFamily{name, help, type, {}};
}

void Metrics::AddSample(MetricFamily& family, Labels labels, double value) {
  family.metric.push_back(Sample(std::move(labels), value, family.type));
}

prometheus::Counter& Metrics::Received(const std::string& type) {
  return received_->Add({{"type", type}});
}
prometheus::Counter& Metrics::Sent(const std::string& type) {
  return sent_->Add({{"type", type}});
}
prometheus::Counter& Metrics::Rejected(const std::string& reason) {
  return rejected_->Add({{"reason", reason}});
}
prometheus::Counter& Metrics::SendFailed(const std::string& reason) {
  return send_failed_->Add({{"reason", reason}});
}
prometheus::Counter& Metrics::Registrations(const std::string& kind) {
  return registrations_->Add({{"kind", kind}});
}
prometheus::Counter& Metrics::JobsRemoved(const std::string& reason) {
  return jobs_removed_->Add({{"reason", reason}});
}
prometheus::Counter& Metrics::Replans(const std::string& reason) {
  return replans_->Add({{"reason", reason}});
}
prometheus::Counter& Metrics::ControllerDecisions(const std::string& decision) {
  return decisions_->Add({{"decision", decision}});
}
prometheus::Counter& Metrics::OfflineRuns(const std::string& result) {
  return offline_runs_->Add({{"result", result}});
}
prometheus::Counter& Metrics::TimetablePushes(const std::string& reason) {
  return pushes_->Add({{"reason", reason}});
}
prometheus::Counter& Metrics::TurnEdges(const std::string& outcome) {
  return turn_edges_->Add({{"outcome", outcome}});
}
prometheus::Counter& Metrics::HttpRequests(const std::string& route, int status) {
  return http_requests_->Add({{"route", route}, {"code", std::to_string(status)}});
}
prometheus::Counter& Metrics::HttpRejected(const std::string& route, const std::string& reason) {
  return http_rejected_->Add({{"route", route}, {"reason", reason}});
}
prometheus::Histogram& Metrics::HttpLatency(const std::string& route) {
  return http_latency_->Add({{"route", route}}, LatencyBuckets());
}

double Metrics::CounterTotal(const std::string& family) const {
  double total = 0;
  // Only that family where it is one of ours: every family at once is tens of thousands of
  // series at thousands of links.
  for (const auto* f :
       {received_, sent_, rejected_, send_failed_, registrations_, jobs_removed_, replans_,
        decisions_, offline_runs_, pushes_, http_requests_, http_rejected_}) {
    if (f->GetName() != family) continue;
    for (const auto& mf : f->Collect()) {
      for (const auto& m : mf.metric) total += m.counter.value;
    }
    return total;
  }
  for (const auto& mf : Collect()) {
    if (mf.name != family) continue;
    for (const auto& m : mf.metric) total += m.counter.value;
  }
  return total;
}

}  // namespace metronome::service
