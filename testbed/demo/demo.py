#!/usr/bin/python3
"""Metronome's CPU demo: real collective traffic over real shaped links, without and with Metronome.

It builds the scenario's cluster in network namespaces (testbed/netns/cluster.py), starts each
job's ranks as metronome-trainer processes in their nodes' namespaces over the Gloo stand-in
(`libnccl.so.2` for CPUs) with libmetronome.so preloaded, and runs the jobs twice:

  without  the shim in `observe` mode: it learns and reports, never gates (stock behaviour)
  with     metronome-scheduler plans the slots, the shims gate (`enforce`)

Each job also runs alone once, for its solo iteration time. It prints a side-by-side table (per
job: mean iteration time, slowdown against solo, completion time; per bottleneck link: average
utilization from the kernel's counters; the share of time two jobs' communication overlapped)
and writes a timeline picture of the bottleneck link for both runs, plus results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "testbed" / "netns"))
import cluster as netns  # noqa: E402

PRIORITY_NAMES = {"high": "high", "normal": "normal", "low": "low"}


@dataclass
class Job:
    name: str
    nodes: list[str]  # one entry per rank
    iterations: int
    priority: str
    workload: list[str]  # trainer flags describing the workload
    arrival_s: float = 0.0
    chunk_kib: int = 0  # the shim's METRONOME_CHUNK_KIB on every rank (0: not split)


@dataclass
class RunResult:
    label: str
    summaries: dict[str, dict] = field(default_factory=dict)  # job -> rank 0's JSON summary
    phases: dict[str, list[dict]] = field(default_factory=dict)  # job -> rank 0's phase records
    link_util: dict[str, float] = field(default_factory=dict)
    link_series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    t0: float = 0.0
    t1: float = 0.0
    scheduler_status: dict | None = None
    sampler: "netns.LinkSampler | None" = None
    senders: list[str] = field(default_factory=list)
    threshold_bps: float = 0.0
    drops: dict[str, int] = field(default_factory=dict)  # bottleneck link -> shaper drops
    tcp: dict[str, dict[str, int]] = field(default_factory=dict)  # job -> its nodes' TCP counters


def load_jobs(doc: dict, topo: netns.Topology, iterations: int | None) -> list[Job]:
    jobs = []
    for i, j in enumerate(doc.get("jobs") or []):
        where = f"jobs[{i}]"
        if "name" not in j:
            raise SystemExit(f"demo: {where}: needs a name")
        nodes = j.get("nodes")
        if not nodes:
            raise SystemExit(f"demo: {where}: the testbed needs pinned nodes (nodes: [...])")
        for n in nodes:
            topo.node(n)  # raises on an unknown node
        ranks = int(j.get("gpus", len(nodes)))
        placed = [nodes[r * len(nodes) // ranks] for r in range(ranks)]
        if "compute_ms" in j and "gradient_mb" in j:
            workload = [f"--compute-ms={j['compute_ms']}", f"--gradient-mb={j['gradient_mb']}"]
        elif "model" in j:
            gpu = topo.node(nodes[0]).gpu or "A100"
            workload = [f"--model={j['model']}", f"--gpu={gpu}"]
        else:
            raise SystemExit(f"demo: {where}: give model, or compute_ms and gradient_mb")
        for flag in ("bucket_mb", "first_bucket_mb", "compute_jitter"):
            if flag in j:
                workload.append(f"--{flag.replace('_', '-')}={j[flag]}")
        prio = j.get("priority", "normal")
        prio = PRIORITY_NAMES.get(str(prio), str(prio))
        jobs.append(Job(str(j["name"]), placed, int(iterations or j.get("iterations", 40)), prio,
                        workload, float(j.get("arrival_s", 0)), int(j.get("chunk_kib", 0))))
    if not jobs:
        raise SystemExit("demo: the scenario has no jobs")
    return jobs


class Demo:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        doc = yaml.safe_load(open(args.scenario))
        self.topo = netns.Topology.from_dict(doc)
        self.jobs = load_jobs(doc, self.topo, args.iterations)
        self.build = Path(args.build_dir).resolve()
        self.out = Path(args.out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.trainer = self._find("testbed/trainer/metronome-trainer")
        self.scheduler_bin = self._find("scheduler/service/metronome-scheduler")
        self.shim = self._find("shim/libmetronome.so")
        self.standin_dir = self._find("testbed/nccl_gloo/lib/libnccl.so.2").parent
        self.cluster = netns.Cluster(self.topo, prefix=args.prefix)
        self.scheduler_proc: subprocess.Popen | None = None
        self.run_dir: Path | None = None  # of the run in progress
        # The running ranks by job, and extra environment by node (the soak's clock stepper: an
        # LD_PRELOAD there goes in front of the shim's).
        self.job_procs: dict[str, list[subprocess.Popen]] = {}
        self.node_env: dict[str, dict[str, str]] = {}
        self.topology_file = self.out / "topology.yaml"
        self.topology_file.write_text(yaml.safe_dump({"topology": doc["topology"]}))
        # Bottleneck links: the uplinks of racks that some job's traffic leaves.
        racks_used = {}
        for j in self.jobs:
            racks = {self.topo.node(n).rack for n in j.nodes}
            if len(racks) > 1:
                for r in racks:
                    racks_used[r] = True
        self.links = {}
        for r in self.topo.racks:
            if r.name in racks_used:
                self.links[f"{r.name}-up"] = (self.cluster.rack_uplink(r.name), r.uplink_bps)
                self.links[f"{r.name}-down"] = (self.cluster.rack_downlink(r.name), r.uplink_bps)

    def _find(self, rel: str) -> Path:
        p = self.build / rel
        if not p.exists():
            raise SystemExit(f"demo: {p} is missing: build first (cmake --build --preset release)")
        return p

    # -- processes -----------------------------------------------------------------------------
    def _env(self, job: Job, node: str, mode: str) -> dict[str, str]:
        n = self.topo.node(node)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LD_LIBRARY_PATH": str(self.standin_dir),
            "METRONOME_STANDIN_IFACE_ADDR": n.data_ip,
            "METRONOME_JOB": job.name,
            "METRONOME_PRIORITY": job.priority,
            "NODE_NAME": node,
            "METRONOME_LOG": os.environ.get("METRONOME_LOG", "info"),
        }
        if mode != "none":
            env["LD_PRELOAD"] = str(self.shim)
            env["METRONOME_MODE"] = mode
            env["METRONOME_SCHEDULER"] = f"tcp://{self.cluster.sched_ip}:7411"
            if job.chunk_kib:
                env["METRONOME_CHUNK_KIB"] = str(job.chunk_kib)
        for k, v in self.node_env.get(node, {}).items():
            env[k] = f"{v} {env[k]}" if k == "LD_PRELOAD" and k in env else v
        return env

    def _start_job(self, job: Job, mode: str, run_dir: Path, rdv: Path) -> list[subprocess.Popen]:
        procs = []
        for rank, node in enumerate(job.nodes):
            argv = [str(self.trainer), f"--job={job.name}", f"--rank={rank}",
                    f"--world-size={len(job.nodes)}", f"--rendezvous={rdv}",
                    f"--iterations={job.iterations}", "--warmup=5", "--quiet",
                    f"--phases-out={run_dir / f'{job.name}.r{rank}.phases.jsonl'}",
                    f"--summary-out={run_dir / f'{job.name}.r{rank}.summary.json'}", *job.workload]
            log = open(run_dir / f"{job.name}.r{rank}.log", "w")
            env = self._env(job, node, mode)
            # The shims' node segments (docs/shim.md, node sharing) beside the run's rendezvous
            # files rather than in the host's /dev/shm.
            env["METRONOME_SHARE_DIR"] = str(rdv)
            procs.append(self.cluster.popen(node, argv, env=env, stdout=log,
                                            stderr=subprocess.STDOUT))
        return procs

    def start_scheduler(self, run_dir: Path, append: bool = False, log_name: str = "scheduler.log",
                        http_port: int = 7412, extra: tuple[str, ...] = ()) -> subprocess.Popen:
        """A scheduler in the scheduler's namespace, serving the shims on port 7411 and its HTTP
        API on `http_port` (two replicas there need two), with `extra` arguments."""
        log = open(run_dir / log_name, "a" if append else "w")
        argv = [str(self.scheduler_bin), f"--listen=tcp://{self.cluster.sched_ip}:7411",
                f"--http={self.cluster.sched_ip}:{http_port}", f"--topology={self.topology_file}",
                *extra]
        if self.args.scheduler_config:
            argv.append(f"--config={Path(self.args.scheduler_config).resolve()}")
        p = self.cluster.popen(self.cluster.sched_ns, argv, stdout=log, stderr=subprocess.STDOUT)
        time.sleep(1.0)
        if p.poll() is not None:
            raise SystemExit(f"demo: metronome-scheduler exited: see {run_dir / log_name}")
        return p

    def restart_scheduler(self) -> int | None:
        """Kills the running scheduler (SIGKILL) and starts another, logging on in the same file.
        Returns the killed one's exit status before the kill: None when it was still running."""
        old, status = self.scheduler_proc, None
        if old is not None:
            status = old.poll()
            if status is None:
                old.kill()
                old.wait()
        self.scheduler_proc = self.start_scheduler(self.run_dir, append=True)
        return status

    def _scheduler_status(self) -> dict | None:
        p = subprocess.run(["ip", "netns", "exec", self.cluster.sched_ns, "/usr/bin/python3", "-c",
                            "import urllib.request,sys;sys.stdout.write(urllib.request.urlopen("
                            f"'http://{self.cluster.sched_ip}:7412/api/v1/jobs',timeout=3).read().decode())"],
                           capture_output=True, text=True)
        try:
            return json.loads(p.stdout) if p.returncode == 0 else None
        except json.JSONDecodeError:
            return None

    def run(self, label: str, jobs: list[Job], mode: str, with_scheduler: bool,
            before_jobs: Callable[[Path], None] | None = None) -> RunResult:
        """One run of `jobs`. `before_jobs(run_dir)` runs once the run's directory is ready and
        before any job starts (a test starting schedulers of its own there)."""
        run_dir = self.out / label
        run_dir.mkdir(parents=True, exist_ok=True)
        for f in run_dir.glob("*"):
            f.unlink()
        rdv = Path(tempfile.mkdtemp(prefix="mtr-rdv-"))
        res = RunResult(label)
        # Bottleneck links, and each job's sending rank-0 NIC (who is on the wire when).
        counters = {k: v[0] for k, v in self.links.items()}
        for j in jobs:
            counters[f"tx:{j.name}"] = (self.cluster.node_ns(j.nodes[0]), "eth0")
        sampler = netns.LinkSampler(self.cluster, counters, 0.01).start()
        res.sampler = sampler
        res.senders = [f"tx:{j.name}" for j in jobs]
        res.threshold_bps = 0.1 * min((cap for _, cap in self.links.values()), default=1e8)
        # Losses at the shapers and TCP retransmissions: a lost tail segment stalls a phase for a
        # retransmission timeout (≥ 200 ms), which shows as a slow iteration.
        node_ns = {j.name: sorted({self.cluster.node_ns(n) for n in j.nodes}) for j in jobs}
        drops0 = {k: self.cluster.qdisc_drops(*v[0]) for k, v in self.links.items()}
        tcp0 = {j: self._tcp(nss) for j, nss in node_ns.items()}
        self.run_dir = run_dir
        # Tests kill it mid-run (by this pid, never by name), the soak restarts it.
        self.scheduler_proc = self.start_scheduler(run_dir) if with_scheduler else None
        if before_jobs is not None:
            before_jobs(run_dir)
        res.t0 = time.time()
        procs: dict[str, list[subprocess.Popen]] = {}
        self.job_procs = procs
        pending = sorted(jobs, key=lambda j: j.arrival_s)
        deadline = res.t0 + self.args.timeout
        # The scheduler's view of the jobs (yields, waits, decisions), taken while they still run:
        # a job leaves its status when its ranks say goodbye. The last snapshot that had jobs.
        next_status = res.t0 + 5.0
        try:
            while pending or any(p.poll() is None for ps in procs.values() for p in ps):
                now = time.time()
                while pending and now - res.t0 >= pending[0].arrival_s:
                    j = pending.pop(0)
                    procs[j.name] = self._start_job(j, mode, run_dir, rdv)
                if now > deadline:
                    raise SystemExit(f"demo: run '{label}' exceeded {self.args.timeout} s")
                if with_scheduler and now >= next_status:
                    next_status = now + 5.0
                    status = self._scheduler_status()
                    if status and status.get("jobs"):
                        res.scheduler_status = status
                time.sleep(0.1)
        finally:
            res.t1 = time.time()
            sampler.stop()
            for ps in procs.values():
                for p in ps:
                    if p.poll() is None:
                        p.kill()
            sched = self.scheduler_proc
            if sched is not None and sched.poll() is None:
                sched.terminate()
                try:
                    sched.wait(5)
                except subprocess.TimeoutExpired:
                    sched.kill()
        for j in jobs:
            rcs = [p.returncode for p in procs.get(j.name, [])]
            if any(rc != 0 for rc in rcs):
                raise SystemExit(f"demo: job {j.name} failed in run '{label}' (exit codes {rcs}); "
                                 f"logs in {run_dir}")
            res.summaries[j.name] = json.loads((run_dir / f"{j.name}.r0.summary.json").read_text())
            res.phases[j.name] = [json.loads(line) for line in
                                  (run_dir / f"{j.name}.r0.phases.jsonl").read_text().splitlines() if line]
        for name, ((_ns_dev), cap) in self.links.items():
            res.link_util[name] = sampler.utilization(name, cap, res.t0, res.t1)
            res.link_series[name] = sampler.series(name)
            res.drops[name] = self.cluster.qdisc_drops(*self.links[name][0]) - drops0[name]
        for j, nss in node_ns.items():
            res.tcp[j] = {k: v - tcp0[j][k] for k, v in self._tcp(nss).items()}
        self._write_net_diagnostics(run_dir / "net-diagnostics.txt")
        with open(run_dir / "link-samples.csv", "w") as f:  # the raw counters behind the figures
            keys = list(counters)
            f.write("time_s," + ",".join(f"{k}_tx_bytes" for k in keys) + "\n")
            for t, c in sampler.samples:
                f.write(f"{t:.6f}," + ",".join(str(c[k]) for k in keys) + "\n")
        return res

    def _write_net_diagnostics(self, path: Path) -> None:
        """Every namespace's qdisc statistics and its non-zero TCP counters (cumulative since the
        cluster was built): where packets were dropped or queued, and how TCP recovered."""
        with open(path, "w") as f:
            for ns in self.cluster.namespaces:
                f.write(f"== {ns}\n")
                f.write(netns.run("ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show",
                                  check=False).stdout)
                f.write(netns.run("ip", "netns", "exec", ns, "nstat", "-as", check=False).stdout
                        .replace("\n", "\n  ").rstrip() + "\n")

    def _tcp(self, namespaces: list[str]) -> dict[str, int]:
        total: dict[str, int] = {}
        for ns in namespaces:
            for k, v in self.cluster.tcp_counters(ns).items():
                total[k] = total.get(k, 0) + v
        return total


# -- analysis ------------------------------------------------------------------------------------
def comm_intervals(phases: list[dict]) -> list[tuple[float, float]]:
    """Communication phases as (start, end) seconds, CLOCK_REALTIME."""
    return [(p["comm_start_ns"] / 1e9, p["comm_end_ns"] / 1e9) for p in phases]


def wire_overlap(run: RunResult, after_s: float = 0.0) -> float:
    """Share of the time some job was sending (its rank-0 NIC counter, sampled every 10 ms)
    during which two or more were: contention as the wire saw it, from `after_s` on."""
    if run.sampler is None:
        return overlap_fraction(run, after_s)
    return run.sampler.overlap(run.senders, run.threshold_bps, run.t0 + after_s)


def overlap_fraction(run: RunResult, after_s: float = 0.0) -> float:
    """Share of the time some job was in a communication phase, by the trainers' timestamps,
    during which two or more were (phases starting `after_s` or more into the run). A phase held
    by the gate counts from the call, so this overstates contention under Metronome: prefer
    wire_overlap."""
    events = []
    for ph in run.phases.values():
        for s, e in comm_intervals(ph):
            if s >= run.t0 + after_s:
                events += [(s, 1), (e, -1)]
    events.sort()
    busy = multi = 0.0
    depth, last = 0, None
    for t, d in events:
        if last is not None:
            if depth >= 1:
                busy += t - last
            if depth >= 2:
                multi += t - last
        depth += d
        last = t
    return multi / busy if busy > 0 else 0.0


def mean_iter_ms(summary: dict) -> float:
    return float(summary["iteration_ms"]["mean"])


# A job's weight in the priority-weighted JCT: 1 + its priority level (low 0, normal 1, high 2),
# as the planner and the simulator weigh it.
PRIORITY_WEIGHTS = {"low": 1.0, "normal": 2.0, "high": 3.0}


def weighted_jct(r: RunResult, jobs: list[Job]) -> float:
    w = [PRIORITY_WEIGHTS.get(j.priority, 1.0) for j in jobs]
    return sum(wi * r.summaries[j.name]["completion_s"] for wi, j in zip(w, jobs)) / sum(w)


def print_table(jobs: list[Job], solo: dict[str, float], runs: list[RunResult]) -> str:
    lines = []
    head = f"{'job':14} {'prio':7} {'solo ms':>8}"
    for r in runs:
        head += f" | {r.label + ' iter ms':>18} {'slowdown':>8} {'JCT s':>7}"
    lines.append(head)
    lines.append("-" * len(head))
    for j in jobs:
        row = f"{j.name:14} {j.priority:7} {solo.get(j.name, float('nan')):8.1f}"
        for r in runs:
            s = r.summaries[j.name]
            m = mean_iter_ms(s)
            row += (f" | {m:18.1f} {m / solo[j.name] if j.name in solo else float('nan'):8.3f}"
                    f" {s['completion_s']:7.1f}")
        lines.append(row)
    lines.append("")
    for r in runs:
        jcts = [r.summaries[j.name]["completion_s"] for j in jobs]
        utils = ", ".join(f"{k} {v * 100:.1f} %" for k, v in r.link_util.items())
        lines.append(f"{r.label:>8}: mean JCT {statistics.mean(jcts):.1f} s, priority-weighted "
                     f"{weighted_jct(r, jobs):.1f} s, makespan "
                     f"{r.t1 - r.t0:.1f} s, wire overlap {wire_overlap(r) * 100:.1f} %, "
                     f"link utilization: {utils}")
        drops = ", ".join(f"{k} {v}" for k, v in r.drops.items())
        tcp = ", ".join(f"{k} {v['RetransSegs']}/{v['TCPTimeouts']}/{v['TCPLossProbes']}/"
                        f"{v['TCPSACKReorder']}" for k, v in r.tcp.items())
        lines.append(f"{'':>8}  shaper drops: {drops}; TCP retransmitted/timeouts/loss probes/"
                     f"reorderings: {tcp}")
    text = "\n".join(lines)
    print(text)
    return text


def plot_timeline(runs: list[RunResult], jobs: list[Job], link: str, path: Path) -> None:
    """Each run on a row: the whole run on the left, and on the right a zoom on four periods of
    the slowest job late in the run, where one can see the jobs take turns (or not)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 2, figsize=(16, 2.2 + 1.2 * len(runs) * len(jobs) / 2),
                             sharex=False, squeeze=False, gridspec_kw={"width_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def draw(ax, r: RunResult) -> float:
        t0 = r.t0
        end = 0.0
        for k, j in enumerate(jobs):
            # Who sent when, as the wire saw it (rank 0's NIC counters): the trainers' phase
            # timestamps would also count the time the gate held a phase as communication.
            if r.sampler is not None:
                wire = r.sampler.active_spans(f"tx:{j.name}", r.threshold_bps)
            else:
                wire = comm_intervals(r.phases[j.name])
            spans = [(s - t0, e - s) for s, e in wire]
            end = max([end] + [s + d for s, d in spans])
            ax.broken_barh(spans, (k - 0.4, 0.8), color=colors[k % len(colors)], label=j.name)
        ax.set_yticks(range(len(jobs)), [f"{j.name} ({j.priority})" for j in jobs])
        ax.set_xlabel("time since start (s)")
        if link in r.link_series:
            tw = ax.twinx()
            xs = [t - t0 for t, _ in r.link_series[link]]
            ys = [b / 1e6 for _, b in r.link_series[link]]
            tw.plot(xs, ys, color="black", linewidth=0.7)
            tw.set_ylabel("Mbit/s")
            tw.set_ylim(bottom=0)
        return end

    for row, r in zip(axes, runs):
        end = draw(row[0], r)
        row[0].set_title(f"{r.label}: each job on the wire (bars, its rank 0's NIC) and {link} "
                         "throughput (line)")
        # Four periods of the slowest job, from 60 % of the run (past the learning and the
        # first plans).
        period = max((statistics.median(b[0] - a[0] for a, b in zip(iv, iv[1:]))
                      for iv in (comm_intervals(r.phases[j.name]) for j in jobs) if len(iv) > 2),
                     default=1.0)
        z0 = 0.6 * end
        draw(row[1], r)
        row[1].set_xlim(z0, z0 + 4 * period)
        row[1].set_title(f"{r.label}: zoom on four periods ({4 * period:.1f} s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--scenario", default=str(REPO / "examples" / "scenarios" / "testbed-small.yaml"))
    ap.add_argument("--build-dir", default=str(REPO / "build" / "release"))
    ap.add_argument("--out", default=str(REPO / "out" / "demo"))
    ap.add_argument("--iterations", type=int, help="override every job's iteration count")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run before giving up")
    ap.add_argument("--skip-solo", action="store_true", help="no solo runs (slowdowns unknown)")
    ap.add_argument("--prefix", default="mtrdemo", help="namespace name prefix")
    ap.add_argument("--scheduler-config", metavar="FILE",
                    help="YAML configuration for metronome-scheduler (--config); default: its "
                         "embedded defaults")
    args = ap.parse_args()
    if args.scheduler_config and not Path(args.scheduler_config).is_file():
        ap.error(f"--scheduler-config {args.scheduler_config}: no such file")

    demo = Demo(args)
    try:
        demo.cluster.up()
    except netns.ClusterError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2
    try:
        solo: dict[str, float] = {}
        if not args.skip_solo:
            for j in demo.jobs:
                alone = Job(j.name, j.nodes, max(10, j.iterations // 3), j.priority, j.workload,
                            chunk_kib=j.chunk_kib)
                r = demo.run(f"solo-{j.name}", [alone], "observe", with_scheduler=False)
                solo[j.name] = mean_iter_ms(r.summaries[j.name])
                print(f"solo {j.name}: {solo[j.name]:.1f} ms per iteration", flush=True)
        without = demo.run("without", demo.jobs, "observe", with_scheduler=False)
        with_m = demo.run("with", demo.jobs, "enforce", with_scheduler=True)
    finally:
        demo.cluster.down()

    print()
    table = print_table(demo.jobs, solo, [without, with_m])
    link = next(iter(demo.links), None)
    if link:
        plot_timeline([without, with_m], demo.jobs, link, demo.out / "timeline.png")
        print(f"\ntimeline: {demo.out / 'timeline.png'}")
    results = {
        "scenario": args.scenario,
        "solo_ms": solo,
        "runs": {r.label: {"jobs": r.summaries, "link_utilization": r.link_util,
                           "wire_overlap": wire_overlap(r), "duration_s": r.t1 - r.t0,
                           "shaper_drops": r.drops, "tcp": r.tcp,
                           "scheduler_jobs": r.scheduler_status}
                 for r in (without, with_m)},
    }
    (demo.out / "results.json").write_text(json.dumps(results, indent=2))
    (demo.out / "table.txt").write_text(table + "\n")
    print(f"results: {demo.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
