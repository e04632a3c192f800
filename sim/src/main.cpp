// metronome-sim: runs a scenario under one or several scheduling policies (docs/simulator.md).
//
//   metronome-sim SCENARIO.yaml [--policy P] [--compare P1,P2,...] [--json] [--links]
//                 [--progress | --no-progress]
// Exit codes: 0 ok, 1 the run failed, 2 bad command line or scenario.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>

#include "metronome/sim/report.hpp"
#include "metronome/sim/scenario.hpp"
#include "metronome/sim/simulator.hpp"

namespace {

using metronome::sim::RunResult;

// A one-line progress bar on stderr, drawn only once a run has taken more than two seconds.
class ProgressBar {
 public:
  ProgressBar(bool enabled, std::string label)
      : enabled_(enabled), label_(std::move(label)), start_(std::chrono::steady_clock::now()) {}
  void operator()(double frac) {
    if (!enabled_) return;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 2.0) return;
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%-24.24s [%s] %5.1f %%  %.0f s", label_.c_str(), bar.c_str(),
                 100.0 * frac, elapsed);
    drawn_ = true;
  }
  void Done() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  bool drawn_ = false;
};

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Run(int argc, char** argv) {
  // The scheduler's code logs its decisions: to stderr, warnings only (stdout is the report).
  spdlog::set_default_logger(spdlog::stderr_color_mt("metronome-sim"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{
      "metronome-sim: fluid simulation of periodic training traffic under scheduling policies"};
  std::string scenario_path;
  std::string policy = "metronome";
  std::string compare;
  bool json = false;
  bool links = false;
  bool progress = false;
  bool no_progress = false;
  bool list = false;
  double max_stretch = 0.0;
  int offline = -1;
  double turn_relay_ms = -1.0;
  std::int64_t seed = -1;
  app.add_option("scenario", scenario_path, "scenario YAML file");
  app.add_option("--policy,-p", policy, "policy to run (see --list-policies)");
  app.add_option("--compare,-c", compare, "comma-separated policies to run side by side");
  app.add_flag("--json", json, "print one JSON object instead of a table");
  app.add_flag("--links", links, "include per-link figures in the JSON");
  app.add_flag("--progress", progress, "draw a progress bar on stderr even when it is not a TTY");
  app.add_flag("--no-progress", no_progress, "never draw a progress bar");
  app.add_flag("--list-policies", list, "print the known policies and exit");
  app.add_option("--max-stretch", max_stretch,
                 "planner option max_stretch for the metronome policies (default: the planner's)")
      ->check(CLI::Range(1.0, 16.0));
  app.add_option("--seed", seed, "override the scenario's seed")->check(CLI::NonNegativeNumber);
  app.add_option("--offline-iterations", offline,
                 "offline search iterations after each plan change (metronome with controller; 0: "
                 "off; default: the policy's)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--turn-relay-ms", turn_relay_ms,
                 "for the metronome policies: how late a job hears of its partner's phase edges "
                 "(default: 2 ms; metronome-no-turns takes no turns)")
      ->check(CLI::Range(0.0, 1000.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (list) {
    for (const auto& p : metronome::sim::PolicyNames()) std::cout << p << "\n";
    return 0;
  }
  if (scenario_path.empty()) {
    std::cerr << "metronome-sim: a scenario file is required (see --help)\n";
    return 2;
  }

  metronome::sim::Scenario scenario;
  std::vector<metronome::sim::PolicyConfig> policies;
  try {
    scenario = metronome::sim::LoadScenario(scenario_path);
    metronome::sim::ValidateScenario(scenario, metronome::sim::DefaultModelLookup());
    if (seed >= 0) scenario.seed = static_cast<std::uint64_t>(seed);
  } catch (const metronome::sim::ScenarioError& e) {
    std::cerr << "metronome-sim: bad scenario: " << e.what() << "\n";
    return 2;
  }
  try {
    for (const auto& name :
         compare.empty() ? std::vector<std::string>{policy} : SplitCommas(compare)) {
      policies.push_back(metronome::sim::PolicyByName(name));
      policies.back().max_stretch = max_stretch;
      if (offline >= 0) policies.back().offline_iterations = offline;
      if (turn_relay_ms >= 0 && policies.back().turn_relay_ms >= 0) {
        policies.back().turn_relay_ms = turn_relay_ms;
      }
    }
  } catch (const std::invalid_argument& e) {
    std::cerr << "metronome-sim: " << e.what() << "\n";
    return 2;
  }

  const bool draw = !no_progress && (progress || isatty(STDERR_FILENO) == 1);
  std::vector<RunResult> runs;
  try {
    for (const auto& p : policies) {
      ProgressBar bar(draw, p.name);
      metronome::sim::RunOptions options;
      options.progress = [&bar](double f) { bar(f); };
      RunResult r = metronome::sim::Simulate(scenario, p, options);
      bar.Done();
      r.scenario = scenario_path;
      runs.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    std::cerr << "metronome-sim: " << e.what() << "\n";
    return 1;
  }

  if (json) {
    const auto out = compare.empty() ? metronome::sim::ToJson(runs.front(), links)
                                     : metronome::sim::CompareJson(runs, links);
    std::cout << out.dump(2) << "\n";
  } else if (compare.empty()) {
    metronome::sim::PrintTable(std::cout, runs.front());
  } else {
    metronome::sim::PrintCompare(std::cout, runs);
  }
  return 0;
}

}  // namespace

// Run's error paths return their exit codes; anything else thrown ends the program here with 1
// (instead of std::terminate).
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metronome-sim: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "metronome-sim: unknown exception\n");
  }
  return 1;
}
