// A stand-alone scheduler for the GPU checks' PyTorch runs (ddp_world1.py --hold): serves one
// timetable (mini_scheduler.hpp) to every job that says hello, for a while.
//
//   gpu_scheduler ENDPOINT PERIOD_US WINDOW_US SLACK_US MAX_WAIT_US SECONDS
//
// Epoch 0, offset 0: window k opens at k * PERIOD in CLOCK_REALTIME, so a script on this host
// knows when the next one opens without asking. Prints the number of hellos at the end.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mini_scheduler.hpp"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(
        stderr, "usage: gpu_scheduler ENDPOINT PERIOD_US WINDOW_US SLACK_US MAX_WAIT_US SECONDS\n");
    return 2;
  }
  const auto us = [&](int i) { return static_cast<int64_t>(std::atoll(argv[i])) * 1000; };
  metronome::Timetable tt{1, 0, us(2), 0, us(3), us(4), us(5)};
  if ((metronome::ValidateTimetable(tt) & metronome::kTimetableRejectMask) != 0) {
    std::fprintf(stderr, "gpu_scheduler: the timetable is not valid\n");
    return 2;
  }
  metronome::gpucheck::MiniScheduler sched(argv[1], tt);
  if (!sched.Start()) return 4;
  std::printf("gpu_scheduler %s period_us=%s window_us=%s slack_us=%s max_wait_us=%s\n", argv[1],
              argv[2], argv[3], argv[4], argv[5]);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(std::atoi(argv[6])));
  sched.Stop();
  std::printf("gpu_scheduler hellos=%d\n", sched.Hellos());
  return 0;
}
