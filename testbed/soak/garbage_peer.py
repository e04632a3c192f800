#!/usr/bin/python3
"""A hostile peer for the soak: sends garbage to metronome-scheduler's shim port.

At RATE messages a second over a ZeroMQ DEALER: random bytes, and protocol messages (hello,
report, bye) with random bytes flipped, truncated or appended; the scheduler's answers are read
and counted. Once a second a raw TCP connection writes random bytes (no ZMTP greeting at all)
and closes. Runs until SIGTERM, then prints its counts as one JSON line.

Usage: garbage_peer.py ENDPOINT RATE     (ENDPOINT e.g. tcp://198.19.255.1:7411)
"""
import json
import random
import signal
import socket
import sys
import time

import msgpack
import zmq

BASES = [
    msgpack.packb([1, 1, ["garbage-job", "nowhere", 0, 1, 1, 1, 22809, "0.1.0"]]),
    msgpack.packb([1, 5, ["garbage-job", 0, 10, 200_000_000, 50_000_000, 1 << 20, 4, 0.9, 0, 100,
                          1, 0, 0, 0, [1, 2, 3]]]),
    msgpack.packb([1, 7, ["garbage-job", 0, "bye"]]),
]


def mutated(rng: random.Random) -> bytes:
    if rng.random() < 0.3:
        return rng.randbytes(rng.randint(0, 300))
    b = bytearray(rng.choice(BASES))
    for _ in range(rng.randint(1, 4)):
        what = rng.random()
        if what < 0.6 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif what < 0.8 and b:
            del b[rng.randrange(len(b)):]
        else:
            b += rng.randbytes(rng.randint(1, 16))
    return bytes(b)


def main() -> int:
    endpoint, rate = sys.argv[1], float(sys.argv[2])
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    rng = random.Random(1)
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.SNDHWM, 1000)
    s.connect(endpoint)
    counts = {"sent": 0, "not_sent": 0, "answers": 0, "raw_connections": 0, "raw_refused": 0}
    stop = False

    def on_term(*_):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    period = 1.0 / rate
    next_send = time.monotonic()
    next_raw = next_send
    while not stop:
        now = time.monotonic()
        if now < next_send:
            time.sleep(next_send - now)
            continue
        next_send = max(next_send + period, now - 1.0)  # no catch-up burst after a stall
        try:
            s.send(mutated(rng), zmq.NOBLOCK)
            counts["sent"] += 1
        except zmq.Again:  # the scheduler is restarting: the queue is full
            counts["not_sent"] += 1
        while True:
            try:
                s.recv(zmq.NOBLOCK)
                counts["answers"] += 1
            except zmq.Again:
                break
        if now >= next_raw:
            next_raw = now + 1.0
            try:
                with socket.create_connection((host, int(port)), timeout=0.5) as raw:
                    raw.sendall(rng.randbytes(rng.randint(1, 200)))
                counts["raw_connections"] += 1
            except OSError:
                counts["raw_refused"] += 1
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
