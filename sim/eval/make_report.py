#!/usr/bin/python3
"""Writes docs/evaluation.md and docs/img/eval-*.png from the runs of scripts/evaluate.sh.

Every number in the report is read from those runs (metronome-sim --compare ... --json output,
the scaling measurements, and, when present, the CPU testbed's results.json); the prose around
the numbers is chosen by comparing them, never typed in.
"""
import argparse
import json
import os
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SCENARIOS = [
    ("two-jobs-one-link", "two jobs sharing a link"),
    ("testbed-small", "testbed-small (the CPU testbed's scenario)"),
    ("newcomer-joins-pair", "a newcomer joins a pair that takes turns"),
    ("mixed-priority-rack", "a mixed-priority rack"),
    ("heterogeneous-13", "heterogeneous cluster, 13 models, Poisson arrivals (paper-like)"),
    ("large-cluster", "large cluster: 512 nodes, 1,200 jobs"),
]
BASE = "k8s-default"
POLICIES = ["k8s-default", "network-aware", "cassini", "metronome", "metronome-pack",
            "metronome-no-cushion", "metronome-no-stretch", "metronome-no-controller",
            "metronome-no-yields"]
MAIN = ["network-aware", "cassini", "metronome"]
ABLATIONS = ["metronome", "metronome-pack", "metronome-no-cushion", "metronome-no-stretch",
             "metronome-no-controller", "metronome-no-yields"]
COLORS = {"k8s-default": "#7f7f7f", "network-aware": "#1f77b4", "cassini": "#ff7f0e",
          "metronome": "#2ca02c", "metronome-no-cushion": "#98df8a",
          "metronome-no-stretch": "#d62728", "metronome-no-controller": "#9467bd",
          "metronome-pack": "#17becf", "metronome-no-yields": "#bcbd22"}
PAPER_JCT = 19.50
PAPER_UTIL = 23.20
PAPER_KEY = "heterogeneous-13"


def pct(x):
    return f"{x:+.1f} %"


def paper_seeds():
    """The paper-like scenario over other seeds (noise draws; its arrivals are fixed): one draw
    is one placement history, and a job placed on busier links early changes everything after."""
    path = Path(RUNS_DIR) / "paper-seeds.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    if not rows:
        return []
    def gaps(policy):
        """Per seed: the policy's priority-weighted JCT against network-aware, minus 1."""
        return [r[policy]["weighted_jct_s"] / r["network-aware"]["weighted_jct_s"] - 1
                for r in rows]

    def per_seed(policy):
        return " / ".join(f"{100 * g:+.1f}" for g in gaps(policy))

    metronome = gaps("metronome")
    seeds = ", ".join(str(r["seed"]) for r in rows)
    high = " / ".join(f"{r['metronome']['high']:.3f}" for r in rows)
    high_na = " / ".join(f"{r['network-aware']['high']:.3f}" for r in rows)
    out = [f"- **{PAPER_KEY}, seeds {seeds}** (`--seed N`: other draws of the noise; the "
           "arrivals are the scenario's): "
           f"Metronome's priority-weighted JCT against network-aware {per_seed('metronome')} % "
           f"(mean {100 * sum(metronome) / len(metronome):+.2f} %); high-priority mean "
           f"slowdown {high} "
           f"(network-aware {high_na})."]
    if all("network-aware-qos" in r for r in rows):
        qh = " / ".join(f"{r['network-aware-qos']['high']:.3f}" for r in rows)
        out.append(f"  On a fabric that serves the priorities' traffic classes by strict priority "
                   f"(`network-aware-qos`, the reference for what priority can reach: lower "
                   f"classes preempted in flight, no gate), the high-priority slowdown is {qh} "
                   f"and the priority-weighted JCT against network-aware "
                   f"{per_seed('network-aware-qos')} %: on this cluster even "
                   "preemptive priority costs the lower classes more than the high one gains.")
    if all("contention_share" in r["network-aware"] for r in rows):
        c = [100 * r["network-aware"]["contention_share"] for r in rows]
        out.append(f"  Without time scheduling, the run time that its jobs lose to contention is "
                   f"{' / '.join(f'{x:.1f}' for x in c)} % of the priority-weighted JCT (the rest "
                   "is solo run time and queueing for GPUs).")
    if all("network-aware-alone" in r and "network-aware-serial" in r for r in rows):
        sh = " / ".join(f"{r['network-aware-serial']['high']:.3f}" for r in rows)
        out.append("  Two references on the same placement bound what time scheduling can reach. "
                   "With no collision at all (`network-aware-alone`: every transfer at its rate "
                   "alone) the priority-weighted JCT against network-aware is "
                   f"{per_seed('network-aware-alone')} %: "
                   "jobs that finish sooner free their GPUs for the queue, so the contention "
                   "above weighs several times its share. Serving colliding transfers one after "
                   "the other instead of sharing the link (`network-aware-serial`: each link "
                   "carries one transfer at a time in the order they started, with none of a "
                   f"gate's gaps) is {per_seed('network-aware-serial')} % (high-priority "
                   f"slowdown {sh}): "
                   "on this mix of phases, from a few milliseconds on the wire (dlrm) to hundreds "
                   "(bert, xlm), a short phase that arrives behind a long one waits for all of it "
                   "where sharing would have finished it at once. So taking turns wins here only "
                   "where phases can follow each other without waiting, at equal or harmonic "
                   "periods, which the unrelated periods on its shared uplinks do not offer "
                   "(docs/decisions/0028-what-taking-turns-can-reach-on-heterogeneous-13.md). "
                   "Nor does knowing how long jobs run (shortest remaining run first, even "
                   "preempting in flight) or placing the high class away from busy links: both "
                   "measured worse on every seed "
                   "(docs/decisions/0032-job-lengths-and-priority-placement-measured.md).")
    return out


def load(runs_dir):
    data = {}
    for key, _ in SCENARIOS:
        p = Path(runs_dir) / f"{key}.json"
        if p.exists():
            d = json.loads(p.read_text())
            data[key] = {r["policy"]: r for r in d["runs"]}
    return data


def reduction(base, value):
    """Reduction in percent (positive = smaller than base)."""
    return 100.0 * (base - value) / base if base else 0.0


def gain(base, value):
    return 100.0 * (value - base) / base if base else 0.0


def link_sharing(run):
    """(links that carried traffic, links on which two transfers ever overlapped)."""
    links = run.get("links", [])
    return len(links), sum(1 for l in links if l["overlap_s"] > 0)


def sharing_facts(data, key):
    """Why utilization moves the way it does: how many links carried traffic and how many were
    ever shared, under spreading and under Metronome's placement."""
    runs = data[key]
    if not runs[BASE].get("links") or not runs["metronome"].get("links"):
        return []
    kl, ks = link_sharing(runs[BASE])
    ml, ms = link_sharing(runs["metronome"])
    k_util = 100 * runs[BASE]["summary"]["avg_link_utilization"]
    m_util = 100 * runs["metronome"]["summary"]["avg_link_utilization"]
    solo = [l for l in runs["metronome"]["links"] if l["overlap_s"] <= 0]
    shared = [l for l in runs["metronome"]["links"] if l["overlap_s"] > 0]
    mean = lambda xs: 100 * sum(l["utilization"] for l in xs) / len(xs) if xs else 0.0
    return [f"  Why the utilization moves that way: the metric averages over the links that carried "
            f"traffic. Under k8s-default's spreading, {kl} links carried traffic and {ks} of them "
            f"had two or more transfers at once at some time (average utilization {k_util:.1f} %). "
            f"Under Metronome's placement (network-aware: the fewest links), {ml} links carried "
            f"traffic and only {ms} were ever shared; the {len(solo)} links with one job at a time "
            f"average {mean(solo):.1f} % (a lone job uses a link only for its communication phase, "
            f"whatever the scheduling), the {len(shared)} shared ones {mean(shared):.1f} % "
            f"(together {m_util:.1f} %). Time scheduling can raise only the shared links' figure."]


def gated_stats(run):
    """Over the jobs whose phases went through a gate at least once: how many, their mean
    timetable period / natural period, communication phase / window (jobs whose last timetable
    had a window), and gate wait / natural period."""
    gated = [j for j in run["jobs"] if j["mean_period_ms"] > 0]
    if not gated:
        return 0, 0.0, 0.0, 0.0
    windowed = [j for j in gated if j["window_ms"] > 0]
    stretch = sum(j["mean_period_ms"] / j["natural_ms"] for j in gated) / len(gated)
    inflate = (sum(j["comm_ms"] / j["window_ms"] for j in windowed) / len(windowed)
               if windowed else 1.0)
    wait = sum(j["gate_wait_ms"] / j["natural_ms"] for j in gated) / len(gated)
    return len(gated), stretch, inflate, wait


def summary_table(runs):
    b = runs[BASE]["summary"]
    lines = ["| policy | avg JCT (s) | JCT reduction | weighted JCT (s) | weighted JCT reduction | "
             "avg link util | util gain | makespan (s) | overlap |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in POLICIES:
        if p not in runs:
            continue
        s = runs[p]["summary"]
        lines.append(
            f"| {p} | {s['avg_jct_s']:.2f} | {pct(reduction(b['avg_jct_s'], s['avg_jct_s']))} | "
            f"{s['weighted_jct_s']:.2f} | {pct(reduction(b['weighted_jct_s'], s['weighted_jct_s']))} | "
            f"{100 * s['avg_link_utilization']:.1f} % | "
            f"{pct(gain(b['avg_link_utilization'], s['avg_link_utilization']))} | "
            f"{s['makespan_s']:.1f} | {100 * s['overlap_fraction']:.1f} % |")
    return "\n".join(lines)


def class_table(runs, policies):
    classes = ["high", "normal", "low"]
    lines = ["| policy | " + " | ".join(f"{c} (mean slowdown)" for c in classes) + " |",
             "|---|" + "---:|" * len(classes)]
    for p in policies:
        if p not in runs:
            continue
        bp = runs[p]["by_priority"]
        cells = [f"{bp[c]['mean_slowdown']:.3f} ({bp[c]['jobs']} jobs)" if c in bp else "–"
                 for c in classes]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bar_chart(data, metric, title, ylabel, path, policies):
    keys = [k for k, _ in SCENARIOS if k in data]
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        vals = []
        for k in keys:
            b = data[k][BASE]["summary"]
            s = data[k][p]["summary"]
            vals.append(metric(b, s))
        xs = [x + (i - (len(policies) - 1) / 2) * width for x in range(len(keys))]
        ax.bar(xs, vals, width, label=p, color=COLORS[p])
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(keys)), keys, rotation=10)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def class_chart(data, path):
    keys = [k for k in ("mixed-priority-rack", "heterogeneous-13", "large-cluster") if k in data]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8), squeeze=False)
    pols = ["k8s-default", "network-aware", "cassini", "metronome"]
    classes = ["high", "normal", "low"]
    for ax, k in zip(axes[0], keys):
        width = 0.8 / len(pols)
        for i, p in enumerate(pols):
            bp = data[k][p]["by_priority"]
            vals = [bp[c]["mean_slowdown"] if c in bp else 0 for c in classes]
            xs = [x + (i - (len(pols) - 1) / 2) * width for x in range(len(classes))]
            ax.bar(xs, vals, width, label=p, color=COLORS[p])
        ax.axhline(1.0, color="black", linewidth=0.6, linestyle=":")
        ax.set_xticks(range(len(classes)), classes)
        ax.set_ylim(bottom=0.9)
        ax.set_title(k, fontsize=10)
        ax.set_ylabel("mean slowdown (1 = alone)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cdf_chart(data, path):
    keys = [k for k in ("heterogeneous-13", "large-cluster") if k in data]
    fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4), squeeze=False)
    for ax, k in zip(axes[0], keys):
        for p in ["k8s-default", "network-aware", "cassini", "metronome"]:
            jcts = sorted(j["jct_s"] for j in data[k][p]["jobs"])
            ys = [(i + 1) / len(jcts) for i in range(len(jcts))]
            ax.step(jcts, ys, where="post", label=p, color=COLORS[p])
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (s)")
        ax.set_ylabel("fraction of jobs")
        ax.set_title(f"CDF of JCT: {k}", fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ablation_chart(data, path):
    keys = [k for k, _ in SCENARIOS if k in data]
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(ABLATIONS)
    for i, p in enumerate(ABLATIONS):
        vals = [data[k][p]["summary"]["weighted_jct_s"] / data[k]["metronome"]["summary"]["weighted_jct_s"]
                for k in keys]
        xs = [x + (i - (len(ABLATIONS) - 1) / 2) * width for x in range(len(keys))]
        ax.bar(xs, vals, width, label=p, color=COLORS[p])
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(keys)), keys, rotation=10)
    ax.set_ylabel("weighted JCT / metronome's")
    ax.set_title("Ablations: priority-weighted JCT relative to full Metronome (higher = worse)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def scaling(runs_dir):
    rows = []
    p = Path(runs_dir) / "scaling.jsonl"
    if p.exists():
        for line in p.read_text().splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def scaling_chart(rows, path):
    fig, ax = plt.subplots(figsize=(6, 4))
    series = [r for r in rows if r.get("recipe") != "full-scale"]
    for pol in ("k8s-default", "metronome"):
        rs = sorted((r for r in series if r["policy"] == pol), key=lambda r: r["nodes"])
        ax.plot([r["nodes"] for r in rs], [r["wall_s"] for r in rs], marker="o",
                label=f"{pol} (2.3 jobs per node, minutes)", color=COLORS[pol])
    for r in rows:
        if r.get("recipe") == "full-scale":
            ax.plot([r["nodes"]], [r["wall_s"]], marker="*", markersize=12, linestyle="none",
                    color=COLORS[r["policy"]],
                    label=f"{r['policy']}: full-size cluster, {r['jobs']:,} jobs, "
                          f"{r['simulated_s'] / 60:.0f} min")
    ax.axhline(300, color="grey", linestyle=":", linewidth=1, label="5 minutes")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("simulator run time (s)")
    ax.set_title("metronome-sim run time against cluster size")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def slow_phase_seeds():
    """testbed-small with the testbed's slow phases over many seeds (scripts/evaluate.sh)."""
    path = Path(RUNS_DIR) / "testbed-slow-seeds.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if {"k8s-default", "metronome"} <= set(r["runs"])]
    if not rows:
        return []
    jobs = sorted(rows[0]["runs"]["metronome"])
    out = ["With the testbed's transport hiccups (`testbed-small` with `slow_phase_p: 0.08, "
           "slow_phase_factor: 2` in its noise: each phase, with probability 0.08, moves U(1, 2) "
           "times its bytes; `scripts/evaluate.sh` writes it to `out/eval/`), over "
           f"{len(rows)} seeds: mean iteration time (ms) per job, the median over the seeds and "
           "Metronome's 90th percentile and worst, and the seeds in which the job iterated more "
           "slowly with Metronome than without:", "",
           "| job | k8s-default median | metronome median | metronome p90 | metronome worst | "
           "seeds slower with Metronome |", "|---|---:|---:|---:|---:|---:|"]
    for name in jobs:
        base = sorted(r["runs"]["k8s-default"][name] for r in rows)
        met = sorted(r["runs"]["metronome"][name] for r in rows)
        slower = sum(1 for r in rows
                     if r["runs"]["metronome"][name] > r["runs"]["k8s-default"][name])
        p90 = met[min(len(met) - 1, (9 * len(met)) // 10)]
        out.append(f"| {name} | {statistics.median(base):.1f} | {statistics.median(met):.1f} | "
                   f"{p90:.1f} | {met[-1]:.1f} | {slower} of {len(rows)} |")
    out += ["", "A phase that overruns its window makes the job's next phase late; past its "
            "cushion the gate holds it to its next window (at most once in four phases) or lets "
            "it go into a neighbour's window. This is how the e2e interleave test fails on the "
            "testbed in some runs (docs/testbed.md); what was tried against it is in "
            "docs/decisions/0013-late-top-job-and-period-margin-tried.md.", ""]
    return out


def testbed_section(data, testbed_path):
    out = ["## Validation against the CPU testbed", ""]
    tb = None
    if testbed_path and os.path.exists(testbed_path):
        try:
            tb = json.loads(Path(testbed_path).read_text())
        except (OSError, ValueError):
            tb = None
    if tb is None or "testbed-small" not in data:
        out += ["The CPU testbed's results (`out/demo/results.json`, written by "
                "`testbed/demo/demo.py` on `examples/scenarios/testbed-small.yaml`, which needs root "
                "for network namespaces) were not available when this report was generated, so the "
                "simulator-vs-testbed agreement is **not stated here**. Run the demo, then rerun "
                "`scripts/evaluate.sh`: this section then compares the mean iteration times job by job.",
                ""]
        return out + slow_phase_seeds()
    sim = data["testbed-small"]
    seeds = []
    seeds_file = Path(RUNS_DIR) / "testbed-seeds.jsonl"
    if seeds_file.exists():
        seeds = [json.loads(x) for x in seeds_file.read_text().splitlines() if x.strip()]
    pairs = [("without", "k8s-default"), ("with", "metronome")]
    import datetime
    written = datetime.datetime.fromtimestamp(os.path.getmtime(testbed_path),
                                              datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out += [f"Testbed results: `{os.path.relpath(testbed_path)}` (written {written}; `scripts/demo.sh` on "
            f"`{os.path.relpath(tb.get('scenario', 'examples/scenarios/testbed-small.yaml'))}`); simulator: "
            "`testbed-small` under the policy in brackets (same pinned placement). Mean iteration "
            "time per job:", "",
            "| run | job | testbed (ms) | simulator (ms) | difference |", "|---|---|---:|---:|---:|"]
    worst = 0.0
    worst_by = {}
    for label, pol in pairs:
        run = tb.get("runs", {}).get(label)
        if not run:
            continue
        simjobs = {j["name"]: j for j in sim[pol]["jobs"]}
        for name, s in run.get("jobs", {}).items():
            if name not in simjobs:
                continue
            t_ms = float(s["iteration_ms"]["mean"])
            s_ms = simjobs[name]["mean_iteration_ms"]
            diff = 100.0 * (s_ms - t_ms) / t_ms
            worst = max(worst, abs(diff))
            worst_by[label] = max(worst_by.get(label, 0.0), abs(diff))
            out.append(f"| {label} ({pol}) | {name} | {t_ms:.1f} | {s_ms:.1f} | {pct(diff)} |")
    for name, ms in (tb.get("solo_ms") or {}).items():
        simjobs = {j["name"]: j for j in sim[BASE]["jobs"]}
        if name in simjobs:
            diff = 100.0 * (simjobs[name]["natural_ms"] - ms) / ms
            worst = max(worst, abs(diff))
            worst_by["solo"] = max(worst_by.get("solo", 0.0), abs(diff))
            out.append(f"| solo | {name} | {ms:.1f} | {simjobs[name]['natural_ms']:.1f} | "
                       f"{pct(diff)} |")
    verdict = "within" if worst <= 10.0 else "**not** within"
    out += ["", f"Largest difference: {worst:.1f} % — {verdict} the 10 % the issue asks for "
            "(by run: " + ", ".join(f"{k} {v:.1f} %" for k, v in worst_by.items()) + ").", ""]
    if worst_by.get("with", 0.0) > 10.0 and all(v <= 10.0 for k, v in worst_by.items()
                                                 if k != "with"):
        w = {j["name"]: j for j in sim["metronome"]["jobs"]}
        solo = tb.get("solo_ms") or {}
        tb_with = tb["runs"]["with"]["jobs"]
        tb_without = tb["runs"].get("without", {}).get("jobs", {})
        worse = [n for n, s in tb_with.items() if n in tb_without and
                 float(s["iteration_ms"]["mean"]) > float(tb_without[n]["iteration_ms"]["mean"])]
        if all(n in solo for n in tb_with):
            testbed_said = ("in that testbed run at " + ", ".join(
                f"{n} {float(s['iteration_ms']['mean']) / solo[n]:.2f}×"
                for n, s in tb_with.items()) + " their solo time")
        else:  # the run has no solo figures: against its own run without Metronome
            testbed_said = ("in that testbed run at " + ", ".join(
                f"{n} {float(s['iteration_ms']['mean']) / float(tb_without[n]['iteration_ms']['mean']):.2f}×"
                for n, s in tb_with.items() if n in tb_without) +
                " their time without Metronome (the run has no solo figures)")
        out += ["Only the run with Metronome disagrees. In the simulator the gated jobs run at "
                + ", ".join(f"{n} {w[n]['slowdown']:.3f}×" for n in sorted(w)) +
                " their solo period; " + testbed_said +
                (f" ({', '.join(worse)} slower than without Metronome)" if worse else "") +
                ". The testbed run is driven by the scheduler service and the shims: the same "
                "planner and gate decision, but profiles first measured ungated under contention, "
                "re-plans as they settle, and real TCP and clock behaviour that the fluid model "
                "leaves out. The gap is the testbed falling short of the plan (issue: the demo), "
                "not the simulator mis-predicting the plan.", ""]
    if seeds:
        out += ["The simulator's figure depends on the jobs' initial phase offsets (the scenario's "
                "`start_jitter_s`; ungated identical jobs keep the offset they start with). Over "
                f"{len(seeds)} seeds, mean iteration time (ms), min / mean / max, against the testbed:",
                "", "| run | job | testbed | simulator min | mean | max | testbed inside the range |",
                "|---|---|---:|---:|---:|---:|---|"]
        for label, pol in pairs:
            run = tb.get("runs", {}).get(label)
            if not run:
                continue
            for name, s in run.get("jobs", {}).items():
                vals = [x["runs"][pol][name] for x in seeds if name in x["runs"].get(pol, {})]
                if not vals:
                    continue
                t_ms = float(s["iteration_ms"]["mean"])
                inside = "yes" if min(vals) * 0.9 <= t_ms <= max(vals) * 1.1 else "no"
                out.append(f"| {label} ({pol}) | {name} | {t_ms:.1f} | {min(vals):.1f} | "
                           f"{sum(vals) / len(vals):.1f} | {max(vals):.1f} | {inside} (±10 %) |")
        out.append("")
    out += slow_phase_seeds()
    wo = tb.get("runs", {}).get("with", {})
    if wo and "overlap" in wo:
        out += [f"Communication overlap measured by the testbed: without {100 * tb['runs']['without'].get('overlap', 0):.1f} %, "
                f"with Metronome {100 * wo['overlap']:.1f} %; simulator (this scenario): without "
                f"{100 * sim['k8s-default']['summary']['overlap_fraction']:.1f} %, with "
                f"{100 * sim['metronome']['summary']['overlap_fraction']:.1f} %. "
                + ("The testbed's Metronome run did not interleave the jobs (its overlap did not fall), "
                   "so the 'with' rows compare a working timetable (simulator) with a run where the "
                   "gates did not take effect as planned; that is a finding for the testbed, shim and "
                   "scheduler, not a property of the model." if wo["overlap"] >= tb["runs"]["without"].get("overlap", 0)
                   else "")
, ""]
    return out


BENCH_WHAT = {
    "bench_common": "shared core: wire protocol encode/decode, the gate decision, timetable "
                    "validation, a clock-sync sample",
    "bench_planner": "planner on 512 nodes in 64 racks (argument: jobs): full plan with jitter "
                     "cushions, adding one job, what-if over 1,000 candidate nodes; at cluster "
                     "scale, 8,192 nodes in 1,024 racks and 10,000 jobs (argument: jobs that "
                     "also cross one hot spine link): full plan, adding and removing one job "
                     "(p50 and p99 of each), what-if over 1,000 candidates",
    "bench_shim": "the shim's caller path per collective (direct call, off, enforce in a burst, "
                  "a phase start in an open window, an unknown communicator)",
    "bench_extender": "kube-scheduler extender: filter + prioritize for 1,000 nodes",
    "bench_planning_adapter": "the service's planning round (one job replaced, within racks "
                              "and across racks; 500 to 8,192 jobs), its plan summary, and a "
                              "new leader's rounds as the jobs of the last plan register again "
                              "(`BM_TakeOver`, rounds of 64 jobs), and whom every job takes "
                              "turns with, recomputed for 2,048 and 8,192 jobs (`BM_TurnSets`: "
                              "none sharing a link, or each sharing one with one other)",
}


def fmt_time(value, unit):
    ns = value * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
    if ns < 1e3:
        return f"{ns:.1f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def bench_section(bench_dir):
    out = ["## Benchmarks", ""]
    files = sorted(Path(bench_dir).glob("*.json")) if bench_dir else []
    if not files:
        return out + ["No benchmark results were given to this report (`--bench`).", ""]
    out += ["Google Benchmark programs run by `scripts/evaluate.sh` (Release build; CPU time, the "
            "median of 3 repetitions; the build machines are shared, so compare figures within one "
            "run). Each program prints the same table when run by hand, e.g. "
            "`build/release/bench/planner/bench_planner --benchmark_filter='FullPlanJitter|AddJob|WhatIf|Cluster'`.",
            ""]
    for f in files:
        doc = json.loads(f.read_text())
        rows = [b for b in doc.get("benchmarks", []) if b.get("aggregate_name") == "median"]
        if not rows:
            rows = [b for b in doc.get("benchmarks", []) if b.get("run_type") == "iteration"]
        ctx = doc.get("context", {})
        out += [f"**`{f.stem}`** — {BENCH_WHAT.get(f.stem, '')} ({ctx.get('num_cpus', '?')} CPUs, "
                f"{ctx.get('date', '')[:10]})", "",
                "| benchmark | CPU time | wall time | latency per operation |", "|---|---:|---:|---|"]
        for b in rows:
            name = b.get("run_name", b["name"]).removeprefix("BM_")
            # Counters named *_ms are per-operation latencies the benchmark measured itself.
            lat = ", ".join(f"{k.removesuffix('_ms').replace('_', ' ')} {v:.2f} ms"
                            for k, v in sorted(b.items()) if k.endswith("_ms"))
            out.append(f"| {name} | {fmt_time(b['cpu_time'], b['time_unit'])} | "
                       f"{fmt_time(b['real_time'], b['time_unit'])} | {lat} |")
        out.append("")
    load = Path(bench_dir) / "service_load_driver.txt"
    if load.exists():
        out += ["**`service_load_driver`** — metronome-scheduler under 2,000 reporting protocol clients "
                "(500 jobs × 4 ranks, 10 reports/s each, 20 s, 10 jobs/s replaced), its own printout; "
                "the scheduler pinned to one core and the clients to the other "
                "(`scripts/evaluate.sh`; by hand: `build/release/bench/service/service_load_driver "
                "--clients 2000 --rate 10 --duration 20`, docs/scheduler.md §Load)", "", "```",
                *load.read_text().rstrip().splitlines(), "```", ""]
    cluster = Path(bench_dir) / "service_load_driver_cluster.txt"
    if cluster.exists():
        out += ["**`service_load_driver --node-share`** — the cluster's 65,536 ranks reporting once a "
                "second as the shims send it, one connection per job per node (8,192; 2,048 jobs "
                "of 4 nodes on a 1,024 × 8 tree), 20 s, 10 jobs/s replaced, `/metrics` and the "
                "status API read every 2 s; pinned as above "
                "(`scripts/evaluate.sh`; by hand: `service_load_driver --clients 65536 --rate 1 "
                "--ranks-per-job 32 --ranks-per-node 8 --racks 1024 --node-share --poll-ms 2000`, "
                "docs/scheduler.md §Load)", "", "```",
                *cluster.read_text().rstrip().splitlines(), "```", ""]
    parts = Path(bench_dir) / "planning_parts_driver.txt"
    if parts.exists():
        out += ["**`planning_parts_driver`** — the scheduler's registry and planning worker "
                "in-process: a burst of 300 joins across two racks' uplinks on a cluster of 2,100 "
                "racks and 8,000 running jobs, while probe jobs join elsewhere and beside running "
                "jobs; each probe's time from its report to its push, with one planning part and "
                "with eight (`scripts/evaluate.sh`; by hand: `planning_parts_driver --racks 2100 "
                "--background 8000 --burst 300 --repeat 2 --parts 1,8`, docs/scheduler.md "
                "§A long round and the rest of the cluster)", "", "```",
                *parts.read_text().rstrip().splitlines(), "```", ""]
    return out


def load_pairs(runs_dir):
    """The model-pair sweep: one row per (GPU, model, model) with each policy's figures."""
    path = Path(runs_dir) / "pairs.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def pair_figures(row, policy):
    """(JCT reduction, utilization gain) of a policy against k8s-default on one pair."""
    b = row[BASE]
    return reduction(b["avg_jct_s"], row[policy]["avg_jct_s"]), gain(b["util"], row[policy]["util"])


def pairs_heatmap(rows, path):
    """Metronome's JCT reduction for every pair, one panel per GPU type."""
    gpus = sorted({r["gpu"] for r in rows})
    models = sorted({r["a"] for r in rows} | {r["b"] for r in rows})
    fig, axes = plt.subplots(1, len(gpus), figsize=(6.5 * len(gpus), 5.8))
    axes = axes if len(gpus) > 1 else [axes]
    vmax = max(abs(pair_figures(r, "metronome")[0]) for r in rows) or 1.0
    for ax, g in zip(axes, gpus):
        grid = [[float("nan")] * len(models) for _ in models]
        for r in rows:
            if r["gpu"] != g:
                continue
            v = pair_figures(r, "metronome")[0]
            i, k = models.index(r["a"]), models.index(r["b"])
            grid[i][k] = grid[k][i] = v
        im = ax.imshow(grid, cmap="RdYlGn", vmin=-vmax, vmax=vmax)
        ax.set_xticks(range(len(models)), models, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(models)), models, fontsize=8)
        ax.set_title(f"{g}: Metronome's JCT reduction against k8s-default (%)", fontsize=10)
        for i in range(len(models)):
            for k in range(len(models)):
                if grid[i][k] == grid[i][k] and abs(grid[i][k]) >= 1:
                    ax.text(k, i, f"{grid[i][k]:.0f}", ha="center", va="center", fontsize=6)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def pairs_section(rows, rel):
    """Every pair of the 13 models sharing one link: where time scheduling pays and where not."""
    if not rows:
        return []
    L = ["## Model pairs: every pair of the 13 models on one shared link", "",
         "Two jobs of 8 GPUs, each on one 4-GPU node in either of two racks, so that both "
         "all-reduces cross the two rack uplinks, which run at the nodes' NIC speed (A100 nodes: "
         "100 Gbit/s; T4 nodes: 25 Gbit/s). Both jobs are pinned, so every policy runs the same "
         "placement and only the time scheduling differs (k8s-default = network-aware here). "
         "91 pairs (13 models, each with each, itself included) per GPU type; each job runs "
         "about 60 s alone; 2 % compute jitter, 3 % profile error, seed 91 "
         "(`generate.py --pairs DIR`).", "",
         "| GPU | policy | mean JCT reduction | median | best | worst | pairs gaining > 1 % | "
         "pairs losing > 1 % | mean utilization gain | best utilization gain |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    gpus = sorted({r["gpu"] for r in rows})
    for g in gpus + ["all"]:
        sel = [r for r in rows if g == "all" or r["gpu"] == g]
        for pol in ("cassini", "metronome-no-turns", "metronome"):
            if any(pol not in r for r in sel):
                continue
            jct = sorted(pair_figures(r, pol)[0] for r in sel)
            util = [pair_figures(r, pol)[1] for r in sel]
            med = statistics.median(jct)
            L.append(f"| {g} | {pol} | {pct(sum(jct) / len(jct))} | {pct(med)} | {pct(max(jct))} | "
                     f"{pct(min(jct))} | {sum(1 for x in jct if x > 1)} of {len(sel)} | "
                     f"{sum(1 for x in jct if x < -1)} | {pct(sum(util) / len(util))} | "
                     f"{pct(max(util))} |")
    ranked = sorted(rows, key=lambda r: -pair_figures(r, "metronome")[0])
    L += ["", "The ten pairs where Metronome gains most, and the five where it does worst:", "",
          "| GPU | pair | k8s-default avg JCT (s) | overlap | Metronome JCT reduction | "
          "utilization gain | CASSINI JCT reduction |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in ranked[:10] + ranked[-5:]:
        mj, mu = pair_figures(r, "metronome")
        cj, _ = pair_figures(r, "cassini")
        L.append(f"| {r['gpu']} | {r['a']} + {r['b']} | {r[BASE]['avg_jct_s']:.1f} | "
                 f"{100 * r[BASE]['overlap']:.1f} % | {pct(mj)} | {pct(mu)} | {pct(cj)} |")
    best = ranked[0]
    n_same = sum(1 for r in rows if r["a"] == r["b"])
    same_gain = [pair_figures(r, "metronome")[0] for r in rows if r["a"] == r["b"]]
    L += ["", f"![Model pairs]({rel}/eval-pairs.png)", "",
          f"How to read this: a pair gains where both jobs' phases are long enough to collide "
          f"often and their periods are equal or nearly harmonic; the {n_same} pairs of a model "
          f"with itself gain {pct(sum(same_gain) / len(same_gain))} on average. The largest "
          f"gain is {best['a']} + {best['b']} on {best['gpu']} "
          f"({pct(pair_figures(best, 'metronome')[0])} JCT, "
          f"{pct(pair_figures(best, 'metronome')[1])} utilization). Pairs with unrelated periods "
          "gain little: the planner stretches one job to a harmonic of the other only when that "
          "costs less than the contention it avoids, and otherwise lets it run best-effort. "
          "DLRM's phases are too short to matter. A best over 182 runs is a best over many "
          "chances; the mean and the count of losing pairs say more.", "",
          "Metronome takes turns by default (`controller.turns`; docs/decisions/0031): the two "
          "jobs of a link that each fill it hold a phase that meets the other's, on each "
          "other's phase edges relayed 2 ms late; the pairs no timetable serves gain there. "
          "`metronome-no-turns` is Metronome without (the ablation). On GPUs the shim takes "
          "its turns in the device gate's kernel and stamps its edges on the stream; the GPU "
          "check of that path (tests/gpu, `turns_check`) has not run yet.", ""]
    return L


def sweep_figures(rows):
    """Per load-sweep run: Metronome's high-priority slowdown, and its weighted and mean JCT
    against no time scheduling."""
    hi = [r["metronome"]["high"] for r in rows]
    w = [r["metronome"]["weighted_jct_s"] / r["network-aware"]["weighted_jct_s"] for r in rows]
    m = [r["metronome"]["avg_jct_s"] / r["network-aware"]["avg_jct_s"] for r in rows]
    return hi, w, m


def load_sweep_section(runs_dir):
    """One high-priority job and 1-5 lower-priority neighbours of unrelated periods on one link."""
    path = Path(runs_dir) / "load-sweep.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    loads = {1: 0.5, 2: 0.8, 3: 1.2, 4: 1.6, 5: 2.0}  # generate.py's SWEEP_LOADS
    L = ["## Load sweep: priority on a crowded link of unrelated periods", "",
         "One high-priority job (200 ms compute, 80 ms on the wire alone) and 1 to 5 normal or "
         "low neighbours whose periods (150-450 ms) are unrelated to it and to each other, all "
         "pinned across one 10 Gbit/s rack-to-rack link; the offered load (the sum of the duty "
         "cycles at solo speed) rises from 0.5 to 2.0; three seeds each "
         "(`generate.py --load-sweep DIR`). No time scheduling = network-aware placement alone "
         "(the placement is pinned). Metronome's lower-priority jobs yield to the high one's "
         "window at each collective (docs/decisions/0004-ranked-yielding.md).", "",
         "| neighbours | load | seed | high-priority slowdown, none | Metronome | "
         "weighted JCT vs none | mean JCT vs none | collectives yielded | "
         "strict-priority fabric: high / weighted / mean | "
         "one transfer at a time: high / weighted / mean |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def reference(r, policy):
        a, q = r["network-aware"], r.get(policy)
        return (f"{q['high']:.3f} / {q['weighted_jct_s'] / a['weighted_jct_s']:.3f} / "
                f"{q['avg_jct_s'] / a['avg_jct_s']:.3f}") if q else "-"

    for r in sorted(rows, key=lambda r: (r["neighbours"], r["seed"])):
        a, b = r["network-aware"], r["metronome"]
        L.append(f"| {r['neighbours']} | {loads.get(r['neighbours'], 0):.1f} | {r['seed']} | "
                 f"{a['high']:.3f} | {b['high']:.3f} | "
                 f"{b['weighted_jct_s'] / a['weighted_jct_s']:.3f} | "
                 f"{b['avg_jct_s'] / a['avg_jct_s']:.3f} | {b['yields']} | "
                 f"{reference(r, 'network-aware-qos')} | {reference(r, 'network-aware-serial')} |")
    hi, w, m = sweep_figures(rows)
    lo = [r["network-aware"]["high"] for r in rows]
    L += ["", f"Over the {len(rows)} runs: the high-priority job's slowdown {statistics.mean(lo):.3f} "
          f"on average without time scheduling, {statistics.mean(hi):.3f} with Metronome "
          f"(worst {max(hi):.3f}; within 5 % of solo in {sum(1 for x in hi if x <= 1.05)} runs); "
          f"priority-weighted JCT x{statistics.mean(w):.3f} on average (worst x{max(w):.3f}), "
          f"plain mean JCT x{statistics.mean(m):.3f} (worst x{max(m):.3f}). Where the link is "
          "oversubscribed the lower-priority jobs pay for the high one's speed: on a saturated "
          "link the bytes the high job moves faster are bytes the others move later. The last "
          "column is the reference `network-aware-qos` (no time scheduling; the fabric serves "
          "the priorities' traffic classes by strict priority, preempting lower classes in "
          "flight): what a gate that can only hold a collective before it starts is measured "
          "against (docs/decisions/0007-priority-under-load-bounds.md). The column after it is "
          "the reference `network-aware-serial` (each link carries one transfer at a time, in "
          "the order they started): taking turns in arrival order, blind to priority.", ""]
    L += load_sweep_seeds(runs_dir, loads)
    return L


def load_sweep_seeds(runs_dir, loads):
    """The load sweep's scenarios again under 20 noise seeds each: how often each load holds."""
    path = Path(runs_dir) / "load-sweep-seeds.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    L = ["The same 15 scenarios under 20 noise seeds each (`--seed` 1-20: compute jitter, clock "
         "skew, profile error and start offsets; Metronome and no time scheduling only):", "",
         "| neighbours | load | runs | high-priority slowdown, none: mean | Metronome: mean | "
         "worst | within 5 % of solo | weighted JCT vs none: mean / worst | "
         "mean JCT vs none: mean / worst |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sorted({r["neighbours"] for r in rows}):
        rs = [r for r in rows if r["neighbours"] == n]
        hi, w, m = sweep_figures(rs)
        L.append(f"| {n} | {loads.get(n, 0):.1f} | {len(rs)} | "
                 f"{statistics.mean(r['network-aware']['high'] for r in rs):.3f} | "
                 f"{statistics.mean(hi):.3f} | {max(hi):.3f} | "
                 f"{sum(1 for x in hi if x <= 1.05)} | {statistics.mean(w):.3f} / {max(w):.3f} | "
                 f"{statistics.mean(m):.3f} / {max(m):.3f} |")
    hi = [r["metronome"]["high"] for r in rows]
    L += ["", f"Over the {len(rows)} runs the high-priority job is within 5 % of solo in "
          f"{sum(1 for x in hi if x <= 1.05)}; the three seeds of the table above are not all "
          "there is to a load.", ""]
    return L


RUNS_DIR = "."


def main():
    global RUNS_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--testbed", default="")
    ap.add_argument("--report", required=True)
    ap.add_argument("--img", required=True)
    ap.add_argument("--sim-version", default="metronome-sim")
    ap.add_argument("--bench", default="", help="folder of Google Benchmark JSON outputs")
    args = ap.parse_args()
    RUNS_DIR = args.runs
    data = load(args.runs)
    img = Path(args.img)
    img.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(img, Path(args.report).parent)

    bar_chart(data, lambda b, s: reduction(b["avg_jct_s"], s["avg_jct_s"]),
              "Average JCT reduction against k8s-default (higher is better)", "JCT reduction (%)",
              img / "eval-jct-reduction.png", MAIN)
    bar_chart(data, lambda b, s: gain(b["avg_link_utilization"], s["avg_link_utilization"]),
              "Average link utilization gain against k8s-default", "utilization gain (%)",
              img / "eval-util-gain.png", MAIN)
    class_chart(data, img / "eval-slowdown-priority.png")
    cdf_chart(data, img / "eval-jct-cdf.png")
    ablation_chart(data, img / "eval-ablations.png")
    rows = scaling(args.runs)
    if rows:
        scaling_chart(rows, img / "eval-runtime.png")
    pair_rows = load_pairs(args.runs)
    if pair_rows:
        pairs_heatmap(pair_rows, img / "eval-pairs.png")

    L = ["# Evaluation", "",
         "Generated by `scripts/evaluate.sh` — do not edit by hand: every number below comes from "
         "that command's runs of `metronome-sim` (see [simulator.md](simulator.md) for the model, the "
         "policies and the metrics), of the benchmark programs, and from the latest CPU-testbed demo "
         "(`scripts/demo.sh`). Rerun it after any change to the simulator, the planner, the "
         "scenarios or a measured path.", "",
         "Metrics: **JCT** = finish − arrival (queueing included); **weighted JCT** weights each job by "
         "π = 1 + max(priority, 0) (high = 3 → 4, normal = 1 → 2, low = 0 → 1); **avg link utilization** = "
         "mean over links that carried traffic of bytes / (capacity × time the link had a running job "
         "crossing it); **overlap** = share of link-busy time during which two or more transfers shared "
         "the link; **slowdown** = mean iteration time / the job's natural period alone on its placement. "
         "Reductions and gains are against `k8s-default`.", ""]

    # Headline.
    L += ["## Headline: each policy against k8s-default", ""]
    head = ["| scenario | policy | JCT reduction | weighted JCT reduction | utilization gain |",
            "|---|---|---:|---:|---:|"]
    for key, _ in SCENARIOS:
        if key not in data:
            continue
        b = data[key][BASE]["summary"]
        for p in MAIN:
            s = data[key][p]["summary"]
            head.append(f"| {key} | {p} | {pct(reduction(b['avg_jct_s'], s['avg_jct_s']))} | "
                        f"{pct(reduction(b['weighted_jct_s'], s['weighted_jct_s']))} | "
                        f"{pct(gain(b['avg_link_utilization'], s['avg_link_utilization']))} |")
    L += head + ["", f"![JCT reduction]({rel}/eval-jct-reduction.png)", "",
                 f"![Utilization gain]({rel}/eval-util-gain.png)", ""]

    # Paper comparison, computed.
    L += ["### Against the paper's figures and against CASSINI", ""]
    if PAPER_KEY in data:
        b = data[PAPER_KEY][BASE]["summary"]
        s = data[PAPER_KEY]["metronome"]["summary"]
        n = data[PAPER_KEY]["network-aware"]["summary"]
        r_jct = reduction(b["avg_jct_s"], s["avg_jct_s"])
        r_util = gain(b["avg_link_utilization"], s["avg_link_utilization"])
        L.append(f"- On the paper-like scenario ({PAPER_KEY}), Metronome reduces the average JCT "
                 f"against k8s-default by **{r_jct:.1f} %** (paper: up to {PAPER_JCT:.2f} %: "
                 + ("reached" if r_jct >= PAPER_JCT else "not reached") + f") and changes the "
                 f"average link utilization by **{pct(r_util)}** (paper: up to +{PAPER_UTIL:.2f} %: "
                 + ("reached" if r_util >= PAPER_UTIL else "not reached") + "). Network-aware "
                 f"placement alone: {pct(reduction(b['avg_jct_s'], n['avg_jct_s']))} JCT, "
                 f"{pct(gain(b['avg_link_utilization'], n['avg_link_utilization']))} utilization.")
        L += sharing_facts(data, PAPER_KEY)
    best_jct = max(((reduction(data[k][BASE]["summary"]["avg_jct_s"], data[k]["metronome"]["summary"]["avg_jct_s"]), k)
                    for k in data), default=(0, "-"))
    best_util = max(((gain(data[k][BASE]["summary"]["avg_link_utilization"], data[k]["metronome"]["summary"]["avg_link_utilization"]), k)
                     for k in data), default=(0, "-"))
    L.append(f"- Metronome's largest average-JCT reduction against k8s-default on these "
             f"{len(data)} scenarios is "
             f"**{best_jct[0]:.1f} %** ({best_jct[1]}); the paper reports up to {PAPER_JCT:.2f} %. "
             + ("That is more than the paper's figure." if best_jct[0] > PAPER_JCT else
                "That is less than the paper's figure."))
    L.append(f"- Its largest utilization gain on these {len(data)} scenarios is "
             f"**{best_util[0]:.1f} %** ({best_util[1]}); the paper "
             f"reports up to {PAPER_UTIL:.2f} %. "
             + ("That is more than the paper's figure." if best_util[0] > PAPER_UTIL else
                "That is less than the paper's figure."))
    if pair_rows:
        top = max(pair_rows, key=lambda r: pair_figures(r, "metronome")[1])
        top_jct = max(pair_rows, key=lambda r: pair_figures(r, "metronome")[0])
        mean_u = sum(pair_figures(r, "metronome")[1] for r in pair_rows) / len(pair_rows)
        L.append(f"- Over the model-pair sweep ({len(pair_rows)} runs, below), Metronome's "
                 f"largest utilization gain is **{pair_figures(top, 'metronome')[1]:.1f} %** "
                 f"({top['a']} + {top['b']} on {top['gpu']}) and its largest JCT reduction "
                 f"**{pair_figures(top_jct, 'metronome')[0]:.1f} %** ({top_jct['a']} + "
                 f"{top_jct['b']} on {top_jct['gpu']}); the mean utilization gain over all pairs is "
                 f"{pct(mean_u)}. Like the paper's \"up to\", these are bests over many scenarios.")
    same = []
    for k in data:
        # Spreading and packing give the very same run only when placement cannot differ
        # (every job pinned): then every policy puts the same jobs on the same links.
        if data[k][BASE]["jobs"] == data[k]["network-aware"]["jobs"]:
            b, s = data[k][BASE]["summary"], data[k]["metronome"]["summary"]
            same.append(f"{k} {pct(gain(b['avg_link_utilization'], s['avg_link_utilization']))} "
                        f"with makespan {b['makespan_s']:.1f} → {s['makespan_s']:.1f} s "
                        f"(×{b['makespan_s'] / s['makespan_s']:.3f})")
    if same:
        L.append("- Where placement cannot differ (k8s-default and network-aware give the same "
                 "run), the same bytes cross the same links in less time, so the utilization gain "
                 "follows the speed-up: "
                 + "; ".join(same) + ". A utilization gain of "
                 f"{PAPER_UTIL:.2f} % on the same links needs the links' busy time to shrink by "
                 f"{100 * (1 - 1 / (1 + PAPER_UTIL / 100)):.1f} %.")
    wins, losses = [], []
    for k in data:
        m = data[k]["metronome"]["summary"]["weighted_jct_s"]
        c = data[k]["cassini"]["summary"]["weighted_jct_s"]
        (wins if m < c * 0.9995 else losses).append(f"{k} ({pct(reduction(c, m))})")
    L.append(f"- Priority-weighted JCT, Metronome against CASSINI (reduction): better on "
             f"{len(wins)} of {len(data)} scenarios" + (f": {', '.join(wins)}" if wins else "") +
             (f"; not better on {', '.join(losses)}" if losses else "") + ".")
    na = []
    for k in data:
        m = data[k]["metronome"]["summary"]["weighted_jct_s"]
        n = data[k]["network-aware"]["summary"]["weighted_jct_s"]
        na.append(f"{k} {pct(reduction(n, m))}")
    L.append("- Metronome against network-aware placement alone (the same placement, without time "
             "scheduling), weighted-JCT reduction: " + ", ".join(na) + ".")
    L.append("")

    # Where Metronome wins and loses, with the figures that explain it.
    L += ["### Where Metronome wins and where it loses", ""]
    for k in data:
        m = data[k]["metronome"]
        n = data[k]["network-aware"]["summary"]
        ms = m["summary"]
        be = sum(1 for j in m["jobs"] if j["best_effort"])
        _, stretch, inflate, wait = gated_stats(m)
        verdict = ("wins" if ms["weighted_jct_s"] < n["weighted_jct_s"] * 0.995 else
                   "ties" if ms["weighted_jct_s"] <= n["weighted_jct_s"] * 1.005 else "loses")
        L.append(f"- **{k}**: against the same placement without time scheduling, Metronome "
                 f"{verdict} (weighted JCT {ms['weighted_jct_s']:.1f} s vs {n['weighted_jct_s']:.1f} s). "
                 f"Link overlap {100 * n['overlap_fraction']:.1f} % → {100 * ms['overlap_fraction']:.1f} %; "
                 f"its gated jobs ran at {stretch:.3f}× their natural period on average, waited "
                 f"{100 * wait:.1f} % of a natural period per iteration at the gate, and their "
                 f"communication phases took {inflate:.2f}× their windows; {be} of "
                 f"{len(m['jobs'])} jobs ended best-effort.")
    L += paper_seeds()
    L += ["",
          "How to read this: without time scheduling, the fluid model shares a link max-min fairly, "
          "which is work-conserving; jobs lose time only while their phases overlap, so the most "
          "time scheduling can win on a scenario is the overlap that the same placement leaves "
          "(network-aware's overlap above). Jobs with equal or nearly equal periods overlap on "
          "every iteration (two-jobs-one-link, testbed-small): interleaving removes that overlap "
          "at the price of a period headroom of about one standard deviation of the compute "
          "jitter (rounded up to a whole percent of the period). "
          "When periods are unrelated, two jobs can take turns only if one is stretched to a "
          "harmonic of the other; the planner does that only when the stretch costs less than the "
          "contention it avoids (priority-weighted, stage 2), and otherwise lets the job run "
          "best-effort: ungated at its natural pace, its phases drifting, yielding to the windows "
          "ranked above it. A job "
          "whose links carry only windows that fit side by side with its own (their heights add "
          "up to at most the link) is not gated at all. What gating costs: the "
          "headroom, the first phase under a "
          "moved slot waits for its window, and a phase later than its cushion (at least 3σ) goes "
          "at once and overlaps a little, one later than its window waits for the next one. So "
          "where the links that jobs share carry unrelated periods, Metronome gains little over "
          "network-aware placement, and a stretch that protects a high-priority job costs the "
          "stretched low-priority one: the priority-weighted JCT then moves differently from the "
          "plain average."]
    idle = [k for k in data if data[k]["network-aware"]["summary"]["overlap_fraction"] < 0.01]
    if idle:
        L.append("Network-aware placement leaves less than 1 % overlap on " + ", ".join(idle) +
                 ": there time scheduling has (almost) nothing to act on, and Metronome's gain "
                 "over k8s-default is its placement's.")
    split = [k for k in data
             if (data[k]["metronome"]["summary"]["weighted_jct_s"] <
                 data[k][BASE]["summary"]["weighted_jct_s"]) !=
             (data[k]["metronome"]["summary"]["avg_jct_s"] < data[k][BASE]["summary"]["avg_jct_s"])]
    for k in split:
        r = data[k]["metronome"]
        b = data[k][BASE]
        by_class = []
        for c in ("high", "normal", "low"):
            if c in r["by_priority"] and c in b["by_priority"]:
                by_class.append(f"{c} {b['by_priority'][c]['mean_slowdown']:.3f} → "
                                f"{r['by_priority'][c]['mean_slowdown']:.3f}")
        L.append(f"On {k} the weighted and the plain average JCT disagree: mean slowdown by "
                 f"class against k8s-default, " + ", ".join(by_class) + ".")
    L.append("")

    L += pairs_section(pair_rows, rel)
    L += load_sweep_section(args.runs)

    L += ["## Per scenario", ""]
    for key, title in SCENARIOS:
        if key not in data:
            continue
        runs = data[key]
        any_run = runs[BASE]
        L += [f"### {title} (`examples/scenarios/{key}.yaml`)", "",
              f"{len(any_run['jobs'])} jobs. Simulator run time per policy: "
              + ", ".join(f"{p} {runs[p]['summary']['wall_s']:.2f} s" for p in POLICIES if p in runs)
              + ".", "", summary_table(runs), ""]
        if key in ("mixed-priority-rack", "heterogeneous-13", "large-cluster", "testbed-small",
                   "newcomer-joins-pair"):
            L += ["Slowdown by priority class:", "", class_table(runs, POLICIES), ""]
        m = runs["metronome"]
        be = sum(1 for j in m["jobs"] if j["best_effort"])
        gated, stretch, inflate, wait = gated_stats(m)
        if gated:
            L += [f"Metronome's gated jobs ({gated}): mean timetable period over their gated "
                  f"phases / natural period {stretch:.3f}; mean communication phase / window "
                  f"{inflate:.3f} (above 1: slowed by best-effort or ungated traffic on its links); "
                  f"mean gate wait {100 * wait:.1f} % of the natural period.", ""]
        L += [f"Metronome's planner: {m['scheduler']['adds']} additions, {m['scheduler']['removes']} "
              f"removals, {m['scheduler']['controller_replans']} controller re-plans "
              f"({m['scheduler'].get('overrun_replans', 0)} for phases longer than their window), "
              f"{m['scheduler']['offline_runs']} offline searches ({m['scheduler']['offline_adopted']} "
              f"adopted), {m['scheduler']['planner_seconds'] * 1e3:.1f} ms of planner time; "
              f"{be} jobs ended best-effort.", ""]

    L += ["## Slowdown by priority class", "",
          f"![Slowdown by priority]({rel}/eval-slowdown-priority.png)", ""]
    L += ["## CDF of completion times", "", f"![JCT CDF]({rel}/eval-jct-cdf.png)", ""]

    L += ["## Ablations", "",
          "`metronome-pack`: Metronome's time scheduling on network-aware placement (no what-if "
          "scoring); `metronome-no-cushion`: the planner's cushion switch off "
          "(`PlannerOptions::cushion = false`: no minimum cushion for jitter and clock error, no "
          "stage 3, every late slack 0, so a phase that comes late at all collides or waits); "
          "`metronome-no-stretch`: no harmonic period stretching (`max_stretch = 1`: a job that "
          "does not fit at its natural period plus headroom runs best-effort); "
          "`metronome-no-controller`: no re-planning after arrivals beyond the one incremental "
          "placement, no departures processed, no drift correction, no offline search (details in "
          "[simulator.md](simulator.md)); `metronome-no-yields`: no job yields to the windows ranked "
          "above it (best-effort jobs run at their own pace).", "",
          "| scenario | " + " | ".join(f"{p} weighted JCT (s)" for p in ABLATIONS) + " |",
          "|---|" + "---:|" * len(ABLATIONS)]
    for key, _ in SCENARIOS:
        if key not in data:
            continue
        base = data[key]["metronome"]["summary"]["weighted_jct_s"]
        cells = []
        for p in ABLATIONS:
            v = data[key][p]["summary"]["weighted_jct_s"]
            cells.append(f"{v:.2f}" + ("" if p == "metronome" else f" (x{v / base:.3f})"))
        L.append(f"| {key} | " + " | ".join(cells) + " |")
    L += ["", f"![Ablations]({rel}/eval-ablations.png)", ""]

    L += ["## Simulator run time against cluster size", ""]
    if rows:
        L += ["Scenarios from the large cluster's recipe (`generate.py --scaling`), 2.3 jobs per node, "
              "100-300 iterations per job; and the full-size cluster (`generate.py --full-scale`: "
              "8,192 nodes of 8 GPUs in 1,024 racks, 10,000 jobs of 4-256 GPUs arriving over 55 "
              "minutes). Wall-clock time of one run on this machine (one core); simulated time is "
              "the run's makespan. The full-size cluster is not run under k8s-default: its random "
              "spread makes all transfers one connected set, re-solved at every start and end "
              "(docs/simulator.md).", "",
              "| nodes | jobs | policy | simulated (s) | events | run time (s) | of which planner (s) "
              "| peak memory (MiB) |",
              "|---:|---:|---|---:|---:|---:|---:|---:|"]
        for r in sorted(rows, key=lambda r: (r["nodes"], r["policy"])):
            sim_s = f"{r['simulated_s']:.0f}" if "simulated_s" in r else ""
            rss = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else ""
            L.append(f"| {r['nodes']} | {r['jobs']} | {r['policy']} | {sim_s} | {r['events']} | "
                     f"{r['wall_s']:.2f} | {r['planner_s']:.3f} | {rss} |")
        L += ["", f"![Run time]({rel}/eval-runtime.png)", ""]
    else:
        L += ["No scaling runs found.", ""]

    L += testbed_section(data, args.testbed)
    L += bench_section(args.bench)

    Path(args.report).write_text("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
