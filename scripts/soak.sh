#!/usr/bin/env bash
# The soak (about 35 minutes; not part of the test command): the demo's jobs run on the namespace
# testbed for 30 minutes while the scheduler is killed and restarted every 2 minutes, the
# management network drops 5 % of its packets for a while, one node's wall clock steps by
# +/-50 ms and a peer sends garbage to the scheduler at 1 kHz; then it checks that nothing
# crashed or leaked and that no job ran slower than its ungated pace + 5 %
# (testbed/soak/soak.py). Installs what it needs, builds, needs root. Writes out/soak/.
#   scripts/soak.sh [soak.py options]    e.g. --minutes 10
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target metronome-scheduler metronome_shim metronome-trainer \
  metronome_nccl_gloo metronome_clock_step
exec /usr/bin/python3 testbed/soak/soak.py "$@"
