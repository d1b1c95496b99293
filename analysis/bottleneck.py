"""The one bottleneck verdict (console after each idle capture, report, verdicts.json): which DUT limited
the chain, said only on evidence of saturation, otherwise "not determined" and why.

One evidence shape (analysis.evidence.Evidence.dut_cpu_use) whatever the world: per DUT, the per-core
figures of its active CPUs -- its own host's cores online for the capture on a real testbed (the idle-mean
record's `hosts` and the hotplug placement `applied.<dut>.online`), or its CPU set on the emulation's
shared machine. The paper reads the verdict off per-core idle time on separate DUT hosts. A DUT is named
only when it is saturated --
- its active cores had < BUSY_IDLE % idle time (kernel work counts: softirq/system, in-kernel NAT44,
  forwarding, Jool), or
- its single-threaded user-space translator (execution_model: one thread per instance) used
  >= SATURATED_SHARE % of one core, or
- one of its active cores spent >= SATURATED_SHARE % in softirq (an in-kernel translator such as Jool
  saturating the core its packets land on) --
while the other DUT is clearly idler (CLEAR_MARGIN points more idle time, or that much less of a core),
and only at a rate that is a number (not the lower bound of a search that never failed). On the
emulation's shared machine the DUTs also need disjoint CPU sets the tester and Knot did not use.
Drop counters are read from the failing trial just above the throughput rate (at the passing rate they are at
most the loss allowance): they show where the chain overflowed and must not contradict the saturated DUT.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..setups.cpulist import format_cpu_list
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
    why). evidence: one sentence per finding, each number with its unit."""

    setup: str
    cores: int
    rate_qps: float
    implementation: str
    bottleneck: str | None
    evidence: list[str] = field(default_factory=list)
    reason: str = ""
    rate_label: str = ""  # the rate as printed: '≥ R' when its search never failed, 'R †' over fewer runs

    def headline(self) -> str:
        if self.bottleneck:
            return f"bottleneck {self.bottleneck}"
        return f"bottleneck not determined: {self.reason}"

    def text(self) -> str:
        rate = self.rate_label or f"{self.rate_qps:,.0f}"
        head = (f"{self.setup}, {self.cores} DUT core(s), at {rate} queries/s "
                f"({self.implementation}): {self.headline()}")
        return head + "".join(f"\n  - {line}" for line in self.evidence)


def verdict(evidence: Evidence) -> Verdict:
    result = Verdict(evidence.setup, evidence.cores, evidence.rate_qps, evidence.implementation, None,
                     rate_label=rate_text(evidence.rate_qps, evidence.rate_lower_bound,
                                          evidence.rate_partial))
    idle: dict[str, float] = {}
    saturated = _translator_saturation(evidence, result) | _cpu_saturation(evidence, result, idle)
    drop_side = _failing_drops(evidence.failing, evidence, result)
    if evidence.rate_lower_bound:
        result.reason = ("the rate is a lower bound (its search never failed): the chain was not at its "
                         "throughput")
    elif len(saturated) > 1:
        result.reason = f"{' and '.join(sorted(saturated))} both show saturation"
    elif saturated:
        (dut,) = saturated
        idler = _clearly_idler(evidence, dut, idle)
        if idler is not None:
            result.reason = idler
        elif drop_side in ("dut1", "dut2") and drop_side != dut:
            result.reason = (f"{dut} is saturated but the failing trial dropped most at {drop_side}: "
                             "the evidence disagrees")
        else:
            result.bottleneck = dut
    else:
        result.reason = result.reason or "no DUT showed saturation"
        if drop_side:
            result.reason += f" (the failing trial above the rate dropped most at {drop_side})"
    return result


def _clearly_idler(evidence: Evidence, dut: str, idle: dict[str, float]) -> str | None:
    """None when every other DUT is clearly idler than the saturated `dut`; else why it is not."""
    others = sorted(set(idle) | set(evidence.translator_share) | set(evidence.dut_cpu_use) - {dut})
    others = [o for o in others if o != dut]
    if not others:
        return f"{dut} is saturated but nothing was recorded of the other DUT"
    for other in others:
        if dut in idle and other in idle:
            if idle[other] < idle[dut] + CLEAR_MARGIN:
                return (f"{dut} is saturated but {other} was not clearly idler ({idle[dut]:.1f} % and "
                        f"{idle[other]:.1f} % idle, less than {CLEAR_MARGIN:.0f} points apart)")
            continue
        shares = evidence.translator_share
        if dut in shares and other in shares:
            if shares[other] > shares[dut] - CLEAR_MARGIN:
                return (f"{dut} is saturated but {other}'s translator was about as busy ({shares[dut]:.1f} % "
                        f"and {shares[other]:.1f} % of a core)")
            continue
        return f"{dut} is saturated but {other}'s load is unknown"
    return None


def _translator_saturation(evidence: Evidence, result: Verdict) -> set[str]:
    shares = evidence.translator_share
    failing = evidence.failing.translator_share if evidence.failing else {}
    if not shares and not failing:
        result.evidence.append("no user-space translator process to time: in-kernel translation, NAT and "
                               "forwarding run in softirq and show only in per-CPU time")
        return set()
    saturated = set()
    for dut in sorted(set(shares) | set(failing)):
        line = f"{dut} translator used {shares.get(dut, 0.0):.1f} % of one CPU at the rate (mean of " \
               f"{evidence.runs} run(s))"
        if dut in failing:
            line += f", {failing[dut]:.1f} % in the failing trial above it"
        result.evidence.append(line)
        top = max(shares.get(dut, 0.0), failing.get(dut, 0.0))
        if evidence.single_threaded is None and top >= SATURATED_SHARE:
            result.evidence.append(f"{dut}: its translator's execution model is not recorded (a store from "
                                   "before execution_model): whether one core is its limit is not known")
        if evidence.single_threaded and top >= SATURATED_SHARE:
            saturated.add(dut)
            result.evidence.append(f"{dut}: a single-threaded translator at ≥ {SATURATED_SHARE:.0f} % of a "
                                   "core is saturated")
    return saturated


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


def _cpu_saturation(evidence: Evidence, result: Verdict, idle: dict[str, float]) -> set[str]:
    """DUTs whose active cores were saturated (< BUSY_IDLE % idle, or one core >= SATURATED_SHARE % in
    softirq); `idle` gets each DUT's mean idle time of its active cores, %."""
    if not evidence.separate_hosts and _placement_blocks(evidence, result):
        return set()
    if evidence.separate_hosts:
        result.evidence.append("each DUT's CPU figures are its own host's (active cores: "
                               + ", ".join(f"{dut} CPU {_cpu_list(c)}" for dut, c in
                                           sorted(evidence.dut_cpus.items())) + ")")
    elif evidence.emulated:
        result.evidence.append("per-CPU time is machine-wide: any other process on a DUT's CPU counts too")
    saturated = set()
    for dut, cpus in sorted(evidence.dut_cpus.items()):
        means = _cpu_means(list(evidence.dut_cpu_use.get(dut, {}).values()))
        if means is None:
            result.evidence.append(f"{dut}: no CPU samples of CPU {_cpu_list(cpus)}")
            continue
        idle[dut] = means[0]
        result.evidence.append(f"{dut} (CPU {_cpu_list(cpus)}): {means[0]:.1f} % idle, {means[1]:.1f} % "
                               f"kernel (softirq/system: in-kernel NAT, forwarding), {means[2]:.1f} % user")
        if means[0] < BUSY_IDLE:
            saturated.add(dut)
            result.evidence.append(f"{dut}'s active cores were < {BUSY_IDLE:.0f} % idle: saturated")
        elif means[3] >= SATURATED_SHARE:
            saturated.add(dut)
            result.evidence.append(f"{dut}: a core spent {means[3]:.1f} % in softirq "
                                   f"(≥ {SATURATED_SHARE:.0f} %): in-kernel packet work saturated it")
    return saturated


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
