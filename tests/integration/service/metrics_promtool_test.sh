#!/usr/bin/env bash
# /metrics as Prometheus reads it: `promtool check metrics` (Debian's prometheus package) on the
# scheduler's exposition while service_load_driver's clients report, and jobs join and leave,
# and once more after they are gone. Exit 77 (CTest: skipped) without promtool.
#   metrics_promtool_test.sh SCHEDULER LOAD_DRIVER
set -euo pipefail
scheduler=$1
driver=$2
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIP: promtool not found (scripts/setup.sh installs Debian's prometheus package)"
  exit 77
fi
py=/usr/bin/python3
free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
fetch() {
  "$py" -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}

zmq_port=$(free_port)
http_port=$(free_port)
metrics=http://127.0.0.1:$http_port/metrics
tmp=$(mktemp -d)
spid=
cleanup() {
  [[ -n $spid ]] && kill "$spid" 2>/dev/null
  wait
  rm -rf "$tmp"
}
trap cleanup EXIT

"$scheduler" --listen "tcp://127.0.0.1:$zmq_port" --http "127.0.0.1:$http_port" \
  --log-level warn > "$tmp/scheduler.log" 2>&1 &
spid=$!
for _ in $(seq 100); do
  fetch "$metrics" > /dev/null 2>&1 && break
  sleep 0.1
done

# 200 clients (50 jobs of 4 ranks), 10 reports a second each, 10 jobs replaced a second.
"$driver" --endpoint "tcp://127.0.0.1:$zmq_port" --http "127.0.0.1:$http_port" --clients 200 \
  --rate 10 --duration 5 --threads 2 --churn 10 > "$tmp/driver.txt" 2>&1 &
dpid=$!

status=0
check() {  # $1: a label for the sample
  local file=$tmp/$1.txt
  fetch "$metrics" > "$file"
  local series
  series=$(grep -vc '^#' "$file" || true)
  if promtool check metrics < "$file"; then
    echo "$1: promtool check metrics: ok ($series samples)"
  else
    echo "FAIL: $1: promtool check metrics found the problems above"
    status=1
  fi
}
for i in 1 2 3 4; do
  sleep 1
  check "under-load-$i"
done
if ! wait "$dpid"; then
  echo "FAIL: service_load_driver failed:"
  cat "$tmp/driver.txt"
  status=1
fi
check after-load
# The samples under load must have carried per-job series, or the check saw an idle scheduler.
if ! grep -q 'job="' "$tmp/under-load-4.txt"; then
  echo "FAIL: no per-job series in /metrics under load"
  status=1
fi
((status == 0)) && echo "1 passed, 0 failed"
exit "$status"
