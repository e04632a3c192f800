// metronome-trainer: a synthetic data-parallel training job on the NCCL API. Each iteration
// sleeps for the model's compute time (it stands for GPU time), then all-reduces the gradient in
// DDP-like buckets. It prints per-iteration times and a JSON summary (last line of stdout), and
// writes each iteration's phase timestamps (CLOCK_REALTIME) as JSON lines with --phases-out.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "launcher.hpp"
#include "options.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace {

int Run(int argc, char** argv) {
  metronome::testbed::trainer::Options o;
  CLI::App app{"metronome-trainer: synthetic data-parallel training job on the NCCL API"};
  app.footer(
      "On CPUs, run it on the Gloo stand-in: LD_LIBRARY_PATH=<build>/testbed/nccl_gloo/lib.\n"
      "Example: metronome-trainer --local-ranks 2 --model resnet50 --gpu V100 --iterations 10");

  auto* workload = app.add_option_group("workload");
  workload->add_option("--model", o.model, "model key of the model table (e.g. resnet50)");
  workload->add_option("--gpu", o.gpu, "GPU key of the model table (A100, V100, T4, RTX3090)")
      ->capture_default_str();
  workload->add_option("--models-file", o.models_file,
                       "model table (default: $METRONOME_MODELS or the source tree's)");
  workload
      ->add_option("--compute-ms", o.compute_ms,
                   "compute time per iteration (overrides the model's)")
      ->check(CLI::NonNegativeNumber);
  workload
      ->add_option("--gradient-mb", o.gradient_mb, "gradient size in MiB (overrides the model's)")
      ->check(CLI::NonNegativeNumber);
  workload->add_option("--compute-scale", o.compute_scale, "factor on the compute time")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  workload->add_option("--gradient-scale", o.gradient_scale, "factor on the gradient size")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  workload
      ->add_option("--compute-jitter", o.compute_jitter,
                   "standard deviation of the compute time, as a fraction of it")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  workload->add_option("--first-bucket-mb", o.first_bucket_mb, "first DDP bucket (MiB)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  workload->add_option("--bucket-mb", o.bucket_mb, "other DDP buckets (MiB)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  workload->add_option("--iterations", o.iterations, "iterations to run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  workload->add_option("--warmup", o.warmup, "iterations left out of the statistics")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  workload->add_option("--seed", o.seed, "seed of the compute jitter")->capture_default_str();

  auto* job = app.add_option_group("job");
  job->add_option("--job", o.job, "job name (in outputs and the id file name)")
      ->capture_default_str();
  job->add_option("--rank", o.rank, "this process's rank")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  job->add_option("--world-size", o.world_size, "number of ranks")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  job->add_option(
      "--rendezvous", o.rendezvous,
      "where rank 0 publishes the NCCL unique id: a directory, or HOST:PORT it listens on");
  job->add_option("--id-file", o.id_file, "file through which rank 0 publishes the NCCL unique id");
  job->add_option("--rendezvous-timeout-s", o.rendezvous_timeout_s, "bound on waiting for the id")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  job->add_option("--local-ranks", o.local_ranks, "start all N ranks of the job on this host")
      ->check(CLI::PositiveNumber);
  job->add_option("--device", o.device,
                  "buffers: host (stand-in), cuda (real NCCL on GPUs), auto (host when the loaded "
                  "libnccl.so.2 is the stand-in)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "host", "cuda"}));

  auto* output = app.add_option_group("output");
  output->add_option("--phases-out", o.phases_out, "per-iteration phase timestamps (JSON lines)");
  output->add_option("--summary-out", o.summary_out, "JSON summary (also the last line of stdout)");
  output->add_flag("--quiet", o.quiet, "no per-iteration lines");

  CLI11_PARSE(app, argc, argv);

  if (o.rank >= o.world_size) {
    std::cerr << "metronome-trainer: --rank " << o.rank << " must be < --world-size "
              << o.world_size << std::endl;
    return 2;
  }
  metronome::testbed::trainer::Workload w;
  try {
    w = metronome::testbed::trainer::MakeWorkload(o);
  } catch (const metronome::testbed::trainer::UsageError& e) {
    std::cerr << "metronome-trainer: " << e.what() << std::endl;
    return 2;
  }
  if (o.local_ranks > 0) return metronome::testbed::trainer::LaunchLocalRanks(o, argc, argv);
  if (o.world_size > 1 && o.rendezvous.empty() && o.id_file.empty()) {
    std::cerr
        << "metronome-trainer: with --world-size > 1 give --rendezvous DIR|HOST:PORT or --id-file"
        << std::endl;
    return 2;
  }
  return metronome::testbed::trainer::RunRank(o, w);
}

}  // namespace

// Run's error paths return their exit codes; anything else thrown ends the program here with 1
// (instead of std::terminate).
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metronome-trainer: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "metronome-trainer: unknown exception\n");
  }
  return 1;
}
