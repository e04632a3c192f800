#!/usr/bin/python3
"""The soak: the demo's jobs run for about half an hour under Metronome while everything around
them misbehaves, and nothing may leak, crash, hang or slow a job down.

On the namespace testbed (testbed/netns), with the demo's scenario:
  1. the jobs run without a scheduler (the shims observe: each job's ungated pace), 2 minutes;
  2. the jobs run with metronome-scheduler for MINUTES while
     - the scheduler is killed (SIGKILL) and started again every 2 minutes,
     - the management network (shims <-> scheduler) drops 5 % of its packets (nftables; this
       kernel has no netem) from 30 % to 50 % of the run,
     - one node's wall clock steps by +50 ms, -50 ms, -50 ms and +50 ms (at 55, 65, 75 and 85 %;
       testbed/clock_step preloaded into that node's rank), and
     - a hostile peer sends garbage to the scheduler's port at 1 kHz (garbage_peer.py).
Then it checks: every job finished; no scheduler exited by itself; each job's median iteration
in every 2-minute window at most its ungated pace + 5 %; the scheduler's and the ranks' open file
descriptors and resident memory flat (sampled every 5 s). It prints the figures and writes
OUT/results.json. Exit 0 when every check holds.

Usage (root): testbed/soak/soak.py [--minutes 30] [--out out/soak] [--build-dir build/release]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "testbed" / "demo"))
import demo  # noqa: E402

WINDOW_S = 120.0          # scheduler restarts, and the windows a job's pace is judged over
BASELINE_S = 120.0
STEP_NS = 50_000_000
PACE_BOUND = 1.05         # a job's window median against its ungated median
RSS_SLACK_KB = 8 * 1024   # resident memory may wander this much (allocator, page cache of logs)
FD_SLACK = 2
GATE_COUNTERS = re.compile(r"destroyed: job=\S+ rank=\d+ .*?phases=(\d+) gated=(\d+) late=(\d+) "
                           r"failed_open=(\d+) realigned=(\d+)")


def steady_median_ms(phases: list[dict], skip: int = 10) -> float:
    return statistics.median(p["iteration_ms"] for p in phases[skip:])


def proc_sample(pid: int) -> tuple[int, int] | None:
    """(open file descriptors, resident kB) of a live process, else None."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return fds, int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return None


class Chaos(threading.Thread):
    """The disturbances, on a schedule relative to the run's start, and the /proc sampler."""

    def __init__(self, d: demo.Demo, minutes: float, step_file: Path, out: Path):
        super().__init__(daemon=True)
        self.d, self.total = d, minutes * 60.0
        self.step_file, self.out = step_file, out
        self.stop = threading.Event()
        self.events: list[tuple[float, str]] = []
        self.crashes: list[str] = []   # schedulers found exited before their kill
        self.samples: list[dict] = []  # {t, who, pid, incarnation, fds, rss_kb}
        self.incarnation = 0
        self.garbage: subprocess.Popen | None = None
        self.garbage_counts: dict = {}  # what the peer sent, as it printed it at the end
        self.error = ""                 # why the disturbances stopped early
        self.missed: list[str] = []     # disturbances the run ended before

    def log(self, t: float, what: str) -> None:
        self.events.append((round(t, 1), what))
        print(f"soak: t={t:7.1f} s  {what}", flush=True)

    def loss(self, on: bool) -> None:
        """5 % of the packets into and out of the scheduler's namespace dropped at random, both
        ways, by nftables (the kernel of these machines has no netem qdisc)."""
        ns = self.d.cluster.sched_ns
        nft = ["ip", "netns", "exec", ns, "nft"]
        if not on:
            subprocess.run(nft + ["delete", "table", "inet", "metronome_soak"], check=True)
            return
        subprocess.run(nft + ["add", "table", "inet", "metronome_soak"], check=True)
        for chain, hook, dev in (("in", "input", "iifname"), ("out", "output", "oifname")):
            subprocess.run(nft + ["add chain inet metronome_soak " + chain + " { type filter hook "
                                  + hook + " priority 0; }"], check=True)
            subprocess.run(nft + ["add", "rule", "inet", "metronome_soak", chain, dev, "eth0",
                                  "numgen", "random", "mod", "100", "<", "5", "drop"], check=True)

    def run(self) -> None:
        try:
            self.disturb()
        except (Exception, SystemExit) as e:  # (a scheduler that does not start: SystemExit)
            self.error = repr(e)  # the soak fails rather than pass undisturbed
            self.log(-1, f"the disturbances stopped: {self.error}")
        finally:
            if self.garbage is not None and self.garbage.poll() is None:
                self.garbage.send_signal(signal.SIGTERM)
                self.garbage.wait(10)

    def disturb(self) -> None:
        d = self.d
        while d.scheduler_proc is None and not self.stop.is_set():
            time.sleep(0.05)
        t0 = time.monotonic()
        self.garbage = d.cluster.popen(
            d.cluster.sched_ns, ["/usr/bin/python3", str(HERE / "garbage_peer.py"),
                                 f"tcp://{d.cluster.sched_ip}:7411", "1000"],
            stdout=open(self.out / "garbage_peer.json", "w"), stderr=subprocess.STDOUT)
        self.log(0, "garbage peer started: 1,000 messages a second")
        plan = [(self.total * 0.30, "loss on"), (self.total * 0.50, "loss off"),
                (self.total * 0.55, f"clock {+STEP_NS}"), (self.total * 0.65, "clock 0"),
                (self.total * 0.75, f"clock {-STEP_NS}"), (self.total * 0.85, "clock 0")]
        next_restart, next_sample = WINDOW_S, 0.0
        while not self.stop.is_set():
            t = time.monotonic() - t0
            if t >= next_sample:
                next_sample += 5.0
                self.sample(t)
            if plan and t >= plan[0][0]:
                _, what = plan.pop(0)
                if what.startswith("loss"):
                    self.loss(what == "loss on")
                else:
                    self.step_file.write_text(what.split()[1] + "\n")
                self.log(t, what + (" (5 % of the management network's packets dropped)"
                                    if what == "loss on" else ""))
            if t >= next_restart and t < self.total - 30:
                next_restart += WINDOW_S
                status = d.restart_scheduler()
                self.incarnation += 1
                if status is not None:
                    self.crashes.append(f"scheduler exited with {status} before its kill at {t:.0f} s")
                self.log(t, f"scheduler killed and restarted (incarnation {self.incarnation})")
            time.sleep(0.2)
        self.missed = [what for _, what in plan]

    def sample(self, t: float) -> None:
        d = self.d
        procs = [("scheduler", d.scheduler_proc)] + [
            (f"{job}.r{rank}", p) for job, ps in d.job_procs.items() for rank, p in enumerate(ps)]
        for who, p in procs:
            if p is None or p.poll() is not None:
                continue
            s = proc_sample(p.pid)
            if s:
                self.samples.append({"t": round(t, 1), "who": who, "pid": p.pid,
                                     "incarnation": self.incarnation if who == "scheduler" else 0,
                                     "fds": s[0], "rss_kb": s[1]})


def flat(values: list[tuple[int, int]]) -> tuple[bool, str]:
    """Early and late (fds, rss) samples of one process: whether neither grew."""
    early, late = values[: max(1, len(values) // 4)], values[-max(1, len(values) // 4):]
    f0, f1 = max(v[0] for v in early), max(v[0] for v in late)
    r0, r1 = max(v[1] for v in early), max(v[1] for v in late)
    ok = f1 <= f0 + FD_SLACK and r1 <= r0 * 1.10 + RSS_SLACK_KB
    return ok, f"fds {f0} -> {f1}, RSS {r0 / 1024:.1f} -> {r1 / 1024:.1f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--scenario", default=str(REPO / "examples" / "scenarios" / "testbed-small.yaml"))
    ap.add_argument("--build-dir", default=str(REPO / "build" / "release"))
    ap.add_argument("--out", default=str(REPO / "out" / "soak"))
    ap.add_argument("--prefix", default="mtrsoak")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("soak: the namespace testbed needs root")
        return 77
    out = Path(a.out).resolve()
    args = argparse.Namespace(scenario=a.scenario, build_dir=a.build_dir, out=str(out),
                              iterations=None, timeout=a.minutes * 60 + 600, skip_solo=True,
                              prefix=a.prefix, scheduler_config=None)
    d = demo.Demo(args)
    stepper = d._find("testbed/clock_step/libmetronome_clock_step.so")
    step_file = out / "clock-step-ns"
    step_file.write_text("0\n")
    d.cluster.up()
    results: dict = {"minutes": a.minutes, "scenario": os.path.relpath(a.scenario, REPO)}
    try:
        # 1. The ungated pace: every job for about BASELINE_S, shims observing, no scheduler.
        paced = [demo.Job(j.name, j.nodes, max(30, round(j.iterations * BASELINE_S / 30)),
                          j.priority, j.workload, j.arrival_s, j.chunk_kib) for j in d.jobs]
        base = d.run("ungated", paced, "observe", with_scheduler=False)
        ungated = {j.name: steady_median_ms(base.phases[j.name]) for j in paced}
        print("soak: ungated pace " + ", ".join(f"{k} {v:.1f} ms" for k, v in ungated.items()))
        # 2. The soak: iterations for MINUTES at the ungated pace, one node's clock stepped.
        jobs = [demo.Job(j.name, j.nodes, int(a.minutes * 60_000 / ungated[j.name]), j.priority,
                         j.workload, j.arrival_s, j.chunk_kib) for j in d.jobs]
        stepped = jobs[0].nodes[-1]
        d.node_env[stepped] = {"LD_PRELOAD": str(stepper),
                               "METRONOME_CLOCK_STEP_FILE": str(step_file)}
        chaos = Chaos(d, a.minutes, step_file, out)
        chaos.start()
        try:
            run = d.run("soak", jobs, "enforce", with_scheduler=True)  # raises if a job fails
        finally:
            chaos.stop.set()
            chaos.join(30)
        final_exit = d.scheduler_proc.returncode if d.scheduler_proc else None
        text = (out / "garbage_peer.json").read_text().strip().splitlines()
        chaos.garbage_counts = json.loads(text[-1]) if text else {}
    finally:
        d.cluster.down()

    ok = True
    print(f"\nsoak: {a.minutes:.0f} minutes; clock stepped on node {stepped} "
          f"({jobs[0].name}'s last rank); events:")
    for t, what in chaos.events:
        print(f"  {t:7.1f} s  {what}")
    # Every disturbance happened.
    if chaos.error or chaos.missed:
        ok = False
        print(f"FAIL: disturbances: {chaos.error or 'the jobs ended before ' + str(chaos.missed)}")
    # Crashes: a scheduler that exited before its kill, or that did not stop cleanly at the end.
    if chaos.crashes or final_exit not in (0, None):
        ok = False
        print(f"FAIL: scheduler crashes: {chaos.crashes}; last one exited with {final_exit}")
    # Pace: every 2-minute window of every job (median iteration) against its ungated pace.
    results["jobs"] = {}
    for j in jobs:
        phases = run.phases[j.name]
        start = phases[0]["comm_start_ns"] / 1e9
        windows: dict[int, list[float]] = {}
        for p in phases[10:]:
            windows.setdefault(int((p["comm_start_ns"] / 1e9 - start) // WINDOW_S), []).append(
                p["iteration_ms"])
        ratios = {w: statistics.median(v) / ungated[j.name] for w, v in windows.items() if len(v) >= 5}
        worst = max(ratios.values())
        overall = steady_median_ms(phases) / ungated[j.name]
        results["jobs"][j.name] = {"priority": j.priority, "iterations": len(phases),
                                   "ungated_ms": round(ungated[j.name], 1),
                                   "median_ratio": round(overall, 3), "worst_window_ratio": round(worst, 3),
                                   "window_ratios": [round(ratios[w], 3) for w in sorted(ratios)]}
        verdict = "ok" if worst <= PACE_BOUND else "FAIL"
        ok &= worst <= PACE_BOUND
        print(f"{verdict:4} {j.name} ({j.priority}): {len(phases)} iterations, ungated {ungated[j.name]:.1f} ms; "
              f"with Metronome median x{overall:.3f}, worst 2-minute window x{worst:.3f} (bound x{PACE_BOUND})")
    # Leaks: the ranks over the whole run, the scheduler over its incarnations (its last sample
    # in each).
    results["processes"] = {}
    by_who: dict[str, list[dict]] = {}
    for s in chaos.samples:
        by_who.setdefault(s["who"], []).append(s)
    for who, ss in sorted(by_who.items()):
        if who == "scheduler":
            last = {}
            for s in ss:
                last[s["incarnation"]] = (s["fds"], s["rss_kb"])
            values = [last[k] for k in sorted(last)]
        else:
            values = [(s["fds"], s["rss_kb"]) for s in ss if s["t"] >= 60]
        if len(values) < 2:
            continue
        good, text = flat(values)
        ok &= good
        results["processes"][who] = {"flat": good, "summary": text, "samples": len(values)}
        print(f"{'ok' if good else 'FAIL':4} {who}: {text} ({len(values)} samples"
              f"{', one per incarnation' if who == 'scheduler' else ''})")
    # What the gates did (each rank's shim logs its counters when its communicator goes): proof
    # that the jobs were gated through all of it, not left ungated.
    results["gate_counters"] = {}
    for j in jobs:
        for rank in range(len(j.nodes)):
            text = (out / "soak" / f"{j.name}.r{rank}.log").read_text(errors="replace")
            found = GATE_COUNTERS.findall(text)
            if found:
                c = dict(zip(("phases", "gated", "late", "failed_open", "realigned"),
                             map(int, found[-1])))
                results["gate_counters"][f"{j.name}.r{rank}"] = c
                print(f"     {j.name}.r{rank} gate: {c}")
    results["garbage_peer"] = chaos.garbage_counts
    results["events"] = chaos.events
    results["scheduler_incarnations"] = chaos.incarnation + 1
    results["passed"] = ok
    print(f"garbage peer: {chaos.garbage_counts}")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "samples.json").write_text(json.dumps(chaos.samples) + "\n")
    print(f"results: {out / 'results.json'}")
    print("soak: passed" if ok else "soak: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
