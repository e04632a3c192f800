// The fake API server as a process, for tests that run the scheduler as a process in another
// network namespace (the testbed's standby test): it serves on 127.0.0.1 of the namespace it
// is started in, prints "port N" on one line once it listens, and serves until SIGTERM or
// SIGINT. The token is its first argument ("test-token" without one).
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

#include "fake_apiserver.hpp"

int main(int argc, char** argv) {
  try {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    // Blocked before the server's thread starts, so that only sigwait below receives them.
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    metronome::kube::testing::FakeApiServer api(argc > 1 ? argv[1] : "test-token");
    std::printf("port %d\n", api.Port());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metronome-fake-apiserver: %s\n", e.what());
    return 1;
  }
}
