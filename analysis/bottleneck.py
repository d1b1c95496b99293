"""Which part of the chain limited it, from what was recorded while it carried its median rate.

The paper reads it off per-core idle time on separate DUT hosts: the DUT with (nearly) no idle time is the
bottleneck. In emulation every host shares the machine's cores with the tester and Knot, so per-core idle
time cannot be attributed to a DUT; what can be is the CPU time of each DUT's user-space translator process
(a single-threaded tayga saturates at 100 % of one core) and where packets were dropped along the chain. The
verdict says which evidence it used, and says "not determined" when the evidence does not decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .records import IdleCapture

# A single-threaded translator above this share of one core has no headroom left, %.
SATURATED_SHARE = 90.0
# A translator using this many times the other DUT's CPU is the likely limit.
DOMINANT_FACTOR = 1.5
# A CPU with less idle time than this was fully used, % (the paper's bottleneck DUT showed 0-10 %).
BUSY_IDLE = 10.0
# Drops per run below this are noise (a stray packet), packets.
MIN_DROPS = 10.0
# Which side of the chain a host belongs to: the tester and the echo server are not DUTs.
SIDE_OF_HOST = {"client": "tester/server", "server": "tester/server", "dut1": "dut1", "napt": "dut1",
                "dut2": "dut2"}


@dataclass
class Verdict:
    """setup, cores: the configuration. bottleneck: "dut1", "dut2", "tester/server" or None (undecided).
    evidence: one sentence per finding, each number with its unit."""

    setup: str
    cores: int
    rate_qps: float
    implementation: str
    bottleneck: str | None
    evidence: list[str] = field(default_factory=list)

    def text(self) -> str:
        head = (f"{self.setup}, {self.cores} DUT core(s), at {self.rate_qps:,.0f} queries/s "
                f"({self.implementation}): ")
        head += f"bottleneck {self.bottleneck}" if self.bottleneck else "bottleneck not determined"
        return head + "".join(f"\n  - {line}" for line in self.evidence)


def verdict(capture: IdleCapture) -> Verdict:
    result = Verdict(capture.setup, capture.cores, capture.rate_qps, capture.implementation, None)
    by_cpu = _translator_cpu(capture, result)
    by_drops = _drops(capture, result)
    _idle_note(capture, result)
    if by_cpu and by_drops and by_cpu != by_drops:
        result.evidence.append(f"CPU time points at {by_cpu} but drops at {by_drops}: the evidence disagrees")
        return result
    result.bottleneck = by_cpu or by_drops
    return result


def _translator_cpu(capture: IdleCapture, result: Verdict) -> str | None:
    shares = capture.dut_cpu_share
    if not shares:
        result.evidence.append("no user-space translator process to time (in-kernel forwarding/NAT runs in "
                               "softirq and shows only in machine-wide CPU time)")
        return None
    for dut, share in sorted(shares.items()):
        result.evidence.append(f"{dut} translator used {share:.1f} % of one CPU (mean over "
                               f"{capture.runs} run(s))")
    top = max(shares, key=lambda dut: shares[dut])
    if shares[top] >= SATURATED_SHARE:
        return top
    if len(shares) > 1:
        second = sorted(shares.values())[-2]
        if shares[top] >= DOMINANT_FACTOR * max(second, 1e-9):
            result.evidence.append(f"{top} used at least {DOMINANT_FACTOR} × the CPU of the other DUT, "
                                   f"though below {SATURATED_SHARE:.0f} % of a core")
            return top
    return None


def drops_by_side(capture: IdleCapture) -> dict[str, dict[str, float]]:
    """Drops per run charged to the side that could not keep up, {side: {counter: packets}}.

    A veth drop shows twice (tx_dropped at the sender, rx_dropped at the receiver whose backlog was full):
    only rx_dropped counts, charged to the receiver. A TUN device's tx_dropped is its queue to the
    translator process overflowing: charged to that DUT. A UDP socket's receive-buffer errors are charged to
    the host whose application did not read fast enough (InErrors repeats them, so it is not added).
    """
    sides: dict[str, dict[str, float]] = {}
    for counter, value in capture.hop_drops.items():
        host, *middle, name = counter.split(":")
        interface = middle[0] if middle else ""
        side = SIDE_OF_HOST.get(host)
        counts = (
            name in ("rx_dropped", "rx_missed", "rx_errors", "RcvbufErrors")
            or (name == "tx_dropped" and interface in capture.tun_devices.get(host, ()))
        )
        if side and counts:
            sides.setdefault(side, {})[counter] = value
    return sides


def _drops(capture: IdleCapture, result: Verdict) -> str | None:
    sides = {side: {c: v for c, v in counters.items() if v >= MIN_DROPS}
             for side, counters in drops_by_side(capture).items()}
    totals = {side: sum(counters.values()) for side, counters in sides.items() if counters}
    for side, counters in sorted(sides.items()):
        for counter, value in sorted(counters.items()):
            result.evidence.append(f"{counter}: {value:,.0f} packets dropped per run ({side})")
    if not totals:
        return None
    return max(totals, key=lambda side: totals[side])


def _idle_note(capture: IdleCapture, result: Verdict) -> None:
    idle: dict[str, list[float]] = {}
    for second in capture.per_second:
        for cpu, columns in second.get("cpus", {}).items():
            if cpu != "all":
                idle.setdefault(cpu, []).append(float(columns.get("idle", 0.0)))
    if not idle:
        return
    means = {cpu: sum(v) / len(v) for cpu, v in idle.items()}
    busy = [cpu for cpu, mean in means.items() if mean < BUSY_IDLE]
    listing = ", ".join(f"CPU {cpu} {mean:.1f} %" for cpu, mean in sorted(means.items()))
    note = f"mean idle time {listing}"
    if busy:
        note += f" (CPU {', '.join(busy)} fully used)"
    if capture.emulated:
        note += "; in emulation these CPUs are shared by tester, Knot and both DUTs"
    shared = _shared_cpus(capture)
    if shared:
        note += f"; both DUTs run on CPU {shared}, so their CPU use competes"
    result.evidence.append(note)


def _shared_cpus(capture: IdleCapture) -> str:
    applied = capture.dut_cpus.get("applied", {}) if isinstance(capture.dut_cpus, dict) else {}
    cpus = [set(v.get("cpus", [])) for v in applied.values() if isinstance(v, dict)]
    common = set.intersection(*cpus) if len(cpus) > 1 else set()
    return ",".join(str(c) for c in sorted(common))
