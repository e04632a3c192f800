// Command-line options of metronome-trainer.
#pragma once

#include <optional>
#include <string>

namespace metronome::testbed::trainer {

struct Options {
  // Workload: a model of the table on a GPU type, or explicit figures (which override the model's).
  std::string model;
  std::string gpu = "A100";
  std::string models_file;  // empty: the table's default path
  std::optional<double> compute_ms;
  std::optional<double> gradient_mb;  // MiB
  double compute_scale = 1.0;
  double gradient_scale = 1.0;
  double compute_jitter = 0.0;  // standard deviation of compute time, as a fraction of it
  double first_bucket_mb = 1.0;
  double bucket_mb = 25.0;
  int iterations = 20;
  int warmup = 1;  // iterations left out of the statistics (still run, still in the phase file)

  // Job layout.
  int rank = 0;
  int world_size = 1;
  std::string rendezvous;  // DIR (id file DIR/<job>.ncclid) or HOST:PORT (rank 0 serves the id)
  std::string id_file;     // explicit unique-id file
  int local_ranks = 0;     // > 0: start all ranks of the job on this host
  std::string job = "job";
  std::string device = "auto";  // host, cuda, or auto: host on the stand-in, else cuda
  double rendezvous_timeout_s = 120;
  unsigned seed = 1;

  // Output.
  std::string phases_out;   // JSON lines, one per iteration
  std::string summary_out;  // the JSON summary, also printed as the last line of stdout
  bool quiet = false;       // no per-iteration lines
};

}  // namespace metronome::testbed::trainer
