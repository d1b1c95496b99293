"""The emulated baseline's RFC 8219 throughput with Knot in XDP mode, and what limits it (issue 24, target c).

Prints figures; asserts nothing. The emulated baseline (client -> DUT1 -> DUT2 -> server, in-kernel IPv4
forwarding on both DUTs, setups.emulation) comes up once with Knot 3.2.6 (1 UDP worker, every thread pinned to
--knot-cpus) in --knot-io mode (default "xdp": Knot's own XDP program and AF_XDP socket on the server
namespace's veth) and xlatperf in the client namespace with --tester-io (default "xdp": AF_XDP on the client's
veth, --flows flows), its two threads and the client's receive steering on --tester-cpus, both DUTs (their
cpusets and receive steering) on --router-cpus (default: all on CPU 0, Knot alone on CPU 1). The suite's own
RFC 8219 binary search (scripts.search.rfc8219_search, its TrialRunner and verdict: loss <= 0.01 %, a
tester-limited trial retried twice, then "tester limit reached") runs --repetitions times between --min-rate
(taken to pass, as RFC 8219's search does) and --max-rate to --error-ratio, --duration s per trial. --rates
instead measures those fixed rates once each. Every trial records, beside the suite's result:

- knotd's CPU: user + system of all its threads (/proc/PID/stat) over the trial, as a share of one core
  over the trial's scheduled window (its AF_XDP syscalls and the reply transmit they run are in it), and per
  thread its ms on the CPU, ms waiting on a run queue and context switches (/proc/PID/task/TID/schedstat);
- each CPU's busy and softirq share (/proc/stat over the whole trial, start and end included) and the CPU
  time of the kernel's ksoftirqd threads (softirq work deferred to a thread competes with knotd there);
- the tester's own CPU (xlatperf's JSON: CPU-seconds per million queries sent) and its XDP_STATISTICS;
- both veth ends of the server link and the client link: `ip -s link` drops and the driver's per-queue
  counters (`ethtool -S`: a failed redirect into a full AF_XDP ring is rx_queue_0_drops of that end);
- knotd's AF_XDP socket as `ss --xdp` shows it (ring sizes, and its XDP_STATISTICS where the kernel gives
  them: rx dropped, rx queue full, fill ring empty...), before and after.

--tester-arg passes an xlatperf option through (repeatable, e.g. --tester-arg=--send-tick=0.0002).
--knot-nice N renices every knotd thread after start (an experiment: it did not help, docs/benchmarks.md).

Run as root, under the machine lock on a shared machine (one repetition of 10 s trials: about 2 minutes):
    flock /tmp/xlatbench-machine.lock env XLATBENCH_BUILD=/work/build-snapshot .venv/bin/python \\
        dnsperf/bench/baseline_xdp_search.py --duration 10 --out baseline-xdp.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The sibling scripts' readers (python puts this script's directory first on the path).
from knot_io_bench import cpu_seconds
from xdp_bench import end_counters

from xlatbench.cpuload import read_jiffies, usage_between
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.search import rfc8219_search, verdict
from xlatbench.scripts.search.runner import TrialRunner
from xlatbench.scripts.search.settings import SearchSettings
from xlatbench.scripts.trial import DEFAULT_LOSS_RATIO, TrialResult
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.chain import client_interface
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig


def link_counters(netns: str, ifname: str) -> dict[str, int]:
    """One veth end's `ip -s link` drops and packets and its driver's counters (`ethtool -S`), in netns."""
    return end_counters(["ip", "netns", "exec", netns], ifname)


def xdp_sockets(netns: str) -> str:
    """`ss --xdp` of a namespace with memory (ring) details and extended info, as one line per socket."""
    out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-a", "-n", "-e", "-m", "-i", "--xdp"],
                         capture_output=True, text=True, check=False).stdout
    return " ".join(out.split())


def ksoftirqd_pids() -> dict[str, int]:
    """CPU number -> pid of its ksoftirqd thread."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("ksoftirqd/"):
                found[comm.split("/", 1)[1]] = int(entry.name)
    return found


def thread_sched(pid: int) -> dict[str, dict[str, int]]:
    """Per thread of pid (by name, numbered when repeated): ns on CPU and ns waiting on a run queue
    (/proc/PID/task/TID/schedstat), voluntary and involuntary context switches (status)."""
    found: dict[str, dict[str, int]] = {}
    for task in sorted(Path(f"/proc/{pid}/task").iterdir(), key=lambda t: int(t.name)):
        try:
            name = (task / "comm").read_text().strip()
            run_ns, wait_ns, _ = ((task / "schedstat").read_text().split() + ["0", "0", "0"])[:3]
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                          if ":\t" in line)
        except OSError:
            continue
        key = name if name not in found else f"{name}#{task.name}"
        found[key] = {"run_ns": int(run_ns), "wait_ns": int(wait_ns),
                      "voluntary": int(status.get("voluntary_ctxt_switches", "0")),
                      "involuntary": int(status.get("nonvoluntary_ctxt_switches", "0"))}
    return found


def sched_changes(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Threads that ran during the trial: ms on CPU, ms waiting for it, context switches."""
    out = {}
    for name, now in after.items():
        was = before.get(name, {})
        delta = {k: v - was.get(k, 0) for k, v in now.items()}
        if delta["run_ns"] > 1_000_000:
            out[name] = {"run_ms": round(delta["run_ns"] / 1e6, 1),
                         "runqueue_wait_ms": round(delta["wait_ns"] / 1e6, 1),
                         "voluntary": delta["voluntary"], "involuntary": delta["involuntary"]}
    return out


def changes(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


@dataclass
class WatchedMeasurer:
    """The suite's ChainMeasurer, with knotd's, the kernel threads' and each CPU's time and the links'
    counters recorded around every trial (trials: one dict per trial, in order)."""

    inner: ChainMeasurer
    knotd_pid: int
    links: dict[str, tuple[str, str]]  # label -> (namespace, interface)
    server_netns: str
    trials: list[dict[str, Any]] = field(default_factory=list)

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        softirqd = ksoftirqd_pids()
        knot0, ticks0 = cpu_seconds(self.knotd_pid), read_jiffies()
        soft0 = {c: cpu_seconds(p) for c, p in softirqd.items()}
        links0 = {label: link_counters(*where) for label, where in self.links.items()}
        xsk0, sched0 = xdp_sockets(self.server_netns), thread_sched(self.knotd_pid)
        result = self.inner.measure(duration_s, rate_qps)
        knot = cpu_seconds(self.knotd_pid) - knot0
        sched = sched_changes(sched0, thread_sched(self.knotd_pid))
        usage = usage_between(ticks0, read_jiffies())
        soft = {c: round(cpu_seconds(p) - soft0[c], 3) for c, p in softirqd.items()}
        links = {label: changes(links0[label], link_counters(*where)) for label, where in self.links.items()}
        raw = result.raw or {}
        io = raw.get("io") or {}
        trial = {
            "rate_qps": rate_qps, "duration_s": duration_s, "sent": result.sent, "valid": result.valid,
            "loss_pct": round(100 * result.loss_ratio, 4) if result.sent else None,
            "verdict": verdict(result, DEFAULT_LOSS_RATIO), "tester_reasons": list(result.reasons),
            "knotd_cpu_s": round(knot, 3), "knotd_core_share": round(knot / duration_s, 3),
            "cpu_busy_pct": {c: round(100 - u["idle"] - u.get("iowait", 0.0) - u.get("steal", 0.0), 1)
                             for c, u in usage.items() if c != "all"},
            "cpu_softirq_pct": {c: round(u.get("softirq", 0.0), 1) for c, u in usage.items() if c != "all"},
            "cpu_steal_pct": {c: round(u.get("steal", 0.0), 1) for c, u in usage.items() if c != "all"},
            "ksoftirqd_cpu_s": soft, "knotd_threads": sched,
            "tester_cpu": raw.get("cpu"), "tester_xdp_statistics": io.get("xdp_statistics"),
            "tester_frames_per_kick": io.get("frames_per_kick"),
            "tester_io": {k: io.get(k) for k in ("frames_sent", "kicks", "tx_ring_waits", "tester_drops")},
            "max_queries_in_100us": (raw.get("send") or {}).get("max_queries_in_100us"),
            "max_lag_s": (raw.get("send") or {}).get("max_lag_s"),
            "links": links, "knot_xsk_before": xsk0, "knot_xsk_after": xdp_sockets(self.server_netns),
        }
        self.trials.append(trial)
        print(trial_line(trial), file=sys.stderr, flush=True)
        return result

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def trial_line(t: dict[str, Any]) -> str:
    drops = ", ".join(f"{label} {name.removeprefix('ethtool:')} {value:,}"
                      for label, changed in t["links"].items() for name, value in changed.items()
                      if "drop" in name or "full" in name or "err" in name)
    tester = t["tester_cpu"] or {}
    return (f"{t['rate_qps']:>9,.0f} q/s: sent {t['sent']:,}, valid {t['valid']:,} ({t['loss_pct']} % lost), "
            f"{t['verdict']}; knotd {t['knotd_core_share']:.2f} of a core; CPU busy {t['cpu_busy_pct']} % "
            f"(softirq {t['cpu_softirq_pct']} %, steal {t['cpu_steal_pct']} %); "
            f"ksoftirqd {t['ksoftirqd_cpu_s']} CPU-s; tester "
            f"{tester.get('per_million_sent_s')} CPU-s per M sent; knotd threads {t['knotd_threads']}; "
            f"drops: {drops or 'none'}"
            + (f"; tester: {'; '.join(t['tester_reasons'])}" if t["tester_reasons"] else ""))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--knot-io", choices=("socket", "xdp"), default="xdp")
    p.add_argument("--tester-io", choices=("socket", "xdp"), default="xdp")
    p.add_argument("--flows", type=int, default=64, help="tester flows (ports of one address)")
    p.add_argument("--knot-cpus", default="1", help="CPU list of every knotd thread (default: %(default)s)")
    p.add_argument("--tester-cpus", default="0",
                   help="CPU of the tester's threads and the client's receive steering "
                        "(default: %(default)s)")
    p.add_argument("--router-cpus", default="0",
                   help="CPUs of both forwarding DUTs (default: %(default)s)")
    p.add_argument("--duration", type=float, default=10.0, help="s per trial (default: %(default)s)")
    p.add_argument("--rest", type=float, default=1.0, help="s between trials (default: %(default)s)")
    p.add_argument("--min-rate", type=float, default=100_000.0)
    p.add_argument("--max-rate", type=float, default=800_000.0)
    p.add_argument("--error-ratio", type=float, default=0.03)
    p.add_argument("--repetitions", type=int, default=1)
    p.add_argument("--rates", help="fixed rates instead of a search, queries/s, comma-separated")
    p.add_argument("--knot-nice", type=int, help="renice every knotd thread to this value after start")
    p.add_argument("--tester-arg", action="append", default=[], help="an xlatperf option, passed as is")
    p.add_argument("--out", type=Path, help="write every trial and the outcomes as JSON here")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        p.error("run as root (namespaces, knotd, XDP), under the machine lock on a shared machine")
    return args


def cpus(text: str) -> tuple[int, ...]:
    return tuple(int(c) for c in text.split(","))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tester_cpu = cpus(args.tester_cpus)
    config = EmulationConfig("baseline", prefix="xbx" + secrets.token_hex(2), knot_cpus=cpus(args.knot_cpus),
                             client_cpus=tester_cpu, dut_cpus=cpus(args.router_cpus),
                             knot_io=args.knot_io)
    tester = TesterOptions(sender_cpus=args.tester_cpus, receiver_cpus=args.tester_cpus, io=args.tester_io,
                           ports_per_thread=args.flows, first_port=20000,
                           extra_args=tuple(args.tester_arg))
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    outcomes = []
    with EmulatedChain.up(config) as chain:
        emulation = chain.emulation
        knot = chain.describe()["knot"]
        if args.knot_nice is not None:
            for task in Path(f"/proc/{knot['pid']}/task").iterdir():
                os.setpriority(os.PRIO_PROCESS, int(task.name), args.knot_nice)
        links = {"server": (emulation.netns_of["server"], emulation.server_interface()),
                 "client": (emulation.netns_of["client"], client_interface(emulation.topology))}
        watched = WatchedMeasurer(ChainMeasurer(chain, tester), int(knot["pid"]), links,
                                  emulation.netns_of["server"])
        print(f"knotd {knot.get('version')} io {knot.get('io')} pid {knot['pid']}; knot's AF_XDP socket: "
              f"{xdp_sockets(emulation.netns_of['server']) or 'none'}", file=sys.stderr, flush=True)
        if args.rates:
            for rate in (float(r) for r in args.rates.split(",")):
                watched.measure(args.duration, rate)
        else:
            settings = SearchSettings(max_rate_qps=args.max_rate, min_rate_qps=args.min_rate,
                                      error_ratio=args.error_ratio, duration_s=args.duration,
                                      rest_s=args.rest,
                                      repetitions=args.repetitions, short_rest_s=args.rest)
            runner = TrialRunner(watched)
            for repetition in range(args.repetitions):
                outcome = rfc8219_search(runner, settings, f"baseline-xdp-{repetition}")
                print(f"search {repetition}: {outcome.describe()}", file=sys.stderr, flush=True)
                outcomes.append({"status": outcome.status, "throughput_qps": outcome.throughput_qps,
                                 "tester_limit_qps": outcome.tester_limit_qps, "text": outcome.describe(),
                                 "bracket_qps": [outcome.lower_qps, outcome.upper_qps]})
    doc = {"started_utc": started, "kernel": os.uname().release, "load_average": os.getloadavg(),
           "conditions": {"topology": "baseline (in-kernel IPv4 forwarding)", "knot_io": args.knot_io,
                          "knot": {k: knot.get(k) for k in ("version", "udp_workers", "io", "xdp")},
                          "knot_cpus": args.knot_cpus, "knot_nice": args.knot_nice,
                          "tester_cpus": args.tester_cpus,
                          "router_cpus": args.router_cpus,
                          "tester": {"io": args.tester_io, "flows": args.flows,
                                     "extra_args": args.tester_arg},
                          "duration_s": args.duration, "rest_s": args.rest, "loss_ratio": DEFAULT_LOSS_RATIO,
                          "search": None if args.rates else {"min": args.min_rate, "max": args.max_rate,
                                                             "error_ratio": args.error_ratio}},
           "outcomes": outcomes, "trials": watched.trials}
    text = json.dumps(doc, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
