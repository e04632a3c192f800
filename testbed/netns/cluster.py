#!/usr/bin/python3
"""A small cluster on one machine: hosts as network namespaces, links as shaped veth pairs.

From the `topology:` part of a scenario file (the simulator's format) it builds

    node ns  --eth0 (nic rate)--  rack ns (bridge br0, router)  --up0 (uplink rate)--  core ns
    node ns  --eth1 (unshaped)--  mgmt ns (bridge)  --  sched ns (where the scheduler listens)

Every link is shaped in both directions with a token bucket (tc tbf) at the topology's capacity,
so the rack uplinks are the shared bottleneck between racks; under it, pure TCP ACKs are served
before data. Addresses come from 198.18.0.0/15 (reserved for benchmarking) and exist only inside
these namespaces. Link utilization is read from the kernel's interface counters.

Rates: `nic_gbps` / `uplink_gbps` as in the simulator, or `nic_mbps` / `uplink_mbps`; on one
machine, rates of a few hundred Mbit/s keep the CPU cost of shaping honest.

CLI:  cluster.py up TOPOLOGY.yaml [--prefix P]   builds it and waits; Ctrl-C tears it down
      cluster.py down [--prefix P]               removes any leftovers with that prefix
"""
from __future__ import annotations

import argparse
import atexit
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import yaml

DEFAULT_PREFIX = "mtr"


class ClusterError(RuntimeError):
    pass


@dataclass
class Node:
    name: str
    rack: str
    nic_bps: int
    gpus: int = 1
    gpu: str = ""
    index: int = 0  # position in its rack
    data_ip: str = ""
    mgmt_ip: str = ""


@dataclass
class Rack:
    name: str
    uplink_bps: int
    index: int
    nodes: list[Node] = field(default_factory=list)


def _rate_bps(spec: dict, key: str, where: str) -> int:
    if f"{key}_mbps" in spec:
        value = float(spec[f"{key}_mbps"]) * 1e6
    elif f"{key}_gbps" in spec:
        value = float(spec[f"{key}_gbps"]) * 1e9
    else:
        raise ClusterError(f"{where}: missing '{key}_gbps' (or '{key}_mbps')")
    if not value > 0:
        raise ClusterError(f"{where}: '{key}' rate must be positive")
    return int(value)


@dataclass
class Topology:
    racks: list[Rack]

    @property
    def nodes(self) -> list[Node]:
        return [n for r in self.racks for n in r.nodes]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ClusterError(f"unknown node '{name}'")

    @staticmethod
    def from_dict(doc: dict) -> "Topology":
        topo = doc.get("topology", doc)
        if not isinstance(topo, dict) or not isinstance(topo.get("racks"), list) or not topo["racks"]:
            raise ClusterError("topology: expected a non-empty list 'racks'")
        if len(topo["racks"]) > 200:
            raise ClusterError("topology: at most 200 racks fit the address plan")
        racks, seen = [], set()
        for ri, r in enumerate(topo["racks"]):
            where = f"topology.racks[{ri}]"
            if not isinstance(r, dict) or "name" not in r:
                raise ClusterError(f"{where}: needs a 'name'")
            rack = Rack(str(r["name"]), _rate_bps(r, "uplink", where), ri + 1)
            nodes = r.get("nodes") or []
            if not isinstance(nodes, list) or not nodes or len(nodes) > 200:
                raise ClusterError(f"{where}.nodes: expected 1..200 nodes")
            for ni, n in enumerate(nodes):
                nwhere = f"{where}.nodes[{ni}]"
                if not isinstance(n, dict) or "name" not in n:
                    raise ClusterError(f"{nwhere}: needs a 'name'")
                name = str(n["name"])
                if name in seen:
                    raise ClusterError(f"{nwhere}: duplicate node name '{name}'")
                seen.add(name)
                node = Node(name, rack.name, _rate_bps(n, "nic", nwhere), int(n.get("gpus", 1)),
                            str(n.get("gpu", "")), ni)
                node.data_ip = f"198.18.{rack.index}.{10 + ni}"
                node.mgmt_ip = f"198.19.255.{10 + len(seen) - 1}"
                rack.nodes.append(node)
            racks.append(rack)
        if len(seen) > 240:
            raise ClusterError("topology: at most 240 nodes fit the management network")
        return Topology(racks)

    @staticmethod
    def load(path: str) -> "Topology":
        with open(path) as f:
            return Topology.from_dict(yaml.safe_load(f))


def _cpu_mask(cpus: int) -> str:
    """The sysfs CPU mask of CPUs 0..cpus-1: hex, in comma-separated groups of 32 bits."""
    value = (1 << cpus) - 1
    groups = []
    while True:
        groups.append(f"{value & 0xFFFFFFFF:08x}")
        value >>= 32
        if not value:
            break
    return ",".join(reversed(groups))


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise ClusterError(f"'{' '.join(argv)}' failed: {p.stderr.strip() or p.stdout.strip()}")
    return p


def require_privileges() -> None:
    """Refuses to go on, with a clear message, unless namespaces and tc can be used."""
    if os.geteuid() != 0:
        raise ClusterError("the namespace cluster needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): "
                           "run it as root")
    for tool in ("ip", "tc"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            raise ClusterError(f"'{tool}' is missing: install iproute2 (scripts/setup.sh)")
    probe = f"mtr-probe-{os.getpid()}"
    p = run("ip", "netns", "add", probe, check=False)
    if p.returncode != 0:
        raise ClusterError(f"cannot create network namespaces here: {p.stderr.strip()}")
    run("ip", "netns", "del", probe, check=False)


class Cluster:
    """Builds the namespaces for a topology; removes them on down(), at exit and on signals."""

    def __init__(self, topo: Topology, prefix: str = DEFAULT_PREFIX):
        self.topo = topo
        self.prefix = prefix
        self.namespaces: list[str] = []
        self.anchors: dict[str, subprocess.Popen] = {}
        self._up = False

    # -- names ---------------------------------------------------------------------------------
    def ns(self, what: str) -> str:
        return f"{self.prefix}-{what}"

    def node_ns(self, node: str) -> str:
        return self.ns(f"n-{node}")

    @property
    def sched_ns(self) -> str:
        return self.ns("sched")

    sched_ip = "198.19.255.1"

    def rack_uplink(self, rack: str) -> tuple[str, str]:
        """(namespace, device) whose tx counter is the rack's traffic towards the core."""
        return self.ns(f"r-{rack}"), "up0"

    def rack_downlink(self, rack: str) -> tuple[str, str]:
        """(namespace, device) whose tx counter is the core's traffic into the rack."""
        r = next(x for x in self.topo.racks if x.name == rack)
        return self.ns("core"), f"r{r.index}"

    # -- building ------------------------------------------------------------------------------
    def _add_ns(self, name: str) -> None:
        run("ip", "netns", "add", name)
        self.namespaces.append(name)
        run("ip", "-n", name, "link", "set", "lo", "up")
        # A process that lives in the namespace: its /proc/PID/net/dev shows the namespace's
        # interface counters, read without spawning anything (fast enough to sample every 10 ms).
        anchor = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "infinity"])
        self.anchors[name] = anchor

    def tx_bytes(self, ns: str, dev: str) -> int:
        """The interface's transmitted-bytes counter, from the kernel (/proc/PID/net/dev)."""
        with open(f"/proc/{self.anchors[ns].pid}/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == dev:
                    return int(rest.split()[8])
        raise ClusterError(f"no interface {dev} in {ns}")

    def qdisc_drops(self, ns: str, dev: str) -> int:
        """Packets the link's shaper dropped (queue full) since it was set up (tc -s)."""
        out = run("ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev).stdout
        m = re.search(r"dropped (\d+)", out)
        return int(m.group(1)) if m else 0

    @staticmethod
    def acks_first_enabled() -> bool:
        """Whether links are built with pure ACKs first (METRONOME_TESTBED_ACK_FIRST, default 1)."""
        return os.environ.get("METRONOME_TESTBED_ACK_FIRST", "1") != "0"

    def acks_first_packets(self, ns: str, dev: str) -> int | None:
        """Packets the link sent ahead of data as pure ACKs since it was set up; None when the
        link has no ACK priority (METRONOME_TESTBED_ACK_FIRST=0, or a kernel without it)."""
        out = run("ip", "netns", "exec", ns, "tc", "-s", "class", "show", "dev", dev,
                  "classid", "10:10", check=False).stdout
        m = re.search(r"Sent \d+ bytes (\d+) pkt", out)
        return int(m.group(1)) if m else None

    def tcp_counters(self, ns: str) -> dict[str, int]:
        """The namespace's TCP counters that explain stalls: segments retransmitted
        (Tcp: RetransSegs), retransmission timeouts (TcpExt: TCPTimeouts), tail loss probes
        (TCPLossProbes), and reordering: detected by the sender (TCPSACKReorder; a loss alone
        does not count) and segments the receiver dropped by PAWS (PAWSEstab), which reordering
        causes, from /proc/PID/net/snmp and /proc/PID/net/netstat."""
        out = {}
        for table, prefix, keys in (("snmp", "Tcp:", ("RetransSegs",)),
                                    ("netstat", "TcpExt:", ("TCPTimeouts", "TCPLossProbes",
                                                            "TCPSACKReorder", "PAWSEstab"))):
            with open(f"/proc/{self.anchors[ns].pid}/net/{table}") as f:
                rows = [line.split() for line in f if line.startswith(prefix)]
            for k in keys:
                out[k] = int(rows[1][rows[0].index(k)])
        return out

    def _veth(self, ns_a: str, dev_a: str, ns_b: str, dev_b: str) -> None:
        tmp_a, tmp_b = f"t{os.getpid() % 100000}a{len(self.namespaces)}", f"t{os.getpid() % 100000}b{len(self.namespaces)}"
        run("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        run("ip", "link", "set", tmp_a, "netns", ns_a, "name", dev_a)
        run("ip", "link", "set", tmp_b, "netns", ns_b, "name", dev_b)
        for ns, dev in ((ns_a, dev_a), (ns_b, dev_b)):
            # Segmentation offloads make tbf see 64 KiB packets; shaping is more even without.
            run("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
                "gro", "off", check=False)
            run("ip", "-n", ns, "link", "set", dev, "up")
            self._steer_by_flow(ns, dev)

    @staticmethod
    def _steer_by_flow(ns: str, dev: str) -> None:
        # A veth hands each packet to the backlog of the CPU that sent it. When a link's shaper
        # is drained now from one CPU, now from the other, a flow's packets sit in two backlogs
        # and arrive out of order: the receiver then drops segments by PAWS (about 2,000 per
        # demo run) and the sender retransmits spuriously (about 300). Receive packet steering
        # by flow hash keeps each flow on one CPU's backlog, in order, as a real switch keeps a
        # flow on one path.
        mask = _cpu_mask(os.cpu_count() or 1)
        p = run("ip", "netns", "exec", ns, "sh", "-c",
                f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus", check=False)
        if p.returncode != 0:  # a kernel without RPS: the links may reorder (the demo counts it)
            print(f"cluster: warning: no flow steering on {ns}/{dev}: {p.stderr.strip()}",
                  file=sys.stderr)

    @staticmethod
    def _shape(ns: str, dev: str, rate_bps: int) -> None:
        # Bucket of ~2 ms at line rate (at least 16 KB), queue of ~50 ms: close to a switch port.
        # Pure ACKs go first (METRONOME_TESTBED_ACK_FIRST=0: not).
        burst = max(16_000, rate_bps // 8 // 500)
        limit = max(64_000, rate_bps // 8 // 20)
        tc = ("ip", "netns", "exec", ns, "tc")
        run(*tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "tbf",
            "rate", f"{rate_bps}bit", "burst", str(burst), "limit", str(limit))
        if not Cluster.acks_first_enabled():
            return
        try:
            Cluster._acks_first(tc, dev, limit)
        except ClusterError as e:  # a kernel without htb or u32: a plain tbf, built anew
            run(*tc, "qdisc", "del", "dev", dev, "root", check=False)
            run(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
                "rate", f"{rate_bps}bit", "burst", str(burst), "limit", str(limit))
            print(f"cluster: warning: ACKs are not sent first on {ns}/{dev}: {e}", file=sys.stderr)

    @staticmethod
    def _acks_first(tc: tuple[str, ...], dev: str, limit: int) -> None:
        # A collective sends both ways on one TCP connection, so each direction's ACKs queue
        # behind the other direction's data: with the queue full (50 ms) the sender, out of
        # window, stops for that long in the middle of a phase (docs/testbed.md). Under the tbf,
        # an unshaped htb serves two FIFOs in strict priority: segments without payload (IP
        # total length = 20 + TCP header length, for the header lengths of no options,
        # timestamps, and timestamps with 1-3 SACK blocks), then everything else in order.
        # Only pure ACKs overtake, so no data is reordered.
        run(*tc, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "htb",
            "default", "20", "r2q", "100000")
        run(*tc, "class", "add", "dev", dev, "parent", "10:", "classid", "10:1", "htb",
            "rate", "10gbit")
        for cls, prio in (("10:10", "0"), ("10:20", "1")):
            run(*tc, "class", "add", "dev", dev, "parent", "10:1", "classid", cls, "htb",
                "rate", "5gbit", "ceil", "10gbit", "prio", prio)
        run(*tc, "qdisc", "add", "dev", dev, "parent", "10:10", "pfifo", "limit", "1000")
        run(*tc, "qdisc", "add", "dev", dev, "parent", "10:20", "bfifo", "limit", str(limit))
        for total, doff in ((40, 5), (52, 8), (64, 11), (72, 13), (80, 15)):
            run(*tc, "filter", "add", "dev", dev, "parent", "10:", "protocol", "ip", "prio", "1",
                "u32", "match", "ip", "protocol", "6", "0xff",
                "match", "u8", "0x05", "0x0f", "at", "0",           # IP header of 20 bytes
                "match", "u16", str(total), "0xffff", "at", "2",   # IP total length
                "match", "u8", hex(doff << 4), "0xf0", "at", "32",  # TCP header length
                "flowid", "10:10")

    def up(self) -> "Cluster":
        require_privileges()
        self.down_leftovers()
        atexit.register(self.down)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        self._up = True
        try:
            self._build()
        except Exception:
            self.down()
            raise
        return self

    def _on_signal(self, signum, _frame):
        self.down()
        sys.exit(128 + signum)

    def _build(self) -> None:
        core, mgmt = self.ns("core"), self.ns("mgmt")
        self._add_ns(core)
        self._add_ns(mgmt)
        self._add_ns(self.sched_ns)
        run("ip", "netns", "exec", core, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        run("ip", "-n", mgmt, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", mgmt, "link", "set", "br0", "up")
        self._veth(self.sched_ns, "eth0", mgmt, "s0")
        run("ip", "-n", mgmt, "link", "set", "s0", "master", "br0")
        run("ip", "-n", self.sched_ns, "addr", "add", f"{self.sched_ip}/24", "dev", "eth0")

        for rack in self.topo.racks:
            rns = self.ns(f"r-{rack.name}")
            self._add_ns(rns)
            run("ip", "netns", "exec", rns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
            run("ip", "-n", rns, "link", "add", "br0", "type", "bridge")
            run("ip", "-n", rns, "link", "set", "br0", "up")
            run("ip", "-n", rns, "addr", "add", f"198.18.{rack.index}.1/24", "dev", "br0")
            # Rack uplink to the core, shaped both ways: the shared bottleneck between racks.
            self._veth(rns, "up0", core, f"r{rack.index}")
            run("ip", "-n", rns, "addr", "add", f"198.19.{rack.index}.2/30", "dev", "up0")
            run("ip", "-n", core, "addr", "add", f"198.19.{rack.index}.1/30", "dev", f"r{rack.index}")
            run("ip", "-n", rns, "route", "add", "default", "via", f"198.19.{rack.index}.1")
            run("ip", "-n", core, "route", "add", f"198.18.{rack.index}.0/24", "via",
                f"198.19.{rack.index}.2")
            self._shape(rns, "up0", rack.uplink_bps)
            self._shape(core, f"r{rack.index}", rack.uplink_bps)

            for node in rack.nodes:
                nns = self.node_ns(node.name)
                self._add_ns(nns)
                port = f"p{node.index}"
                self._veth(nns, "eth0", rns, port)
                run("ip", "-n", rns, "link", "set", port, "master", "br0")
                run("ip", "-n", nns, "addr", "add", f"{node.data_ip}/24", "dev", "eth0")
                run("ip", "-n", nns, "route", "add", "default", "via", f"198.18.{rack.index}.1")
                # Periodic bursts: without this, TCP restarts from slow start after every compute
                # phase and each burst takes longer than its bytes need (both runs alike).
                run("ip", "netns", "exec", nns, "sysctl", "-qw",
                    "net.ipv4.tcp_slow_start_after_idle=0")
                self._shape(nns, "eth0", node.nic_bps)
                self._shape(rns, port, node.nic_bps)
                # Management network: unshaped, only for the scheduler's control traffic.
                mport = f"m{len(self.namespaces)}"
                self._veth(nns, "eth1", mgmt, mport)
                run("ip", "-n", mgmt, "link", "set", mport, "master", "br0")
                run("ip", "-n", nns, "addr", "add", f"{node.mgmt_ip}/24", "dev", "eth1")

    def down_leftovers(self) -> None:
        p = run("ip", "netns", "list", check=False)
        for line in p.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(self.prefix + "-"):
                self._remove_ns(name)

    @staticmethod
    def _remove_ns(name: str) -> None:
        pids = run("ip", "netns", "pids", name, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        run("ip", "netns", "del", name, check=False)

    def down(self) -> None:
        if not self._up:
            return
        self._up = False
        for name in reversed(self.namespaces):
            self._remove_ns(name)
        for anchor in self.anchors.values():
            anchor.kill()  # already killed with its namespace, unless that failed: never wait on it
            anchor.wait()
        self.namespaces.clear()
        self.anchors.clear()

    # -- using ---------------------------------------------------------------------------------
    def popen(self, node_or_ns: str, argv: list[str], **kw) -> subprocess.Popen:
        ns = node_or_ns if node_or_ns.startswith(self.prefix + "-") else self.node_ns(node_or_ns)
        return subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kw)

    def ping(self, src_node: str, dst_node: str) -> bool:
        dst = self.topo.node(dst_node).data_ip
        p = run("ip", "netns", "exec", self.node_ns(src_node), "ping", "-c", "1", "-W", "2", dst,
                check=False)
        return p.returncode == 0


class LinkSampler:
    """Samples tx counters of some (ns, dev) pairs at a fixed interval, in a background thread."""

    def __init__(self, cluster: "Cluster", links: dict[str, tuple[str, str]],
                 interval_s: float = 0.01):
        import threading
        self.cluster = cluster
        self.links = links
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            self.samples.append((now, {k: self.cluster.tx_bytes(*v) for k, v in self.links.items()}))
            self._stop.wait(self.interval_s)

    def start(self) -> "LinkSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def utilization(self, link: str, capacity_bps: int, t0: float | None = None,
                    t1: float | None = None) -> float:
        """Mean utilization of `link` over [t0, t1] (whole run by default), from the counters."""
        pts = [(t, c[link]) for t, c in self.samples
               if (t0 is None or t >= t0) and (t1 is None or t <= t1)]
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return 0.0
        return (pts[-1][1] - pts[0][1]) * 8 / (pts[-1][0] - pts[0][0]) / capacity_bps

    def overlap(self, senders: list[str], threshold_bps: float, t0: float = 0.0) -> float:
        """Share of the sampled time (from t0) during which some of `senders` transmitted at
        least `threshold_bps` that two or more of them did: contention as the wire saw it."""
        any_active = both = 0.0
        for (ta, ca), (tb, cb) in zip(self.samples, self.samples[1:]):
            if ta < t0 or tb <= ta:
                continue
            active = sum((cb[k] - ca[k]) * 8 / (tb - ta) >= threshold_bps for k in senders)
            if active >= 1:
                any_active += tb - ta
            if active >= 2:
                both += tb - ta
        return both / any_active if any_active > 0 else 0.0

    def active_spans(self, key: str, threshold_bps: float) -> list[tuple[float, float]]:
        """(start, end) of the sampled intervals in which `key` transmitted at least
        `threshold_bps`, adjacent ones merged: when it was on the wire."""
        spans: list[tuple[float, float]] = []
        for (ta, ca), (tb, cb) in zip(self.samples, self.samples[1:]):
            if tb <= ta or (cb[key] - ca[key]) * 8 / (tb - ta) < threshold_bps:
                continue
            if spans and spans[-1][1] >= ta:
                spans[-1] = (spans[-1][0], tb)
            else:
                spans.append((ta, tb))
        return spans

    def series(self, link: str) -> list[tuple[float, float]]:
        """(time, bits/s) per sampling interval."""
        out = []
        for (ta, ca), (tb, cb) in zip(self.samples, self.samples[1:]):
            if tb > ta:
                out.append((tb, (cb[link] - ca[link]) * 8 / (tb - ta)))
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("command", choices=["up", "down"])
    ap.add_argument("topology", nargs="?")
    ap.add_argument("--prefix", default=DEFAULT_PREFIX)
    a = ap.parse_args()
    try:
        if a.command == "down":
            Cluster(Topology([]), a.prefix).down_leftovers()
            return 0
        if not a.topology:
            ap.error("up needs a topology file")
        cluster = Cluster(Topology.load(a.topology), a.prefix).up()
        for n in cluster.topo.nodes:
            print(f"{n.name:12} ns {cluster.node_ns(n.name):20} data {n.data_ip:15} "
                  f"mgmt {n.mgmt_ip:15} nic {n.nic_bps / 1e6:.0f} Mbit/s")
        print(f"scheduler ns {cluster.sched_ns} at {cluster.sched_ip}; Ctrl-C tears it all down")
        signal.pause()
    except ClusterError as e:
        print(f"cluster: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
