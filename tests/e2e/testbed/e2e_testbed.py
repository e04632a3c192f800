#!/usr/bin/python3
"""End-to-end tests on the namespace testbed (CTest label e2e; needs root).

  interleave        a shorter run of the demo (three-jobs.yaml: three jobs on a shared shaped
                    link), without and with Metronome: with it, their sending on the wire
                    overlaps far less, the high and normal jobs iterate faster (the low one no
                    slower), and the shaped links deliver every flow in order
  scheduler_killed  metronome-scheduler is killed mid-run (two-jobs.yaml): the jobs still
                    finish, at their natural pace after the shims fail open
  lone              one job alone on the bottleneck (lone.yaml), which the planner leaves
                    ungated: under Metronome its shims' gates never hold, call late, fail open
                    or realign a phase (its iteration time with and without is printed)

Usage: e2e_testbed.py interleave|scheduler_killed|lone BUILD_DIR
Exit code 77 (CTest: skipped) when not root.
"""
import argparse
import os
import re
import statistics
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "testbed" / "demo"))
import demo  # noqa: E402

SCENARIOS = {"interleave": HERE / "three-jobs.yaml", "scheduler_killed": HERE / "two-jobs.yaml",
             "lone": HERE / "lone.yaml"}


def steady_ms(run: demo.RunResult, job: str, skip: int = 10) -> float:
    """Median iteration time after the first `skip` iterations (learning, first plan)."""
    times = [p["iteration_ms"] for p in run.phases[job][skip:]]
    return statistics.median(times)


def make_demo(scenario: Path, build: str, out: str) -> demo.Demo:
    args = argparse.Namespace(scenario=str(scenario), build_dir=build, out=out, iterations=None,
                              timeout=300, skip_solo=True, prefix=f"mtre{os.getpid() % 10000}",
                              scheduler_config=None)
    return demo.Demo(args)


def interleave(d: demo.Demo) -> bool:
    without = d.run("without", d.jobs, "observe", with_scheduler=False)
    with_m = d.run("with", d.jobs, "enforce", with_scheduler=True)
    ok = True
    # Past the first 5 s: the shims learn the rhythm ungated and the first plans settle there.
    # Measured on the wire (each job's sending NIC, sampled every 10 ms), past the first 5 s:
    # the shims learn the rhythm ungated and the first plans settle there.
    ov_without = demo.wire_overlap(without, after_s=5.0)
    ov_with = demo.wire_overlap(with_m, after_s=5.0)
    print(f"wire overlap after 5 s: without {ov_without:.3f}, with {ov_with:.3f} "
          f"(whole runs: {demo.wire_overlap(without):.3f}, {demo.wire_overlap(with_m):.3f})")
    # Measured so far (see the issue note): with/without between 0.03 and 0.6 from run to run on
    # this shared 2-core machine; the bound leaves room for that noise.
    if not ov_with < 0.75 * ov_without:
        print("FAIL: with Metronome the jobs should share the wire far less (< 0.75 x)")
        ok = False
    # Iteration times (median past the first 10 iterations: learning, first plan): the high and
    # normal jobs faster with Metronome; the low-priority job, which absorbs the waiting, no
    # slower than without it beyond the run-to-run noise. Its plan may stretch it to a harmonic
    # of the others' period (2 x 249.5 = 498.9 ms here), which pins its pace with Metronome at
    # 249.0-250.8 ms, while without it read 243.5-262.4 ms from run to run (this test and the
    # demo, 2026-12-05): a CI run failed a strict "faster" on 244.9 against 244.2.
    for j in d.jobs:
        a, b = steady_ms(without, j.name), steady_ms(with_m, j.name)
        print(f"{j.name} ({j.priority}): steady iteration without {a:.1f} ms, with {b:.1f} ms")
        if j.priority != "low" and not b < a:
            print(f"FAIL: {j.name} should iterate faster with Metronome")
            ok = False
        if j.priority == "low" and not b < 1.02 * a:
            print(f"FAIL: {j.name} should iterate no slower with Metronome (within 2 %)")
            ok = False
    # The shaped links deliver each flow in order, as a real fabric does: reordering (and the
    # PAWS drops it causes) stretches phases for reasons that have nothing to do with link
    # sharing. (Segments after a lost one also arrive out of order; that is not counted here.)
    # Without flow steering a run had thousands; with the ACK priority 0-2 PAWS drops per run
    # remain (docs/testbed.md), which the bound lets through.
    for r in (without, with_m):
        reordered = sum(v["TCPSACKReorder"] + v["PAWSEstab"] for v in r.tcp.values())
        print(f"{r.label}: reorderings detected or segments dropped by PAWS: {reordered}")
        if reordered > 10:
            print("FAIL: the testbed's links reordered segments")
            ok = False
    # The links send pure ACKs ahead of data (docs/testbed.md): the filters must match them.
    for name, ((ns, dev), _cap) in d.links.items():
        acks = d.cluster.acks_first_packets(ns, dev)
        print(f"{name}: pure ACKs sent first: {acks}")
        if d.cluster.acks_first_enabled() and not acks:
            print(f"FAIL: {name} sent no pure ACK ahead of data")
            ok = False
    jct = {r.label: statistics.mean(r.summaries[j.name]["completion_s"] for j in d.jobs)
           for r in (without, with_m)}
    print(f"mean completion time: without {jct['without']:.2f} s, with {jct['with']:.2f} s")
    if not ok:
        print_plan_history(d, "with")
    return ok


def print_plan_history(d: demo.Demo, label: str) -> None:
    """The scheduler's timetables and controller decisions of a run, to read a failure by."""
    log = (d.out / label / "scheduler.log").read_text(errors="replace")
    lines = [ln for ln in log.splitlines() if " planner: job=" in ln or " controller: job=" in ln]
    print(f"{label}: the scheduler's {len(lines)} timetable and decision lines:")
    for ln in lines[-60:]:
        print(f"  {ln}")


def scheduler_killed(d: demo.Demo) -> bool:
    # Each job's solo pace first: the natural pace to compare against.
    natural = {}
    for j in d.jobs:
        alone = demo.Job(j.name, j.nodes, 15, j.priority, j.workload)
        natural[j.name] = steady_ms(d.run(f"solo-{j.name}", [alone], "observe", False), j.name, 3)
    # Then both jobs with Metronome; kill the scheduler a few seconds in.
    killer = threading.Timer(8.0, lambda: d.scheduler_proc and d.scheduler_proc.kill())
    killer.start()
    run = d.run("killed", d.jobs, "enforce", with_scheduler=True)
    killer.cancel()
    kill_t = run.t0 + 8.0
    ok = True
    for j in d.jobs:
        after = [p["iteration_ms"] for p in run.phases[j.name] if p["comm_start_ns"] / 1e9 > kill_t + 3.0]
        pace = statistics.median(after) if after else float("nan")
        print(f"{j.name}: finished; median iteration after the kill {pace:.1f} ms "
              f"(solo {natural[j.name]:.1f} ms, {len(after)} iterations)")
        # Two jobs share the link after the kill (ungated): allow what contention costs, but no
        # hold beyond it (a stuck gate would add a whole period or max_wait).
        if not (after and pace < 1.35 * natural[j.name]):
            print(f"FAIL: {j.name} should run at its natural pace once the scheduler is gone")
            ok = False
    return ok


# The shim's last word on each communicator (runtime.cpp, at destroy): its gate counters.
GATE_COUNTERS = re.compile(r"communicator \S+ \w+: job=(\S+) rank=(\d+) .*?gated=(\d+) "
                           r"late=(\d+) failed_open=(\d+) realigned=(\d+)")


def gate_counters(d: demo.Demo, label: str, job: demo.Job) -> list[dict[str, int]]:
    """Every rank's gate counters from its shim log (one entry per communicator destroyed)."""
    found = []
    for rank in range(len(job.nodes)):
        log = (d.out / label / f"{job.name}.r{rank}.log").read_text(errors="replace")
        for m in GATE_COUNTERS.finditer(log):
            found.append({"rank": int(m[2]), "gated": int(m[3]), "late": int(m[4]),
                          "failed_open": int(m[5]), "realigned": int(m[6])})
    return found


def lone(d: demo.Demo) -> bool:
    (job,) = d.jobs
    without = d.run("without", d.jobs, "observe", with_scheduler=False)
    with_m = d.run("with", d.jobs, "enforce", with_scheduler=True)
    ok = True
    a, b = steady_ms(without, job.name), steady_ms(with_m, job.name)
    mean_a = statistics.mean(p["iteration_ms"] for p in without.phases[job.name][10:])
    mean_b = statistics.mean(p["iteration_ms"] for p in with_m.phases[job.name][10:])
    print(f"{job.name}: steady iteration without {a:.1f} ms (mean {mean_a:.1f}), "
          f"with {b:.1f} ms (mean {mean_b:.1f}): {b / a:.4f} x")
    # What Metronome could add to an ungated job is its gate's holding, and the gate counters
    # below say it held nothing. The ratio itself is printed, not asserted: two runs of the same
    # job differ by more than any bound worth asserting on a shared 2-core machine (0.957-1.065 x
    # over the recorded runs, gate counters all 0), so a timed bound here fails on noise, not on
    # Metronome. The run-to-run figures live in the evaluation report (the demo's solo runs).
    # Every timetable the scheduler made for it (its log: the job has left the status API by the
    # time the run ends) says "not gated".
    log = (d.out / "with" / "scheduler.log").read_text(errors="replace")
    plans = re.findall(rf"planner: job={job.name} v\d+ ([\w -]+?) period=(\d+)ns offset=\d+ns "
                       r"window=(\d+)ns", log)
    print(f"scheduler: {len(plans)} timetable(s) for {job.name}: {sorted(set(p[0] for p in plans))}")
    if not plans or any(state != "not gated" or period != window for state, period, window in plans):
        print("FAIL: the scheduler should plan the lone job ungated (window = period, no gate)")
        ok = False
    counters = gate_counters(d, "with", job)
    print(f"shim gate counters: {counters}")
    if len(counters) < len(job.nodes):
        print("FAIL: every rank's shim should report its gate counters")
        ok = False
    for c in counters:
        if any(c[k] for k in ("gated", "late", "failed_open", "realigned")):
            print(f"FAIL: rank {c['rank']}'s gate acted on an always-open timetable")
            ok = False
    return ok


def main() -> int:
    if os.geteuid() != 0:
        print("SKIP: the namespace testbed needs root")
        return 77
    which, build = sys.argv[1], sys.argv[2]
    out = Path(build) / "e2e" / which
    d = make_demo(SCENARIOS[which], build, str(out))
    d.cluster.up()
    try:
        ok = {"interleave": interleave, "scheduler_killed": scheduler_killed, "lone": lone}[which](d)
    finally:
        d.cluster.down()
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
