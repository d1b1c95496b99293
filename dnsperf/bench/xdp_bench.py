"""Issue 24's AF_XDP benchmark: kxdpgun against xlatperf (sockets and --io xdp), Knot in socket and XDP mode.

Prints figures and the issue's targets; asserts nothing. A veth pair runs from the root namespace into a
namespace where knotd answers (dnsperf/bench/xdplink.py; 1 UDP worker, every thread pinned to CPU 1), for
each Knot mode of --knot-io in turn: socket mode (the kernel's UDP sockets) and XDP mode (Knot's own XDP
program and AF_XDP sockets on the namespace's end, zones.KnotConfig.xdp_interface). The generators run
in the root namespace, one at a time, pinned to CPU 0: kxdpgun (Knot's AF_XDP generator, its own XDP
program on the root end), xlatperf with sockets, xlatperf --io xdp (its reply filter on the root end),
and on request the AF_XDP layer's own driver build/dnsperf/xdp_probe. xlatperf runs through the suite's
measurer (scripts.measurers.LoopbackMeasurer: its JSON, its verdict, a dead knotd voids the trial); every
trial is judged by the suite's one verdict (scripts.search.verdict, loss <= 0.01 %). For each Knot mode
it measures, in one run:

1. CPU-seconds per million queries at fixed rates (--rates), every generator at each rate in turn:
   the generator's CPU (user + system of the child, getrusage; its AF_XDP or socket syscalls are in it,
   the veth receive softirq that runs an XDP program on the other CPU is not), per million queries sent
   and, for xlatperf, per million valid replies (matched to their query, right name, in time); kxdpgun
   matches nothing, so its per-reply figure counts every reply it saw;
2. the highest rate each generator offers on schedule: xlatperf when its JSON shows every scheduled query
   sent, none later than its --max-lag (20 ms) and no egress drop (its stricter 2 ms check of the window's
   end, which kxdpgun's figures cannot match, is left out: xlatperf_on_schedule);
   kxdpgun when it sent at least rate x duration less the slack xlatperf's own send bound allows
   (rate x (max(1e-5 x duration, 2 ms) + 20 ms)) and the tester's veth end dropped nothing it sent
   (kxdpgun has no lag figure: one that fell behind and caught up counts as on schedule);
3. the highest passing rate: the suite's verdict "pass" (every query answered validly but at most
   0.01 %, the tester not limited; for kxdpgun: replies counted, on schedule).
Searches 2 and 3 bisect a grid of rates (--search LOW:HIGH:STEP, default 50 000 to 650 000 queries/s in
steps of 25 000: at most 5 trials each), all searches of a Knot mode in round-robin so that a drifting load
hits every generator alike; a trial at a rate already measured (a fixed rate, the other search's) is
reused, not repeated. The answer holds to one grid step, and only where the criterion holds below a rate
and fails above it, which a noisy shared machine can break: every trial is in the output.

Every trial also records knotd's CPU (user + system of all its threads, /proc/PID/stat) as a share of one
core, each CPU's busy and steal share (/proc/stat) and both veth ends' packet and drop counters.
The output names its conditions and what produced it (date, load average, kernel, versions of knotd,
kxdpgun and xlatperf with its path and build commit), writes every trial as JSON (--out) and the tables
and targets as Markdown (--markdown). --report FILE... prints the tables and targets of earlier --out
files (several invocations, e.g. one per Knot mode) without measuring; --dry-run prints the plan.
--tester-arg passes an option to xlatperf as is (repeatable, e.g. --tester-arg=--send-tick=0.002).
Only ratios measured side by side mean anything on a shared 2-vCPU VM.

Run as root, under the machine lock on a shared machine (about 2 minutes per Knot mode with 2 s trials):
    flock /tmp/xlatbench-machine.lock env XLATBENCH_BUILD=build .venv/bin/python dnsperf/bench/xdp_bench.py \\
        --knot-io socket,xdp --duration 2 --out xdp-bench.json --markdown xdp-bench.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import re
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The sibling script's reader of knotd's CPU time (python puts this script's directory first on the path).
from knot_io_bench import cpu_seconds
from xdplink import SERVER_V4, TESTER_V4, XdpLink, xdp_link

from xlatbench.cpuload import read_jiffies, steal_between, usage_between
from xlatbench.paths import REPO_ROOT, build_dir, tester_binary
from xlatbench.scripts.measurers import LoopbackMeasurer
from xlatbench.scripts.search import verdict
from xlatbench.scripts.trial import DEFAULT_LOSS_RATIO, Measurer, TrialResult
from xlatbench.scripts.xlatperf import MAX_LAG_S, SEND_TOLERANCE, SEND_TOLERANCE_ABS_S, TesterOptions
from xlatbench.setups.emulation import rootsysctl
from xlatbench.zones import KnotConfig, KnotServer
from xlatbench.zones.zonefile import DEFAULT_DOMAIN, query_name

TESTER_CPU, SERVER_CPU = 0, 1
NAMES = 65536  # the zone's names (10.0.0.0/16), in kxdpgun's query file as in xlatperf's default --subnet
FIRST_PORT = 30000  # xlatperf's and xdp_probe's flows: TESTER_V4, ports FIRST_PORT .. FIRST_PORT + flows - 1
GENERATORS = ("kxdpgun", "xlatperf-socket", "xlatperf-xdp", "xdp_probe")
DEFAULT_GENERATORS = GENERATORS[:3]
KNOT_MODES = ("socket", "xdp")
ON_SCHEDULE, PASSES = "on schedule", "passes"
KNOT_SHARE_LIMIT = 0.8  # target (c): knotd "well below one core" means below this share of one core
PASS = "pass"
DROP_WORDS = ("drop", "error", "full")  # counters of a veth end that name lost packets


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why."""


# ----------------------------------------------------------------------------------------------- generators


def run_generator(argv: list[str], timeout_s: float) -> str:
    """Runs a generator to its end; its stdout and stderr, or BenchError with its last words."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as err:
        raise BenchError(f"cannot run {argv[0]}: {err}") from None
    except subprocess.TimeoutExpired:
        raise BenchError(f"{argv[0]} did not end within {timeout_s:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip()[-300:]
        raise BenchError(f"{argv[0]} failed (exit {done.returncode}): {last}")
    return done.stdout + done.stderr


def link_counter(ifname: str, name: str) -> int:
    """One of a root-namespace interface's statistics (/sys/class/net/IF/statistics/NAME)."""
    return int(Path(f"/sys/class/net/{ifname}/statistics/{name}").read_text())


def schedule_slack(rate_qps: float, duration_s: float) -> int:
    """Queries a time-limited generator may fall short of rate x duration and still count as on schedule:
    those of xlatperf's send tolerance plus its --max-lag at their defaults (scripts.xlatperf)."""
    return math.ceil(rate_qps * (max(SEND_TOLERANCE * duration_s, SEND_TOLERANCE_ABS_S) + MAX_LAG_S))


@dataclass
class KxdpgunMeasurer:
    """kxdpgun -t duration -Q rate from one thread on `cpu`; a Measurer (scripts.trial).

    valid is its count of replies (it matches no reply to its query); tester_limited when it sent fewer than
    rate x duration - schedule_slack() queries or the tester's veth end dropped some it sent."""

    link: XdpLink
    queries: Path
    cpu: int

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        if not float(duration_s).is_integer():
            raise BenchError(f"kxdpgun takes whole seconds, not {duration_s} s")
        argv = ["kxdpgun", "-t", str(int(duration_s)), "-Q", str(int(rate_qps)), "-F", str(self.cpu),
                "-I", self.link.outer, "-i", str(self.queries), SERVER_V4]
        drops_before = link_counter(self.link.outer, "tx_dropped")
        ticks = read_jiffies()
        text = run_generator(argv, duration_s + 30)
        steal = steal_between(ticks, read_jiffies())
        egress_drops = link_counter(self.link.outer, "tx_dropped") - drops_before
        sent, replies = (re.search(rf"total {what}:\s+(\d+)", text) for what in ("queries", "replies"))
        if not sent or not replies:
            raise BenchError(f"cannot read kxdpgun's totals from: {text.strip()[-400:]}")
        scheduled = round(rate_qps * duration_s)
        n_sent, n_replies = int(sent.group(1)), int(replies.group(1))
        reasons = []
        if n_sent < scheduled - schedule_slack(rate_qps, duration_s):
            reasons.append(f"sent {n_sent} of {scheduled} scheduled queries (slack "
                           f"{schedule_slack(rate_qps, duration_s)})")
        if egress_drops:
            reasons.append(f"the tester's veth end dropped {egress_drops} of the frames sent (tx_dropped)")
        rcodes = {name: int(n) for name, n in re.findall(r"responded (\w+):\s+(\d+)", text)}
        return TrialResult(
            rate_qps=rate_qps, duration_s=duration_s, sent=n_sent, valid=n_replies,
            loss_ratio=1.0 - n_replies / n_sent if n_sent else 1.0, tester_limited=bool(reasons),
            reasons=tuple(reasons), achieved_rate_qps=n_sent / duration_s, host_steal_pct=steal,
            tester_shortfall=max(0, scheduled - n_sent) + egress_drops,
            raw={"kxdpgun": {"argv": argv, "sent": n_sent, "replies": n_replies, "rcodes": rcodes,
                             "egress_drops": egress_drops, "output_tail": text.strip()[-600:]}})

    def cleanup(self) -> None:
        """kxdpgun leaves its XDP program (xdp_redirect_dns) attached when it ends: remove it."""
        subprocess.run(["ip", "link", "set", "dev", self.link.outer, "xdp", "off"], check=True)


@dataclass
class XdpProbeMeasurer:
    """The AF_XDP layer's own driver (build/dnsperf/xdp_probe) over `flows` flows in pseudorandom order;
    tester_limited when it did not send every query or sent one later than xlatperf's default --max-lag."""

    link: XdpLink
    flows: int
    cpu: int

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult:
        queries = round(rate_qps * duration_s)
        argv = [str(build_dir() / "dnsperf" / "xdp_probe"), "--interface", self.link.outer, "--server",
                SERVER_V4, "--source", f"{TESTER_V4},{FIRST_PORT}-{FIRST_PORT + self.flows - 1}", "--order",
                "random", "--rate", str(int(rate_qps)), "--queries", str(queries), "--cpu", str(self.cpu)]
        ticks = read_jiffies()
        text = run_generator(argv, duration_s + 30)
        steal = steal_between(ticks, read_jiffies())
        try:
            doc = json.loads(text[:text.rindex("}") + 1])
            sent, valid, lag_ms = int(doc["sent"]), int(doc["buckets"]["valid"]), float(doc["max_lag_ms"])
        except (ValueError, KeyError, TypeError) as err:
            raise BenchError(f"cannot read xdp_probe's JSON ({err}): {text.strip()[-300:]}") from None
        reasons = [f"sent {sent} of {queries} queries"] if sent < queries else []
        if lag_ms > MAX_LAG_S * 1e3:
            reasons.append(f"a send {lag_ms:.1f} ms behind its schedule (more than {MAX_LAG_S * 1e3:g} ms)")
        return TrialResult(rate_qps=rate_qps, duration_s=duration_s, sent=sent, valid=valid,
                           loss_ratio=1.0 - valid / sent if sent else 1.0, tester_limited=bool(reasons),
                           reasons=tuple(reasons), achieved_rate_qps=sent / duration_s, raw=doc,
                           host_steal_pct=steal,
                           tester_shortfall=queries - sent + math.ceil(lag_ms * rate_qps / 1e3))

    def cleanup(self) -> None:
        """xdp_probe removes its own program."""


def xlatperf_on_schedule(doc: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether xlatperf offered its schedule, from its JSON (dnsperf/schema/result.schema.json): every
    scheduled query sent, none later than its --max-lag behind its schedule (its lag is taken per send call,
    the last one included), no egress drop. Its verdict's other tester-limited reasons are left out: full
    receive rings or buffers concern the replies, not the offer, and its send window check (the last query
    within 2 ms of the schedule's end) has no counterpart in kxdpgun's figures, whose count at the end is
    allowed --max-lag + 2 ms (schedule_slack)."""
    send, totals, config = doc["send"], doc["totals"], doc["config"]
    reasons = []
    if int(totals["sent"]) < int(send["scheduled_queries"]):
        reasons.append(f"sent {totals['sent']} of {send['scheduled_queries']} scheduled queries")
    max_lag = float(config.get("max_lag_s") or 0.0)
    if max_lag > 0 and float(send["max_lag_s"]) > max_lag:
        reasons.append(f"a send {float(send['max_lag_s']) * 1e3:.1f} ms behind its schedule "
                       f"(--max-lag {max_lag * 1e3:g} ms)")
    if int(totals.get("tester_egress_drops") or 0):
        reasons.append(f"{totals['tester_egress_drops']} queries dropped at the tester's egress")
    return not reasons, reasons


def result_on_schedule(result: TrialResult) -> tuple[bool, list[str]]:
    """A generator whose TrialResult is tester-limited only for its schedule (kxdpgun, xdp_probe)."""
    return not result.tester_limited, list(result.reasons)


@dataclass
class Generator:
    """One generator: its measurer, how its offer is judged, and what to undo after each trial."""

    name: str
    measurer: Measurer
    on_schedule: Callable[[TrialResult], tuple[bool, list[str]]]
    cleanup: Callable[[], None] = lambda: None


def xlatperf_generator(name: str, link: XdpLink, flows: int, knot: dict[str, Any],
                       tester_args: tuple[str, ...] = ()) -> Generator:
    """xlatperf (one sender/receiver pair, both on TESTER_CPU, `flows` source ports of TESTER_V4) through
    the suite's LoopbackMeasurer (its JSON and verdict; a knotd that died voids the trial); tester_args:
    further xlatperf options (--tester-arg)."""
    io = name.removeprefix("xlatperf-")
    extra = ["--bind", TESTER_V4, "--io", io] + (["--xdp-interface", link.outer] if io == "xdp" else [])
    extra += tester_args
    options = TesterOptions(ports_per_thread=flows, first_port=FIRST_PORT, sender_cpus=str(TESTER_CPU),
                            receiver_cpus=str(TESTER_CPU), extra_args=tuple(extra))
    measurer = LoopbackMeasurer(server=SERVER_V4, tester=options, knot_description=knot)
    return Generator(name, measurer, lambda result: xlatperf_on_schedule(result.raw or {}))


def make_generator(name: str, link: XdpLink, queries: Path, flows: int, knot: dict[str, Any],
                   tester_args: tuple[str, ...] = ()) -> Generator:
    if name == "kxdpgun":
        gun = KxdpgunMeasurer(link, queries, TESTER_CPU)
        return Generator(name, gun, result_on_schedule, gun.cleanup)
    if name == "xdp_probe":
        return Generator(name, XdpProbeMeasurer(link, flows, TESTER_CPU), result_on_schedule)
    return xlatperf_generator(name, link, flows, knot, tester_args)


# ---------------------------------------------------------------------------------------------------- trials


def per_million(cpu_s: float, count: int) -> float | None:
    return round(cpu_s / count * 1e6, 3) if count else None


def busy_pct(usage: dict[str, float]) -> float:
    """% of the interval a CPU ran anything (user, nice, system, irq, softirq): not idle, iowait or steal."""
    return round(sum(usage[c] for c in ("usr", "nice", "sys", "irq", "softirq")), 1)


def end_counters(argv: list[str], ifname: str) -> dict[str, int]:
    """One veth end's packet and drop counters (`ip -s link`) and its driver's (`ethtool -S`: the XDP
    counters per queue, where a full ring drops), run through `argv` (empty, or into a namespace)."""
    out = subprocess.run([*argv, "ip", "-j", "-s", "link", "show", "dev", ifname], capture_output=True,
                         text=True, check=True).stdout
    stats = json.loads(out)[0]["stats64"]
    counters = {f"{way}_{what}": int(stats[way][what]) for way in ("rx", "tx")
                for what in ("packets", "dropped")}
    driver = subprocess.run([*argv, "ethtool", "-S", ifname], capture_output=True, text=True,
                            check=False).stdout
    for name, value in re.findall(r"^\s+(\S+):\s+(\d+)$", driver, re.MULTILINE):
        if name != "peer_ifindex":
            counters[f"ethtool:{name}"] = int(value)
    return counters


def link_counters(link: XdpLink) -> dict[str, dict[str, int]]:
    return {"tester_end": end_counters([], link.outer),
            "server_end": end_counters(["ip", "netns", "exec", link.netns], link.inner)}


def counter_changes(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict:
    """Per end, the counters that changed, by how much."""
    return {end: {k: v - before[end].get(k, 0) for k, v in after[end].items() if v != before[end].get(k, 0)}
            for end in after}


@dataclass
class Bench:
    """The trials of one Knot mode: each generator at a rate, metered, at most once per (generator, rate)."""

    knot_io: str
    knot_pid: int
    link: XdpLink
    generators: dict[str, Generator]
    duration_s: int
    rest_s: float
    trials: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    def trial(self, name: str, rate: int) -> dict[str, Any]:
        """The trial of `name` at `rate`, measured now unless it already was."""
        if (name, rate) not in self.trials:
            time.sleep(self.rest_s)  # let the server's and the veths' queues drain
            self.trials[(name, rate)] = self.measure(self.generators[name], rate)
            log(trial_line(self.trials[(name, rate)]))
        return self.trials[(name, rate)]

    def measure(self, generator: Generator, rate: int) -> dict[str, Any]:
        started = utc_now()
        links_before = link_counters(self.link)
        usage_before, knotd_before, ticks_before = (resource.getrusage(resource.RUSAGE_CHILDREN),
                                                    cpu_seconds(self.knot_pid), read_jiffies())
        result = generator.measurer.measure(self.duration_s, rate)
        usage_after, knotd_after, ticks_after = (resource.getrusage(resource.RUSAGE_CHILDREN),
                                                 cpu_seconds(self.knot_pid), read_jiffies())
        generator.cleanup()
        links_after = link_counters(self.link)
        user_s = usage_after.ru_utime - usage_before.ru_utime
        system_s = usage_after.ru_stime - usage_before.ru_stime
        knotd_s = knotd_after - knotd_before
        usage = usage_between(ticks_before, ticks_after)
        on_schedule, schedule_notes = generator.on_schedule(result)
        return {
            "generator": generator.name, "knot_io": self.knot_io, "rate_qps": rate,
            "duration_s": self.duration_s, "started_utc": started, "sent": result.sent, "valid": result.valid,
            "loss_ratio": result.loss_ratio,
            "on_schedule": on_schedule, "schedule_notes": schedule_notes,
            "verdict": verdict(result, DEFAULT_LOSS_RATIO), "tester_limited_reasons": list(result.reasons),
            "achieved_rate_qps": round(result.achieved_rate_qps, 1),
            "generator_user_s": round(user_s, 4), "generator_system_s": round(system_s, 4),
            "cpu_s_per_million_sent": per_million(user_s + system_s, result.sent),
            "cpu_s_per_million_valid": per_million(user_s + system_s, result.valid),
            "knotd_cpu_s": round(knotd_s, 3), "knotd_core_share": round(knotd_s / self.duration_s, 3),
            "cpu_busy_pct": {cpu: busy_pct(u) for cpu, u in usage.items() if cpu != "all"},
            "cpu_steal_pct": result.host_steal_pct,
            "links": counter_changes(links_before, links_after),
            "details": trial_details(result),
        }


def trial_details(result: TrialResult) -> dict[str, Any]:
    """What the generator said beyond the totals: kxdpgun's and xdp_probe's output, xlatperf's send, drop
    and AF_XDP figures."""
    raw = result.raw or {}
    if "kxdpgun" in raw:
        return raw["kxdpgun"]
    if "totals" not in raw:  # xdp_probe
        keys = ("max_lag_ms", "frames_per_kick", "xsk_statistics", "xdp_mode", "buckets")
        return {k: raw.get(k) for k in keys}
    totals, send = raw["totals"], raw["send"]
    io = raw.get("io", {})
    return {"max_lag_s": send.get("max_lag_s"), "unsent": totals.get("unsent"),
            "tester_receive_drops": totals.get("tester_receive_drops", totals.get("tester_socket_drops")),
            "late": totals.get("late"),
            "unanswered": totals.get("unanswered"), "io": {k: io.get(k) for k in (
                "mode", "xdp_mode", "zero_copy", "flows", "frames_per_kick", "xdp_statistics", "tester_drops")
                if k in io}}


def trial_line(t: dict[str, Any]) -> str:
    valid_name = "replies" if t["generator"] == "kxdpgun" else "valid"
    busy = ", ".join(f"CPU {cpu} {pct:.0f} %" for cpu, pct in sorted(t["cpu_busy_pct"].items()))
    notes = "".join(f"; {note}" for note in t["schedule_notes"])
    drops = [f"{end} {name.removeprefix('ethtool:')} {value}" for end, changed in t["links"].items()
             for name, value in changed.items() if value and any(w in name for w in DROP_WORDS)]
    notes += f"; veth drops: {', '.join(drops)}" if drops else ""
    return (f"  [Knot {t['knot_io']}] {t['generator']} at {t['rate_qps']} q/s for {t['duration_s']} s: sent "
            f"{t['sent']}, {valid_name} {t['valid']}, on schedule {'yes' if t['on_schedule'] else 'no'}, "
            f"verdict {t['verdict']}; CPU {t['generator_user_s'] + t['generator_system_s']:.2f} s (user "
            f"{t['generator_user_s']:.2f} s) = {fmt(t['cpu_s_per_million_sent'])} CPU-s per million sent, "
            f"{fmt(t['cpu_s_per_million_valid'])} per million {valid_name}; knotd "
            f"{t['knotd_core_share']:.2f} of a core; busy {busy}" + notes)


# -------------------------------------------------------------------------------------------------- searches


@dataclass
class Bisection:
    """The highest rate of `grid` (ascending) at which a criterion holds, by bisection: it takes the
    criterion to hold below some rate and to fail above it. lo: index of the highest rate seen to hold (-1:
    none); hi: index of the lowest seen to fail (len(grid): none)."""

    generator: str
    criterion: str
    grid: list[int]
    lo: int = -1
    hi: int = -1
    tried: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.hi = len(self.grid)

    @property
    def done(self) -> bool:
        return self.hi - self.lo <= 1

    def next_rate(self) -> int:
        return self.grid[(self.lo + self.hi) // 2]

    def record(self, rate: int, holds: bool) -> None:
        index = self.grid.index(rate)
        if holds:
            self.lo = index
        else:
            self.hi = index
        self.tried.append({"rate_qps": rate, "holds": holds})

    def answer(self) -> dict[str, Any]:
        highest = self.grid[self.lo] if self.lo >= 0 else None
        failed = self.grid[self.hi] if self.hi < len(self.grid) else None
        if highest is None:
            text = f"below {self.grid[0]} q/s (the search's lowest rate failed)"
        elif failed is None:
            text = f"at least {highest} q/s (the top of the search's range held)"
        else:
            text = f"{highest} q/s ({failed} q/s did not)"
        return {"generator": self.generator, "criterion": self.criterion, "highest_qps": highest,
                "lowest_failing_qps": failed, "text": text, "tried": self.tried}


def criterion_holds(criterion: str, trial: dict[str, Any]) -> bool:
    return bool(trial["on_schedule"]) if criterion == ON_SCHEDULE else trial["verdict"] == PASS


def run_searches(bench: Bench, names: list[str], grid: list[int]) -> list[dict[str, Any]]:
    """Both searches of every generator, one bisection step each in turn until all are done."""
    searches = [Bisection(name, criterion, grid) for name in names for criterion in (ON_SCHEDULE, PASSES)]
    while not all(s.done for s in searches):
        for search in searches:
            if not search.done:
                rate = search.next_rate()
                search.record(rate, criterion_holds(search.criterion, bench.trial(search.generator, rate)))
    answers = []
    for search in searches:
        answer = search.answer()
        if answer["highest_qps"] is not None:
            at = bench.trials[(search.generator, answer["highest_qps"])]
            answer["at_highest"] = {k: at[k] for k in ("knotd_core_share", "cpu_busy_pct", "sent", "valid",
                                                       "cpu_s_per_million_sent", "cpu_s_per_million_valid")}
        answers.append(answer)
        log(f"[Knot {bench.knot_io}] {search.generator}: highest rate {search.criterion}: {answer['text']}")
    return answers


def rate_grid(text: str) -> list[int]:
    """LOW:HIGH:STEP (queries/s) as the ascending list of rates; ValueError in one line when bad."""
    try:
        low, high, step = (int(v) for v in text.split(":"))
    except ValueError:
        raise ValueError(f"--search {text!r}: LOW:HIGH:STEP, three whole numbers of queries/s") from None
    if not 0 < low < high or step <= 0:
        raise ValueError(f"--search {text!r}: needs 0 < LOW < HIGH and STEP > 0")
    return list(range(low, high + 1, step))


def search_trials(grid: list[int]) -> int:
    """The most trials one bisection of `grid` takes."""
    return math.ceil(math.log2(len(grid) + 1))


# ------------------------------------------------------------------------------------------------------- run


def log(text: str) -> None:
    print(text, flush=True)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def version_of(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return "not installed"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def provenance(args: argparse.Namespace) -> dict[str, Any]:
    """What produced the figures: this script and its commit, the tools' versions, the machine."""
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True, check=False).stdout.strip()
    build_commit = build_dir() / ".commit"
    try:
        xlatperf = str(tester_binary())
    except FileNotFoundError as err:
        raise BenchError(str(err)) from None
    return {
        "script": "dnsperf/bench/xdp_bench.py", "argv": sys.argv[1:], "repo_commit": commit or None,
        "xlatperf": {"path": xlatperf, "version": version_of([xlatperf, "--version"]),
                     "build_commit": build_commit.read_text().strip() if build_commit.is_file() else None},
        "knotd": version_of(["knotd", "--version"]), "kxdpgun": version_of(["kxdpgun", "--version"]),
        "kernel": os.uname().release, "cpus_online": os.cpu_count(),
    }


def conditions(args: argparse.Namespace, grid: list[int]) -> dict[str, Any]:
    return {
        "path": "veth pair: root namespace (generators; native XDP, copy mode) -> knotd's namespace",
        "knot": f"knotd, {args.knot_workers} UDP worker(s), every thread pinned to CPU {SERVER_CPU}; socket "
                "mode: the kernel's UDP sockets; XDP mode: Knot's XDP program + AF_XDP on its veth end (UDP "
                "only)",
        "generators_cpu": TESTER_CPU,
        "kxdpgun": f"one thread (-F {TESTER_CPU}), batch 10 (its default), {NAMES} query names",
        "xlatperf": f"1 sender/receiver pair both on CPU {TESTER_CPU}, {args.flows} flows ({TESTER_V4} ports "
                    f"{FIRST_PORT}-{FIRST_PORT + args.flows - 1}), timeout 0.25 s, its defaults otherwise"
                    + (f", and {' '.join(args.tester_arg)}" if args.tester_arg else ""),
        "trial_s": args.duration, "rest_s": args.rest, "loss_limit": DEFAULT_LOSS_RATIO,
        "fixed_rates_qps": args.rate_list,
        "search": {"method": "bisection of a rate grid, all searches of a Knot mode in round-robin, trials "
                             "shared between searches and with the fixed rates",
                   "low_qps": grid[0], "high_qps": grid[-1],
                   "resolution_qps": grid[1] - grid[0] if len(grid) > 1 else None,
                   "max_trials_per_search": search_trials(grid)},
        "on_schedule": {"xlatperf": "all scheduled queries sent, none later than --max-lag "
                                    f"({MAX_LAG_S * 1e3:g} ms), no egress drop (its JSON)",
                        "kxdpgun": "sent >= rate x duration - rate x (max(1e-5 x duration, 2 ms) + 20 ms), "
                                   "no tx_dropped on the tester's veth end"},
        "cpu": "generator: getrusage of the child (user + system); knotd: /proc/PID/stat of all threads; "
               "CPU busy: /proc/stat (usr+nice+sys+irq+softirq)",
    }


def check_environment() -> None:
    if os.geteuid() != 0:
        raise BenchError("run as root (namespaces, XDP programs, knotd)")
    for tool in ("kxdpgun", "knotd"):
        if version_of([tool, "--version"]) == "not installed":
            raise BenchError(f"{tool} not found: install knot and knot-dnsutils (tools/install-deps)")


def measure_mode(knot_io: str, args: argparse.Namespace, grid: list[int], tmp: Path) -> dict[str, Any]:
    """Every part of the benchmark against one knotd in `knot_io` mode on a fresh veth pair."""
    with xdp_link("xbx" + secrets.token_hex(2)) as link, sysctls(link):
        queries = tmp / "queries.txt"
        queries.write_text("".join(f"{query_name(i)} AAAA\n" for i in range(NAMES)))
        config = KnotConfig(listen=((SERVER_V4, 53),), udp_workers=args.knot_workers, cpus=(SERVER_CPU,),
                            domain=DEFAULT_DOMAIN, xdp_interface=link.inner if knot_io == "xdp" else None)
        with KnotServer(tmp / f"knot-{knot_io}", config, netns=link.netns) as knot:
            described = knot.describe()
            log(f"Knot in {knot_io} mode: pid {described['pid']}, "
                f"{json.dumps((described.get('xdp') or {}).get('attached'))}")
            generators = {name: make_generator(name, link, queries, args.flows, described,
                                               tuple(args.tester_arg))
                          for name in args.generator_list}
            bench = Bench(knot_io, int(described["pid"]), link, generators, args.duration, args.rest)
            started, load_before = utc_now(), os.getloadavg()
            if "cpu" in args.part_list:
                for rate in args.rate_list:
                    for name in args.generator_list:
                        bench.trial(name, rate)
            searches = run_searches(bench, args.generator_list, grid) if "search" in args.part_list else []
            return {"knot_io": knot_io, "started_utc": started, "ended_utc": utc_now(),
                    "load_average": {"before": load_before, "after": os.getloadavg()}, "knot": described,
                    "knot_after": knot.describe(), "trials": list(bench.trials.values()),
                    "searches": searches}


@contextmanager
def sysctls(link: XdpLink) -> Iterator[dict[str, Any]]:
    """Root rmem 4 MiB and netdev_max_backlog 10 000 under the suite's sysctl lease, as the emulation has."""
    holder = f"xdp-bench-{os.getpid()}"
    wanted = {**rootsysctl.socket_buffers(4 << 20), **rootsysctl.receive_backlog(10_000)}
    report = rootsysctl.acquire(holder, wanted, netns=[link.netns], pid=os.getpid())
    try:
        yield report
    finally:
        rootsysctl.release(holder)


# ---------------------------------------------------------------------------------------------------- report


def markdown(doc: dict[str, Any]) -> str:
    """The tables and targets of one or more runs (--out documents merged); BenchError when a field is
    missing."""
    try:
        return markdown_of(doc)
    except (KeyError, TypeError) as err:
        raise BenchError(f"the document lacks a field the report needs ({err!r})") from None


def markdown_of(doc: dict[str, Any]) -> str:
    runs, made, cond = doc["runs"], doc["produced_by"], doc["conditions"]
    lines = [f"Produced by {made['script']} ({made.get('repo_commit')}), xlatperf "
             f"{made['xlatperf']['version']} ({made['xlatperf']['path']}), {made['knotd']}, "
             f"{made['kxdpgun']}, Linux {made['kernel']}, {made['cpus_online']} CPUs.",
             f"Conditions: {cond['knot']}; generators on CPU {cond['generators_cpu']}; {cond['trial_s']} s "
             f"per trial, {cond['rest_s']} s rest; xlatperf {cond['xlatperf']}; kxdpgun "
             f"{cond['kxdpgun']}.", ""]
    for run in runs:
        lines.append(f"Knot {run['knot_io']} mode: {run['started_utc']} to {run['ended_utc']}, load average "
                     f"{' / '.join(f'{v:.2f}' for v in run['load_average']['before'])} before, "
                     f"{' / '.join(f'{v:.2f}' for v in run['load_average']['after'])} after.")
    lines += ["", "| Knot mode | rate, q/s | generator | sent | answered (valid) | on schedule | verdict | "
              "CPU, s (user) | CPU-s per M sent | CPU-s per M valid | knotd, share of a core | "
              "CPU 0 / CPU 1 busy |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    fixed = set(cond["fixed_rates_qps"])
    for run in runs:
        for t in sorted(run["trials"], key=lambda t: (t["rate_qps"], t["generator"])):
            if t["rate_qps"] not in fixed:
                continue
            busy = t["cpu_busy_pct"]
            lines.append(
                f"| {t['knot_io']} | {t['rate_qps']:,} | {t['generator']} | {t['sent']:,} | {t['valid']:,} | "
                f"{'yes' if t['on_schedule'] else 'no'} | {t['verdict']} | "
                f"{t['generator_user_s'] + t['generator_system_s']:.2f} ({t['generator_user_s']:.2f}) | "
                f"{fmt(t['cpu_s_per_million_sent'])} | {fmt(t['cpu_s_per_million_valid'])} | "
                f"{t['knotd_core_share']:.2f} | {busy.get('0', 0):.0f} % / {busy.get('1', 0):.0f} % |")
    search = cond["search"]
    lines += ["", f"Searches: {search['method']}; {search['low_qps']:,}-{search['high_qps']:,} q/s in steps "
              f"of {search['resolution_qps']:,} q/s (the answer holds to one step), at most "
              f"{search['max_trials_per_search']} trials per search.", "",
              "| Knot mode | generator | highest rate on schedule | highest passing rate (loss <= 0.01 %) | "
              "knotd share of a core at the passing rate | trials |", "|---|---|---|---|---|---|"]
    for run in runs:
        by = {(s["generator"], s["criterion"]): s for s in run["searches"]}
        for name in dict.fromkeys(s["generator"] for s in run["searches"]):
            sched, passing = by[(name, ON_SCHEDULE)], by[(name, PASSES)]
            share = (passing.get("at_highest") or {}).get("knotd_core_share")
            trials = len({t["rate_qps"] for t in (*sched["tried"], *passing["tried"])})
            lines.append(f"| {run['knot_io']} | {name} | {sched['text']} | {passing['text']} | "
                         f"{fmt(share)} | {trials} |")
    lines += ["", "Targets of issue 24 on this machine (only ratios measured side by side, in one run, mean "
              "anything on this shared 2-vCPU VM):", ""]
    lines += [f"- {text}" for text in targets(runs, cond["fixed_rates_qps"])]
    return "\n".join(lines) + "\n"


def targets(runs: list[dict[str, Any]], fixed_rates: list[int]) -> list[str]:
    """The issue's three targets judged from the runs (target (a) at the fixed rates), in words."""
    out = []
    for run in runs:
        trials = {(t["generator"], t["rate_qps"]): t for t in run["trials"]}
        fixed = sorted(rate for rate in fixed_rates if ("kxdpgun", rate) in trials
                       and ("xlatperf-xdp", rate) in trials)
        parts, behind = [], "; a generator behind its schedule"
        for rate in fixed:
            gun, xdp = trials[("kxdpgun", rate)], trials[("xlatperf-xdp", rate)]
            if gun["cpu_s_per_million_sent"] and xdp["cpu_s_per_million_valid"]:
                ratio = xdp["cpu_s_per_million_valid"] / gun["cpu_s_per_million_sent"]
                parts.append(f"{rate:,} q/s: {xdp['cpu_s_per_million_valid']:.2f} vs "
                             f"{gun['cpu_s_per_million_sent']:.2f} CPU-s per million ({ratio:.2f} x, "
                             f"{'met' if ratio <= 1 else 'not met'}"
                             f"{'' if xdp['on_schedule'] and gun['on_schedule'] else behind})")
        if parts:
            out.append(f"(a) Knot {run['knot_io']}: xlatperf --io xdp CPU per valid query against kxdpgun's "
                       "CPU per query sent: " + "; ".join(parts) + ".")
        by = {(s["generator"], s["criterion"]): s for s in run["searches"]}
        gun, xdp = by.get(("kxdpgun", ON_SCHEDULE)), by.get(("xlatperf-xdp", ON_SCHEDULE))
        if gun and xdp:
            met = gun["highest_qps"] is None or (xdp["highest_qps"] or 0) >= gun["highest_qps"]
            top = gun["lowest_failing_qps"] is None
            note = " (kxdpgun reached the top of the range: raise --search to compare)" if top and met else ""
            out.append(f"(b) Knot {run['knot_io']}: highest rate on schedule, xlatperf --io xdp "
                       f"{xdp['text']}, kxdpgun {gun['text']}: {'met' if met else 'not met'}{note}.")
        if run["knot_io"] == "xdp":
            passing = [s for s in run["searches"]
                       if s["criterion"] == PASSES and s["highest_qps"] is not None]
            if passing:
                best = max(passing, key=lambda s: s["highest_qps"])
                share = best["at_highest"]["knotd_core_share"]
                busy = best["at_highest"]["cpu_busy_pct"].get(str(SERVER_CPU))
                above = trials.get((best["generator"], best["lowest_failing_qps"]))
                above_text = (f"; at {above['rate_qps']:,} q/s, which failed ({above['valid']:,} of "
                              f"{above['sent']:,} answered), knotd used {above['knotd_core_share']:.2f}"
                              + server_drops(above) if above else "")
                out.append(f"(c) Knot in XDP mode: highest passing rate {best['highest_qps']:,} q/s "
                           f"({best['generator']}); knotd used {share:.2f} of a core there (CPU {SERVER_CPU} "
                           f"busy {fmt(busy, 0)} % with softirq): "
                           f"{'met' if share < KNOT_SHARE_LIMIT else 'not met'} (threshold "
                           f"{KNOT_SHARE_LIMIT} of a core){above_text}.")
    return out


def server_drops(trial: dict[str, Any]) -> str:
    """", the server's veth end dropped N (the driver's receive queue: in XDP mode Knot's AF_XDP ring was
    full)" when it did, else ""."""
    dropped = trial.get("links", {}).get("server_end", {}).get("rx_dropped", 0)
    return (f", the server's veth end dropped {dropped:,} on receive (ethtool rx_queue_0_drops: in XDP mode "
            "the redirect into Knot's AF_XDP ring failed)" if dropped else "")


def merge(paths: list[Path]) -> dict[str, Any]:
    """Several --out documents as one: the first one's provenance and conditions, every run."""
    docs = []
    for path in paths:
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as err:
            raise BenchError(f"cannot read {path}: {err}") from None
    for path, doc in zip(paths, docs, strict=True):
        if not isinstance(doc, dict) or not all(key in doc for key in ("produced_by", "conditions", "runs")):
            raise BenchError(f"{path} is no xdp_bench --out document (produced_by, conditions, runs)")
    merged = dict(docs[0])
    merged["runs"] = [run for doc in docs for run in doc["runs"]]
    return merged


# ------------------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    add = parser.add_argument
    add("--knot-io", default="socket,xdp",
        help="Knot modes, in this order (of socket, xdp; default: %(default)s)")
    add("--generators", default=",".join(DEFAULT_GENERATORS),
        help=f"comma-separated, of {', '.join(GENERATORS)} (default: %(default)s)")
    add("--rates", default="100000,200000,300000", help="fixed rates, queries/s (default: %(default)s)")
    add("--search", default="50000:650000:25000",
        help="the searches' rate grid LOW:HIGH:STEP, queries/s (default: %(default)s)")
    add("--parts", default="cpu,search", help="cpu (fixed rates), search, or both (default: %(default)s)")
    add("--duration", type=int, default=2, help="trial length, whole s (default: %(default)s)")
    add("--rest", type=float, default=1.0, help="pause before each trial, s (default: %(default)s)")
    add("--flows", type=int, default=64, help="xlatperf's (and xdp_probe's) flows (default: %(default)s)")
    add("--knot-workers", type=int, default=1, help="Knot UDP workers (default: %(default)s)")
    add("--tester-arg", action="append", default=[],
        help="a further xlatperf option, passed as is (repeatable, e.g. --tester-arg=--send-tick=0.0002)")
    add("--out", type=Path, help="write every trial, search, condition and version as JSON here")
    add("--markdown", type=Path, help="write the tables and targets as Markdown here")
    add("--report", type=Path, nargs="+", metavar="JSON",
        help="measure nothing: print the tables and targets of these --out files (merged)")
    add("--dry-run", action="store_true", help="print the plan and exit (no root needed)")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> list[int]:
    """Parses the list options into args.*_list; the search grid; ValueError in one line when bad."""
    def items(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
        chosen = [v for v in text.split(",") if v]
        if not chosen or any(v not in allowed for v in chosen) or len(set(chosen)) != len(chosen):
            raise ValueError(f"--{what} {text!r}: distinct names of {', '.join(allowed)}")
        return chosen

    args.knot_io_list = items(args.knot_io, KNOT_MODES, "knot-io")
    args.generator_list = items(args.generators, GENERATORS, "generators")
    args.part_list = items(args.parts, ("cpu", "search"), "parts")
    try:
        args.rate_list = [int(r) for r in args.rates.split(",")]
    except ValueError:
        raise ValueError(f"--rates {args.rates!r}: whole queries/s, comma-separated") from None
    if any(r <= 0 for r in args.rate_list):
        raise ValueError("--rates must be positive")
    if args.duration < 1 or args.rest < 0 or args.flows < 1 or args.knot_workers < 1:
        raise ValueError("--duration, --flows and --knot-workers must be at least 1, --rest not negative")
    if args.flows > 65536 - FIRST_PORT:
        raise ValueError(f"--flows at most {65536 - FIRST_PORT} (source ports from {FIRST_PORT})")
    return rate_grid(args.search)


def plan_text(args: argparse.Namespace, grid: list[int]) -> str:
    gens, modes = len(args.generator_list), len(args.knot_io_list)
    fixed = len(args.rate_list) * gens if "cpu" in args.part_list else 0
    searched = 2 * gens * search_trials(grid) if "search" in args.part_list else 0
    per_trial = args.duration + args.rest + 1.0  # start, the timeout's wait, writing the result
    step = grid[1] - grid[0] if len(grid) > 1 else 0
    minutes = modes * (fixed + searched) * per_trial / 60
    return (f"plan: Knot modes {', '.join(args.knot_io_list)}; generators {', '.join(args.generator_list)}; "
            f"per mode {fixed} trials at fixed rates {args.rate_list} q/s and at most {searched} search "
            f"trials (grid {grid[0]}-{grid[-1]} q/s, step {step}, trials shared); {args.duration} s per "
            f"trial: at most about {minutes:.1f} min")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanups
    try:
        grid = [] if args.report else check_args(args)
    except ValueError as err:
        print(f"xdp_bench: {err}", file=sys.stderr)
        return 2
    try:
        if args.report:
            doc = merge(args.report)
        else:
            log(plan_text(args, grid))
            if args.dry_run:
                return 0
            check_environment()
            doc = measure_all(args, grid)
        text = markdown(doc)
    except (BenchError, OSError, RuntimeError, ValueError, subprocess.CalledProcessError) as err:
        print(f"xdp_bench: {err}", file=sys.stderr)
        return 1
    log("\n" + text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


def measure_all(args: argparse.Namespace, grid: list[int]) -> dict[str, Any]:
    """Every Knot mode of --knot-io in turn; the document --out keeps (written after each mode, so what is
    measured is kept also when a later mode fails)."""
    doc: dict[str, Any] = {"produced_by": provenance(args), "conditions": conditions(args, grid), "runs": []}
    log("produced by: " + json.dumps(doc["produced_by"]))
    log("conditions: " + json.dumps(doc["conditions"]))
    with tempfile.TemporaryDirectory(prefix="xdp-bench-") as tmp:
        for knot_io in args.knot_io_list:
            doc["runs"].append(measure_mode(knot_io, args, grid, Path(tmp)))
            if args.out:
                args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    sys.exit(main())
