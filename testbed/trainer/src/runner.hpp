// One rank of a job: initialize NCCL, run the iterations (compute, then the gradient buckets'
// all-reduces), write the phase file and the summary.
#pragma once

#include "options.hpp"
#include "workload.hpp"

namespace metronome::testbed::trainer {

// Returns the process exit code (0, or 1 after printing why).
int RunRank(const Options& options, const Workload& workload);

}  // namespace metronome::testbed::trainer
