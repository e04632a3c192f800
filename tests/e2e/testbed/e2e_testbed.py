#!/usr/bin/python3
"""End-to-end tests on the namespace testbed (CTest label e2e; needs root).

  interleave        a shorter run of the demo (three-jobs.yaml: three jobs on a shared shaped
                    link), without and with Metronome: with it, their sending on the wire
                    overlaps far less, the high and normal jobs iterate faster (the low one no
                    slower), and the shaped links deliver every flow in order
  scheduler_killed  metronome-scheduler is killed mid-run (two-jobs.yaml): the jobs still
                    finish, at their natural pace after the shims fail open
  standby           two metronome-scheduler replicas with leader election on a Lease in the fake
                    API server (three-jobs.yaml, twice as many iterations): the leader is killed
                    mid-run, the standby takes over within 10 s and plans the jobs into the
                    slots they had, and afterwards no job iterates slower than without Metronome
  lone              one job alone on the bottleneck (lone.yaml), which the planner leaves
                    ungated: under Metronome its shims' gates never hold, call late, fail open
                    or realign a phase (its iteration time with and without is printed)
  oversubscribed    four jobs of unrelated periods that together ask for ~1.4 times the
                    bottleneck (oversubscribed.yaml): with Metronome the high-priority job runs
                    within 5 % of its solo pace (steady iterations), the lower jobs yield to its
                    windows, and the priority-weighted JCT is no worse than without

Usage: e2e_testbed.py interleave|scheduler_killed|standby|lone|oversubscribed BUILD_DIR
Exit code 77 (CTest: skipped) when not root.
"""
import argparse
import dataclasses
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "testbed" / "demo"))
import demo  # noqa: E402

SCENARIOS = {"interleave": HERE / "three-jobs.yaml", "scheduler_killed": HERE / "two-jobs.yaml",
             "standby": HERE / "three-jobs.yaml", "lone": HERE / "lone.yaml",
             "oversubscribed": HERE / "oversubscribed.yaml"}


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


# A scheduler's timetable lines: job, period, offset (ns).
TIMETABLE = re.compile(r"planner: job=(\S+) v\d+ [\w ]+? period=(\d+)ns offset=(\d+)ns")

# Polls a URL from inside a namespace until it answers 200; prints the wall time it did.
POLL_READY = """
import sys, time, urllib.request
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        if urllib.request.urlopen(sys.argv[1], timeout=1).status == 200:
            print(time.time())
            break
    except Exception:
        pass
    time.sleep(0.1)
"""


def wait_ready(d: demo.Demo, port: int, timeout_s: float) -> float | None:
    """When the scheduler on `port` of the scheduler's namespace answered /readyz with 200 (wall
    time), or None if it did not within `timeout_s`."""
    out = d.cluster.popen(d.cluster.sched_ns, ["/usr/bin/python3", "-c", POLL_READY,
                                               f"http://{d.cluster.sched_ip}:{port}/readyz",
                                               str(timeout_s)],
                          stdout=subprocess.PIPE, text=True).communicate()[0].strip()
    return float(out) if out else None


# Seconds from the start of the run's set-up (the API server and the two replicas take 2-3 s
# before the jobs start): the first plans have settled by then.
KILL_AFTER_S = 12.0


def standby(d: demo.Demo) -> bool:
    jobs = [dataclasses.replace(j, iterations=2 * j.iterations) for j in d.jobs]
    without = d.run("without", jobs, "observe", with_scheduler=False)
    fake_api = d.build / "tests/integration/kube/metronome-fake-apiserver"
    procs: dict[str, subprocess.Popen] = {}
    ready: dict[str, float | None] = {}

    def start_replicas(run_dir: Path) -> None:
        # The API server the replicas elect their leader on, in their namespace's loopback.
        procs["api"] = d.cluster.popen(d.cluster.sched_ns, [str(fake_api), "e2e-token"],
                                       stdout=subprocess.PIPE, text=True)
        said = procs["api"].stdout.readline().split()  # "port N"; nothing if it exited
        if len(said) != 2 or said[0] != "port":
            raise SystemExit(f"e2e: {fake_api} did not start (it printed {said})")
        port = int(said[1])
        (run_dir / "token").write_text("e2e-token")
        config = run_dir / "scheduler.yaml"
        config.write_text(f"kubernetes:\n  enabled: true\n  verify_pods: false\n"
                          f"  api_server: http://127.0.0.1:{port}\n  token_file: {run_dir / 'token'}\n")
        # Both serve the shims on the same port, as behind one Service: the standby opens it
        # only when it leads.
        extra = (f"--config={config}", "--leader-elect")
        procs["leader"] = d.start_scheduler(run_dir, log_name="scheduler-a.log", http_port=7412,
                                            extra=extra)
        ready["leader"] = wait_ready(d, 7412, 10.0)
        procs["standby"] = d.start_scheduler(run_dir, log_name="scheduler-b.log", http_port=7413,
                                             extra=extra)

    def kill_leader() -> None:
        ready["killed"] = time.time()
        procs["leader"].kill()
        ready["standby"] = wait_ready(d, 7413, 20.0)

    killer = threading.Timer(KILL_AFTER_S, kill_leader)
    try:
        killer.start()
        run = d.run("with", jobs, "enforce", with_scheduler=False, before_jobs=start_replicas)
    finally:
        killer.cancel()
        killer.join(30)  # a kill under way ends its readiness poll (at most 20 s)
        for name in ("standby", "leader", "api"):
            if name in procs and procs[name].poll() is None:
                procs[name].terminate()
                procs[name].wait(10)
    ok = True
    if ready.get("leader") is None or "killed" not in ready:
        print("FAIL: the first replica should lead until it is killed mid-run")
        return False
    took = ready["standby"] - ready["killed"] if ready.get("standby") else float("nan")
    print(f"the standby answered /readyz {took:.2f} s after the leader was killed")
    if not took <= 10.0:
        print("FAIL: the standby should take over within 10 s")
        ok = False
    # Slots kept: each job's first timetable from the new leader puts its phases where the old
    # leader's last one did: the same period, the same phase in the shared wall clock (to the
    # microsecond: the LinkSchedule status the plan passes through gives milliseconds to three
    # places).
    log_a = (d.out / "with" / "scheduler-a.log").read_text(errors="replace")
    log_b = (d.out / "with" / "scheduler-b.log").read_text(errors="replace")
    last_a = {m[1]: (int(m[2]), int(m[3])) for m in TIMETABLE.finditer(log_a)}
    first_b: dict[str, tuple[int, int]] = {}
    for m in TIMETABLE.finditer(log_b):
        first_b.setdefault(m[1], (int(m[2]), int(m[3])))
    inherited = sum(int(n) for n in re.findall(r"(\d+) job\(s\) planned where the previous "
                                               r"leader ran them", log_b))
    published = re.search(r"the last plan has (\d+) gated job", log_b)
    print(f"new leader: the last plan had {published[1] if published else 'no'} gated job(s), "
          f"{inherited} planned where the previous leader ran them")
    if not published or int(published[1]) == 0 or inherited != int(published[1]):
        print("FAIL: the new leader should read the last plan and plan every gated job from it")
        ok = False
    for j in jobs:
        a, b = last_a.get(j.name), first_b.get(j.name)
        print(f"{j.name}: old leader's last timetable (period, offset) {a}, new leader's first {b}")
        if a is None or b is None or a[0] != b[0] or abs(a[1] % a[0] - b[1] % b[0]) > 1000:
            print(f"FAIL: {j.name} should keep its slot under the new leader")
            ok = False
    # No job slower than without Metronome once the new leader has planned it (3 s after it
    # answered ready). The 3 % covers run-to-run noise of the low job, which the plan pins at
    # half the others' period (interleave: within 2 % failed about one run in eight).
    since = ready.get("standby") or ready["killed"]
    for j in jobs:
        a = steady_ms(without, j.name)
        before = [p["iteration_ms"] for p in run.phases[j.name][10:]
                  if p["comm_start_ns"] / 1e9 < ready["killed"]]
        after = [p["iteration_ms"] for p in run.phases[j.name]
                 if p["comm_start_ns"] / 1e9 > since + 3.0]
        b = statistics.median(after) if after else float("nan")
        print(f"{j.name} ({j.priority}): steady iteration without {a:.1f} ms; with Metronome "
              f"{statistics.median(before) if before else float('nan'):.1f} ms before the kill, "
              f"{b:.1f} ms under the new leader ({len(after)} iterations)")
        if not (len(after) >= 10 and b < 1.03 * a):
            print(f"FAIL: {j.name} should iterate no slower than without Metronome")
            ok = False
    if not ok:
        for label in ("scheduler-a.log", "scheduler-b.log"):
            lines = [ln for ln in (d.out / "with" / label).read_text(errors="replace").splitlines()
                     if "planner:" in ln or "leader election" in ln or "controller:" in ln]
            print(f"{label}:\n  " + "\n  ".join(lines[-40:]))
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


def oversubscribed(d: demo.Demo) -> bool:
    top = next(j for j in d.jobs if j.priority == "high")
    alone_job = demo.Job(top.name, top.nodes, 20, top.priority, top.workload,
                         chunk_kib=top.chunk_kib)
    solo = d.run("solo", [alone_job], "observe", with_scheduler=False)
    without = d.run("without", d.jobs, "observe", with_scheduler=False)
    with_m = d.run("with", d.jobs, "enforce", with_scheduler=True)
    ok = True
    # Steady: past the first 10 iterations (the shims learn ungated, the first plans settle).
    alone, a, b = (steady_ms(r, top.name) for r in (solo, without, with_m))
    print(f"{top.name} ({top.priority}): steady iteration alone {alone:.1f} ms, without "
          f"{a:.1f} ms ({a / alone:.3f} x), with {b:.1f} ms ({b / alone:.3f} x); means over the "
          f"run: without {demo.mean_iter_ms(without.summaries[top.name]):.1f}, with "
          f"{demo.mean_iter_ms(with_m.summaries[top.name]):.1f} ms")
    if not b <= 1.05 * alone:
        print(f"FAIL: {top.name} should run within 5 % of its solo pace with Metronome")
        ok = False
    w = {r.label: demo.weighted_jct(r, d.jobs) for r in (without, with_m)}
    mean = {r.label: statistics.mean(r.summaries[j.name]["completion_s"] for j in d.jobs)
            for r in (without, with_m)}
    print(f"priority-weighted JCT: without {w['without']:.2f} s, with {w['with']:.2f} s; "
          f"mean JCT: without {mean['without']:.2f} s, with {mean['with']:.2f} s")
    if not w["with"] <= w["without"]:
        print("FAIL: the priority-weighted JCT should be no worse with Metronome")
        ok = False
    # What the scheduler counted while the jobs ran: the lower jobs held collectives for the
    # higher windows (a gate that cannot use its yield set holds none).
    status = with_m.scheduler_status or {}
    yields = {j["job"]: j.get("yields", 0) for j in status.get("jobs", [])}
    print(f"collectives held for higher windows, by job (last status while they ran): {yields}")
    if not any(n > 0 for name, n in yields.items() if name != top.name):
        print("FAIL: the lower jobs should yield to the higher windows")
        ok = False
    if not ok:
        print_plan_history(d, "with")
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
        ok = {"interleave": interleave, "scheduler_killed": scheduler_killed, "standby": standby,
              "lone": lone, "oversubscribed": oversubscribed}[which](d)
    finally:
        d.cluster.down()
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
