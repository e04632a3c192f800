// --local-ranks N: starts all N ranks of a job on this host (this program, once per rank, with
// --rank/--world-size and a fresh rendezvous directory), waits for them, stops the rest when one
// fails, and merges their phase files into the one asked for.
#pragma once

#include "options.hpp"

namespace metronome::testbed::trainer {

// Returns the exit code: 0 when every rank succeeded, else the first failure's.
int LaunchLocalRanks(const Options& options, int argc, char** argv);

}  // namespace metronome::testbed::trainer
