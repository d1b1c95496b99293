"""Which of the two DUTs limited the chain, from what was recorded while it carried its median rate.

The paper reads it off per-core idle time on separate DUT hosts: the DUT with (nearly) no idle time is the
bottleneck. In emulation every host shares the same cores with the tester and Knot, so per-core idle time
cannot be attributed to a DUT; what can be is the CPU time of each DUT's user-space translator process (a
single-threaded tayga saturates at 100 % of one core) and where packets were dropped along the chain. The
verdict says which evidence it used and when the evidence does not decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xlatbench.analysis.records import IdleCapture

# A single-threaded translator above this share of one core has no headroom left, %.
SATURATED_SHARE = 90.0
# A CPU with less idle time than this was fully used, % (the paper's bottleneck DUT showed 0-10 %).
BUSY_IDLE = 10.0
# Drops per run below this are noise (a stray packet), packets.
MIN_DROPS = 10.0


@dataclass
class Verdict:
    """setup, cores: the configuration. bottleneck: "dut1", "dut2" or None when undecided.
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
        if shares[top] >= 1.5 * max(second, 1e-9):
            result.evidence.append(f"{top} used at least 1.5 × the CPU of the other DUT, though below "
                                   f"{SATURATED_SHARE:.0f} % of a core")
            return top
    return None


def _drops(capture: IdleCapture, result: Verdict) -> str | None:
    per_dut: dict[str, float] = {}
    for counter, value in sorted(capture.hop_drops.items()):
        if value < MIN_DROPS:
            continue
        host = counter.split(":", 1)[0]
        result.evidence.append(f"{counter}: {value:,.0f} packets per run")
        if host.startswith("dut") or host == "napt":
            dut = "dut1" if host == "napt" else host
            per_dut[dut] = per_dut.get(dut, 0.0) + value
    if not per_dut:
        return None
    return max(per_dut, key=lambda dut: per_dut[dut])


def _idle_note(capture: IdleCapture, result: Verdict) -> None:
    if not capture.per_second:
        return
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
    result.evidence.append(note)
