"""The one bottleneck verdict (console after each idle capture, report, verdicts.json): which DUT limited
the chain, said only on evidence of saturation, otherwise "not determined" and why.

One evidence shape (analysis.evidence.Evidence) whatever the world: per DUT, its active CPUs second by second
(the idle mean's per-second averages) -- its own host's cores online for the capture on a real testbed (the
idle-mean record's `hosts`, the hotplug placement `applied.<dut>.online`), or its CPU set on the emulation's
shared machine -- and its single-threaded translator's share of one core (the counted idle runs').

The rule compares like with like, per core and per second, as the paper reads its Figures 8-17 (it names the
device whose CPU was full "at the beginning of the 60 s of the test", where idle time is lowest, while the
other had idle time left). A DUT's load in a second is its heaviest unit, in % of one core: its busiest
active core (100 % less its idle time) or its single-threaded user-space translator's share of one core,
whichever is higher. A DUT is saturated in a second when
- one of its active cores had < BUSY_IDLE % idle time (kernel work counts: softirq/system, in-kernel NAT44,
  forwarding, Jool; a mean over all its cores would hide one full core among 16), or
- one of its active cores spent >= SATURATED_SHARE % in softirq (an in-kernel translator whose packets all
  land on that core), or
- its single-threaded translator (execution_model: one thread per instance) used >= SATURATED_SHARE % of
  one core (a whole-run figure: it holds in every second).
A second is decided for a DUT when it alone is saturated and the other's load is CLEAR_MARGIN points of a
core below its own; when it alone is saturated but the other is within the margin (a near tie) the failing
trial's drops settle it: named only when they fell most at the saturated DUT. The verdict states which
seconds decided. Not determined: both saturated in a second, seconds deciding for different DUTs, a near tie
the drops do not settle, drops at the other DUT, the tester's or Knot's CPU saturated in the deciding seconds
(emulation: the test system may be the limit), a rate that is a lower bound (a search that never failed),
every idle run left out, or (emulation) DUT CPU sets that overlap or were shared with an unpinned tester/Knot.
Drop counters are read from the failing trial just above the throughput rate (at the passing rate they are
at most the loss allowance).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..cpulist import format_cpu_list
from .bounded import rate_text
from .evidence import KERNEL_COLUMNS, Evidence, FailingTrial

# A single-threaded translator at or above this share of one core has no headroom left, %.
SATURATED_SHARE = 90.0
# CPUs with less idle time than this were fully used, % (the paper's bottleneck DUT showed 0-10 %).
BUSY_IDLE = 5.0
# The other DUT's CPUs need this many percentage points more idle time for one DUT to be the limit.
CLEAR_MARGIN = 10.0
# Drops in the failing trial below this are noise (a stray packet), packets.
MIN_DROPS = 10.0
# Which side of the chain a host belongs to: the tester and the echo server are not DUTs.
SIDE_OF_HOST = {"client": "tester/server", "server": "tester/server", "dut1": "dut1", "napt": "dut1",
                "dut2": "dut2"}


@dataclass
class Verdict:
    """setup, cores: the configuration. bottleneck: "dut1", "dut2" or None (not determined: `reason` says
    why). evidence: one sentence per finding, each number with its unit. seconds: which seconds of the run
    decided ("" when none did, "the run" when only whole-run figures were recorded). by_measurement: the
    bottleneck by measurement at the same configuration (analysis.measured_bottleneck.Point.summary), when
    the campaign measured the chain's devices alone too, else None."""

    setup: str
    cores: int
    rate_qps: float
    implementation: str
    bottleneck: str | None
    evidence: list[str] = field(default_factory=list)
    reason: str = ""
    rate_label: str = ""  # the rate as printed: '≥ R' when its search never failed, 'R †' over fewer runs
    seconds: str = ""
    by_measurement: dict[str, Any] | None = None
    device: str = ""  # the named DUT's device as the paper names it ("PLAT", "CE"), when recorded

    def headline(self) -> str:
        if self.bottleneck:
            return f"bottleneck {self.bottleneck}" + (f" ({self.device})" if self.device else "")
        return f"bottleneck not determined: {self.reason}"

    def measured_line(self) -> str:
        """The bottleneck by measurement beside this verdict, one line ("" without one)."""
        found = self.by_measurement
        if not found:
            return ""
        return f"bottleneck by measurement (each device alone): {found['text']}"

    def text(self) -> str:
        rate = self.rate_label or f"{self.rate_qps:,.0f}"
        head = (f"{self.setup}, {self.cores} DUT core(s), at {rate} queries/s "
                f"({self.implementation}): {self.headline()}")
        lines = [*self.evidence, *([self.measured_line()] if self.by_measurement else [])]
        return head + "".join(f"\n  - {line}" for line in lines)


@dataclass(frozen=True)
class Load:
    """One DUT's heaviest load in one second (or over the run): busy: % of one core, its busiest active
    core's non-idle time or its single-threaded translator's share, whichever is higher; what: which of them
    and its figure; saturated: why it counts as saturated ("" when it does not)."""

    busy: float
    what: str
    saturated: str = ""


# A moment of the run: its second (0: the whole run, when no per-second figures were recorded) and each
# DUT's load then.
Moment = tuple[int, dict[str, Load]]


def verdict(evidence: Evidence) -> Verdict:
    result = Verdict(evidence.setup, evidence.cores, evidence.rate_qps, evidence.implementation, None,
                     rate_label=rate_text(evidence.rate_qps, evidence.rate_lower_bound,
                                          evidence.rate_partial))
    if evidence.excluded:
        result.evidence.append(f"left out of every figure here ({evidence.runs} idle run(s) counted): "
                               + "; ".join(evidence.excluded))
    shares = _share_loads(evidence, result)
    blocked = not evidence.separate_hosts and _placement_blocks(evidence, result)
    cores = [] if blocked else _core_moments(evidence, result)
    duts = sorted(set(evidence.dut_cpus) | set(shares))
    moments = _moments(cores, shares)
    drop_side = _failing_drops(evidence.failing, evidence, result)
    if evidence.rate_lower_bound:
        result.reason = ("the rate is a lower bound (its search never failed): the chain was not at its "
                         "throughput")
    elif evidence.runs == 0 and evidence.excluded:
        result.reason = "every idle run was left out of the idle mean: nothing at the rate to judge"
    else:
        _decide(evidence, result, duts, moments, drop_side, blocked)
    return result


def _decide(evidence: Evidence, result: Verdict, duts: list[str], moments: list[Moment],
            drop_side: str | None, blocked: bool = False) -> None:
    """Name the bottleneck in `result`, or say in its reason why none is named. blocked: per-CPU time could
    not be charged to one DUT (the placement's reason, if it gave one, stands when nothing else decides)."""
    both: list[int] = []
    clear: dict[str, list[int]] = {}
    near: dict[str, list[int]] = {}
    unknown: dict[str, str] = {}
    for second, loads in moments:
        saturated = sorted(d for d, load in loads.items() if load.saturated)
        if len(saturated) > 1:
            both.append(second)
            continue
        if not saturated:
            continue
        (dut,) = saturated
        others = [o for o in duts if o != dut]
        missing = [o for o in others if o not in loads]
        if not others or missing:
            unknown.setdefault(dut, missing[0] if missing else "")
            continue
        gap = min(loads[dut].busy - loads[o].busy for o in others)
        (clear if gap >= CLEAR_MARGIN else near).setdefault(dut, []).append(second)
    tester = _tester_saturated(evidence, moments)
    if both:
        names = sorted({d for s, loads in moments if s in both
                        for d, load in loads.items() if load.saturated})
        result.reason = f"{' and '.join(names)} both show saturation{_in_seconds(both)}"
    elif len(clear) > 1 or (clear and set(near) - set(clear)):
        found = {**near, **clear}
        result.reason = "different DUTs were saturated at different times: " + "; ".join(
            f"{dut}{_in_seconds(seconds) or ' over the run'}" for dut, seconds in sorted(found.items()))
    elif clear:
        ((dut, seconds),) = clear.items()
        _name(evidence, result, dut, seconds, moments, drop_side, tester, settled=False)
    elif len(near) == 1:
        ((dut, seconds),) = near.items()
        if drop_side == dut:
            _name(evidence, result, dut, seconds, moments, drop_side, tester, settled=True)
        else:
            _, loads = _worst(moments, dut, seconds)
            others = ", ".join(f"{o}'s heaviest load {load.busy:.1f} % of a core ({load.what})"
                               for o, load in sorted(loads.items()) if o != dut)
            result.reason = (f"{dut} is saturated ({loads[dut].saturated}) but the other DUT was not clearly "
                             f"idler ({others}: less than {CLEAR_MARGIN:.0f} points apart)"
                             f"{_in_seconds(seconds)}, and the failing trial's drops do not settle the near "
                             "tie"
                             + (f" (they fell most at {drop_side})" if drop_side else " (none recorded)"))
    elif near:
        result.reason = "near ties in both directions: " + "; ".join(
            f"{dut}{_in_seconds(seconds)}" for dut, seconds in sorted(near.items()))
    elif unknown:
        dut, other = next(iter(sorted(unknown.items())))
        result.reason = (f"{dut} is saturated but {other}'s load is unknown" if other else
                         f"{dut} is saturated but nothing was recorded of the other DUT")
    else:
        if result.reason:  # the placement's own: a full CPU both DUTs shared
            return
        result.reason = ("no DUT's translator showed saturation, and per-CPU time could not be charged to "
                         "one DUT (see the placement below)") if blocked else "no DUT showed saturation"
        if tester:
            result.reason += f"; the test system was: {tester[1]}"
        if drop_side:
            result.reason += f" (the failing trial above the rate dropped most at {drop_side})"


def _name(evidence: Evidence, result: Verdict, dut: str, seconds: list[int], moments: list[Moment],
          drop_side: str | None, tester: tuple[list[int], str] | None, settled: bool) -> None:
    """Name `dut`, decided by `seconds`, unless the tester was saturated then or the drops disagree."""
    second, loads = _worst(moments, dut, seconds)
    result.seconds = _seconds_text(seconds, moments)
    others = "; ".join(f"{o}'s heaviest load {load.busy:.1f} % of a core ({load.what})"
                       for o, load in sorted(loads.items()) if o != dut)
    how = "less than" if settled else "at least"
    closest = f"in second {second}, the closest," if second else "over the run"
    result.evidence.append(
        f"decided by {result.seconds}: {dut} saturated in each; {closest} {dut} at "
        f"{loads[dut].busy:.1f} % of a core ({loads[dut].saturated}), {others}: {how} "
        f"{CLEAR_MARGIN:.0f} points below")
    busy_tester = [s for s in (tester[0] if tester else []) if s in seconds]
    if tester and busy_tester:
        result.reason = (f"{dut} is saturated, but so was the test system then ({tester[1]}): the chain's "
                         "limit may be the tester's or Knot's")
    elif drop_side in ("dut1", "dut2") and drop_side != dut:
        result.reason = (f"{dut} is saturated but the failing trial dropped most at {drop_side}: "
                         "the evidence disagrees")
    else:
        result.bottleneck, result.device = dut, evidence.roles.get(dut, "")
        if settled:
            result.evidence.append(f"a near tie settled by the failing trial above the rate: its drops fell "
                                   f"most at {dut}")


def _worst(moments: list[Moment], dut: str, seconds: list[int]) -> Moment:
    """The deciding second in which the other DUTs came closest to `dut`, and its loads."""
    chosen = [(second, loads) for second, loads in moments if second in seconds]
    return max(chosen, key=lambda moment: max((load.busy - moment[1][dut].busy
                                               for o, load in moment[1].items() if o != dut), default=0.0))


def _ranges(seconds: list[int]) -> str:
    """[1, 2, 3, 7] -> "1–3, 7"."""
    runs: list[list[int]] = []
    for second in sorted(seconds):
        if runs and second == runs[-1][-1] + 1:
            runs[-1].append(second)
        else:
            runs.append([second])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def _in_seconds(seconds: list[int]) -> str:
    shown = [s for s in seconds if s > 0]
    return f" (second(s) {_ranges(shown)})" if shown else ""


def _seconds_text(seconds: list[int], moments: list[Moment]) -> str:
    if seconds == [0]:
        return "the run (whole-run figures)"
    total = len([s for s, _ in moments if s > 0])
    return f"second(s) {_ranges(seconds)} of {total}"


def _share_loads(evidence: Evidence, result: Verdict) -> dict[str, Load]:
    """Per DUT with a timed single-threaded translator, its share of one core as a Load (the idle runs' mean
    or the failing trial's, whichever is higher); evidence lines for every DUT timed."""
    shares = evidence.translator_share
    failing = evidence.failing.translator_share if evidence.failing else {}
    if not shares and not failing:
        result.evidence.append("no user-space translator process to time: in-kernel translation, NAT and "
                               "forwarding run in softirq and show only in per-CPU time")
        return {}
    loads = {}
    for dut in sorted(set(shares) | set(failing)):
        runs = evidence.share_runs or evidence.runs
        line = f"{dut} translator used {shares.get(dut, 0.0):.1f} % of one CPU at the rate (mean of " \
               f"{runs} run(s))"
        if dut in failing:
            line += f", {failing[dut]:.1f} % in the failing trial above it"
        result.evidence.append(line)
        top = max(shares.get(dut, 0.0), failing.get(dut, 0.0))
        if evidence.single_threaded is None and top >= SATURATED_SHARE:
            result.evidence.append(f"{dut}: its translator's execution model is not recorded (a store from "
                                   "before execution_model): whether one core is its limit is not known")
        if evidence.single_threaded:  # one thread: its share is one core's load, comparable with a core's
            what = f"its single-threaded translator {top:.1f} % of one core"
            loads[dut] = Load(top, what, what + f" (≥ {SATURATED_SHARE:.0f} %)" if top >= SATURATED_SHARE
                              else "")
    return loads


def _cpu_means(rows: list[dict[str, float]]) -> tuple[float, float, float, float] | None:
    """Mean idle, kernel (sys+irq+softirq) and user time of the CPU rows, and the highest softirq of one of
    them, % (None without rows)."""
    if not rows:
        return None
    idle = sum(r.get("idle", 0.0) for r in rows) / len(rows)
    kernel = sum(sum(r.get(c, 0.0) for c in KERNEL_COLUMNS) for r in rows) / len(rows)
    user = sum(r.get("usr", 0.0) + r.get("nice", 0.0) for r in rows) / len(rows)
    return idle, kernel, user, max(r.get("softirq", 0.0) for r in rows)


def _shared_cpu_means(evidence: Evidence, cpus: tuple[int, ...]) -> tuple[float, float, float, float] | None:
    return _cpu_means([evidence.cpu_use[str(c)] for c in cpus if str(c) in evidence.cpu_use])


def _cpu_list(cpus: tuple[int, ...] | set[int]) -> str:
    return format_cpu_list(sorted(cpus))


def _placement_blocks(evidence: Evidence, result: Verdict) -> bool:
    """True (with the reason as evidence) when per-CPU time cannot be charged to one DUT."""
    sets = evidence.dut_cpus
    if len(sets) < 2:
        result.evidence.append("no per-DUT CPU placement recorded: per-CPU idle time cannot be charged "
                               "to a DUT")
        return True
    shared = set.intersection(*(set(c) for c in sets.values()))
    if shared:
        means = _shared_cpu_means(evidence, tuple(shared))
        note = f"both DUTs ran on CPU {_cpu_list(shared)}, so their CPU use competes and cannot be told apart"
        if means and means[0] < BUSY_IDLE:
            note += f"; that CPU was {means[0]:.1f} % idle: the shared CPU, not one DUT, was full"
            if evidence.emulated:
                note += " (machine-wide figure: other processes on it count too)"
            result.reason = (f"both DUTs ran on CPU {_cpu_list(shared)}, which was full: the shared CPU, "
                             "not one DUT")
        result.evidence.append(note)
        return True
    if evidence.unpinned:
        whose = "their" if len(evidence.unpinned) > 1 else "its"
        result.evidence.append(f"{' and '.join(evidence.unpinned)} not pinned to CPUs: {whose} threads may "
                               "have run on a DUT's CPUs, so idle time there is not the DUT's alone (pin "
                               "them: [tester] sender_cpus/receiver_cpus, the setup's knot_cpus)")
        return True
    test = set(evidence.test_cpus)
    mixed = {dut: set(c) & test for dut, c in sets.items() if set(c) & test}
    if mixed:
        result.evidence.append("; ".join(f"{dut}'s CPU {_cpu_list(c)} also ran the tester/Knot"
                                         for dut, c in sorted(mixed.items()))
                               + ": idle time there is not the DUT's alone")
        return True
    return False


def _core_load(rows: dict[str, dict[str, float]]) -> Load:
    """A DUT's busiest active core in one second (or over the run), and whether a core was saturated."""
    cpu, row = min(rows.items(), key=lambda item: (item[1].get("idle", 0.0), item[0]))
    idle = row.get("idle", 0.0)
    soft_cpu, soft = max(((c, r.get("softirq", 0.0)) for c, r in rows.items()), key=lambda item: item[1])
    load = Load(100.0 - idle, f"its busiest core CPU {cpu} {idle:.1f} % idle")
    if idle < BUSY_IDLE:
        return replace(load, saturated=f"CPU {cpu} {idle:.1f} % idle, < {BUSY_IDLE:.0f} %")
    if soft >= SATURATED_SHARE:
        return replace(load, saturated=f"CPU {soft_cpu} {soft:.1f} % in softirq, ≥ {SATURATED_SHARE:.0f} %: "
                                       "in-kernel packet work")
    return load


def _heavier(core: Load | None, share: Load | None) -> Load | None:
    """The heavier of a DUT's busiest core and its translator's share, saturated when either is."""
    if core is None or share is None:
        return core or share
    heavier = core if core.busy >= share.busy else share
    return replace(heavier, saturated="; ".join(x for x in (core.saturated, share.saturated) if x))


def _moments(cores: list[Moment], shares: dict[str, Load]) -> list[Moment]:
    """Per second (or the run) each DUT's load: its busiest core then, its translator's share always."""
    if not cores:
        return [(0, dict(shares))] if shares else []
    return [(second, {dut: load for dut in sorted(set(loads) | set(shares))
                      if (load := _heavier(loads.get(dut), shares.get(dut))) is not None})
            for second, loads in cores]


def _core_moments(evidence: Evidence, result: Verdict) -> list[Moment]:
    """Each DUT's busiest core second by second (its active cores; every DUT's seconds present), or over
    the run when no per-second figures were recorded (the caller skips it when per-CPU time cannot be charged
    to a DUT: _placement_blocks). Adds
    each DUT's whole-run means and the time shape of its busiest core as evidence."""
    if evidence.separate_hosts:
        result.evidence.append("each DUT's CPU figures are its own host's (active cores: "
                               + ", ".join(f"{dut} CPU {_cpu_list(c)}" for dut, c in
                                           sorted(evidence.dut_cpus.items())) + ")")
    elif evidence.emulated:
        result.evidence.append("per-CPU time is machine-wide: any other process on a DUT's CPU counts too")
    seconds: dict[str, dict[int, Load]] = {}
    means: dict[str, Load] = {}
    for dut, cpus in sorted(evidence.dut_cpus.items()):
        rows = evidence.dut_cpu_use.get(dut, {})
        found = _cpu_means(list(rows.values()))
        if found is None:
            result.evidence.append(f"{dut}: no CPU samples of CPU {_cpu_list(cpus)}")
            continue
        means[dut] = _core_load(rows)
        result.evidence.append(f"{dut} (CPU {_cpu_list(cpus)}): {found[0]:.1f} % idle, {found[1]:.1f} % "
                               f"kernel (softirq/system: in-kernel NAT, forwarding), {found[2]:.1f} % user "
                               "(mean of its active cores over the run)")
        per_second = {second: _core_load(cpu_rows) for second, cpu_rows in evidence.dut_seconds(dut)}
        if per_second:
            seconds[dut] = per_second
            result.evidence.append(_shape_text(dut, per_second, evidence))
    if seconds and set(seconds) == set(means):
        common = sorted(set.intersection(*(set(s) for s in seconds.values())))
        return [(second, {dut: per[second] for dut, per in seconds.items()}) for second in common]
    return [(0, means)] if means else []


def _shape_text(dut: str, per_second: dict[int, Load], evidence: Evidence) -> str:
    """The time shape of a DUT's busiest core: its lowest and highest idle time and the seconds saturated."""
    low = max(per_second, key=lambda s: per_second[s].busy)
    high = min(per_second, key=lambda s: per_second[s].busy)
    saturated = [s for s, load in per_second.items() if load.saturated]
    runs = f"per-second means of {evidence.runs} run(s)" if evidence.runs else "per-second figures"
    text = (f"{dut}'s busiest core second by second ({runs}, {len(per_second)} s): "
            f"{100 - per_second[low].busy:.1f} % idle at its lowest (second {low}), "
            f"{100 - per_second[high].busy:.1f} % at its highest (second {high})")
    return text + (f"; saturated in second(s) {_ranges(saturated)}" if saturated else "; never saturated")


def _tester_saturated(evidence: Evidence, moments: list[Moment]) -> tuple[list[int], str] | None:
    """The seconds (0: the run) in which the tester's or Knot's pinned CPUs (emulation) had < BUSY_IDLE %
    idle time, and one line saying so; None when they never did or were not sampled. Whole-run moments are
    matched with the test CPUs' whole-run means."""
    test = evidence.test_seconds()
    if not test:
        return None
    if any(second == 0 for second, _ in moments):
        rows = {str(c): evidence.cpu_use[str(c)] for c in evidence.test_cpus if str(c) in evidence.cpu_use}
        busy = [(0, _core_load(rows))] if rows else []
    else:
        wanted = {second for second, _ in moments}
        busy = [(second, _core_load(rows)) for second, rows in test if second in wanted]
    busy = [(second, load) for second, load in busy if load.busy > 100.0 - BUSY_IDLE]
    if not busy:
        return None
    worst = max(busy, key=lambda item: item[1].busy)[1]
    seconds = [second for second, _ in busy]
    when = f"in second(s) {_ranges(seconds)}" if seconds != [0] else "over the run"
    return seconds, (f"tester/Knot CPU {_cpu_list(evidence.test_cpus)} < {BUSY_IDLE:.0f} % idle {when} "
                     f"({worst.what.replace('its busiest core ', '')})")


def drops_by_side(drops: dict[str, float],
                  queue_devices: dict[str, tuple[str, ...]]) -> dict[str, dict[str, float]]:
    """Drops charged to the side that could not keep up, {side: {counter: packets}}.

    A veth drop shows twice (tx_dropped at the sender, rx_dropped at the receiver whose backlog was full):
    only rx_dropped counts, charged to the receiver. The tx_dropped of a translator's queue device (what its
    backend declares, per host in `queue_devices`: a TUN device) is its queue to the translator process
    overflowing: charged to that DUT. A UDP socket's receive-buffer errors are charged to the host whose
    application did not read fast enough (InErrors repeats them, so it is not added).
    """
    sides: dict[str, dict[str, float]] = {}
    for counter, value in drops.items():
        host, *middle, name = counter.split(":")
        interface = middle[0] if middle else ""
        side = SIDE_OF_HOST.get(host)
        counts = (name in ("rx_dropped", "rx_missed", "rx_errors", "RcvbufErrors")
                  or (name == "tx_dropped" and interface in queue_devices.get(host, ())))
        if side and counts and value >= MIN_DROPS:
            sides.setdefault(side, {})[counter] = value
    return sides


def _failing_drops(failing: FailingTrial | None, evidence: Evidence, result: Verdict) -> str | None:
    if failing is None:
        result.evidence.append(f"no failed trial above {evidence.rate_qps:,.0f} queries/s in the store: drop "
                               "counters not read (at a passing rate they show at most the loss allowance)")
        return None
    sides = drops_by_side(failing.drops, evidence.queue_devices)
    head = (f"failing trial just above the rate: {failing.rate_qps:,.0f} queries/s for "
            f"{failing.duration_s:g} s, loss {100 * failing.loss_ratio:.3f} %")
    if not sides:
        result.evidence.append(head + f"; no drop counter rose by {MIN_DROPS:.0f} packets or more")
        return None
    result.evidence.append(head)
    for side, counters in sorted(sides.items()):
        for counter, value in sorted(counters.items()):
            result.evidence.append(f"{counter}: {value:,.0f} packets dropped in that trial ({side})")
    totals = {side: sum(counters.values()) for side, counters in sides.items()}
    return max(totals, key=lambda side: totals[side])
