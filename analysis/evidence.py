"""What the store holds beyond the throughput summaries, in the shapes the verdict, the latency table and the
per-DUT idle figures need: per configuration, the idle capture at the median rate (CPU samples, the DUTs'
translator CPU time, the tester's latency of each run), where each DUT ran, and the failing trial just above
the throughput rate (its drop counters show where the chain overflowed).

Built from the store's plain records (xlatbench.analysis.records.load_records), so it depends on the
record fields documented in docs/ARCHITECTURE.md only: `idle-mean`, `idle-run` and `trial`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from xlatbench.scripts.envs import implementation_label

# Columns of a CPU sample counted as kernel work (in-kernel NAT and forwarding run in softirq), %.
KERNEL_COLUMNS = ("sys", "irq", "softirq")


@dataclass(frozen=True)
class FailingTrial:
    """The failing trial with the lowest rate above the throughput rate.

    rate_qps: its offered rate, queries/s. loss_ratio: its loss, fraction. duration_s: its length, s.
    drops: per counter ("host:interface:counter"), increase during the trial, packets.
    translator_share: per DUT, its translator processes' CPU time over the trial, % of one CPU.
    """

    rate_qps: float
    loss_ratio: float
    duration_s: float
    drops: dict[str, float]
    translator_share: dict[str, float]


@dataclass(frozen=True)
class Evidence:
    """Everything recorded about one configuration while it carried its median rate.

    rate_qps: the median throughput rate the idle runs offered, queries/s. runs: idle runs, count.
    translator_share: per DUT, user-space translator CPU time, mean over the runs, % of one CPU.
    dut_cpus: per DUT, the CPUs it was confined to. test_cpus: CPUs the tester and Knot were pinned to
        (empty when not pinned or unknown).
    cpu_use: per CPU, mean over the runs and seconds of each /proc/stat column, %.
    per_second: the idle-mean record's per-second averages (scripts.cpuload.mean_per_second).
    failing: the failing trial just above rate_qps, or None when the store has none.
    single_threaded: the translators are single-threaded user-space processes (tayga): one of them can use
        at most one CPU.
    """

    setup: str
    topology: str
    cores: int
    rate_qps: float
    interval_s: float
    runs: int
    implementation: str
    emulated: bool
    translator_share: dict[str, float]
    dut_cpus: dict[str, tuple[int, ...]]
    test_cpus: tuple[int, ...]
    cpu_use: dict[str, dict[str, float]]
    per_second: list[dict[str, Any]] = field(default_factory=list)
    failing: FailingTrial | None = None
    single_threaded: bool = False
    tun_devices: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Latency:
    """Latency at the median throughput rate (RFC 8219 section 7.2), over the idle runs.

    typical_s: median of the per-trial medians, s. worst_s: median of the per-trial 99.9th percentiles, s.
    trials: trials with latency figures, count. resolution_s / relative_resolution: the tester histogram's
    resolution (absolute, s; relative, fraction of the value). measured: what the tester timed.
    """

    setup: str
    cores: int
    rate_qps: float
    implementation: str
    trials: int
    typical_s: float | None
    worst_s: float | None
    resolution_s: float | None
    relative_resolution: float | None
    measured: str


def _key(record: dict[str, Any]) -> tuple[str, int]:
    return record["setup"]["name"], int(record["cores"])


def evidence_from(records: list[dict[str, Any]]) -> list[Evidence]:
    """One Evidence per idle capture (`idle-mean` record) in the store, in store order."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    trials: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in records:
        if record.get("type") == "idle-run":
            runs.setdefault(_key(record), []).append(record)
        elif record.get("type") == "trial":
            trials.setdefault(_key(record), []).append(record)
    return [_evidence(mean, runs.get(_key(mean), []), trials.get(_key(mean), []))
            for mean in records if mean.get("type") == "idle-mean"]


def _evidence(mean: dict[str, Any], runs: list[dict[str, Any]], trials: list[dict[str, Any]]) -> Evidence:
    dut = mean.get("dut") or {}
    translators = dut.get("translators") or {}
    rate = float(mean["rate_qps"])
    return Evidence(
        setup=mean["setup"]["name"], topology=mean["setup"].get("topology", mean["setup"].get("kind", "?")),
        cores=int(mean["cores"]), rate_qps=rate, interval_s=float(mean.get("interval_s") or 1.0),
        runs=int(mean.get("runs", len(runs))), implementation=implementation_label(dut),
        emulated="namespaces" in dut,
        translator_share=_mean_share([r.get("trial", {}) for r in runs]),
        dut_cpus=dut_cpu_sets(mean), test_cpus=tester_cpus(mean),
        cpu_use=_cpu_use(mean.get("per_second") or []), per_second=mean.get("per_second") or [],
        failing=failing_trial_above(trials, rate),
        single_threaded=any(isinstance(t, dict) and t.get("implementation") == "tayga"
                            for t in translators.values()),
        tun_devices={host: (info["tun_device"],) for host, info in translators.items()
                     if isinstance(info, dict) and info.get("tun_device")},
    )


def _share(trial: dict[str, Any]) -> dict[str, float]:
    duration = float(trial.get("duration_s") or 0)
    cpu = (trial.get("dut_stats") or {}).get("cpu_s") or {}
    return {dut: 100.0 * float(s) / duration for dut, s in cpu.items()} if duration > 0 else {}


def _mean_share(trials: list[dict[str, Any]]) -> dict[str, float]:
    shares: dict[str, list[float]] = {}
    for trial in trials:
        for dut, share in _share(trial).items():
            shares.setdefault(dut, []).append(share)
    return {dut: sum(v) / len(v) for dut, v in shares.items()}


def _drops(trial: dict[str, Any]) -> dict[str, float]:
    out = {}
    for hop, counters in ((trial.get("dut_stats") or {}).get("counters") or {}).items():
        for name, value in counters.items():
            lowered = name.lower()
            if any(w in lowered for w in ("drop", "error", "missed", "rcvbuf")) and float(value) > 0:
                out[f"{hop}:{name}"] = float(value)
    return out


def failing_trial_above(trials: list[dict[str, Any]], rate_qps: float) -> FailingTrial | None:
    """The failed (DUT-loss) trial with the lowest rate above `rate_qps`; full-length RFC 8219 trials are
    preferred to the fast search's short ones. None when no trial above the rate failed."""
    failed = [r for r in trials if r.get("trial", {}).get("verdict") == "fail"
              and float(r["trial"]["rate_qps"]) > rate_qps]
    exact = [r for r in failed if (r.get("search") or {}).get("rfc8219_exact")]
    chosen = min(exact or failed, key=lambda r: float(r["trial"]["rate_qps"]), default=None)
    if chosen is None:
        return None
    trial = chosen["trial"]
    return FailingTrial(rate_qps=float(trial["rate_qps"]), loss_ratio=float(trial.get("loss_ratio", 0.0)),
                        duration_s=float(trial.get("duration_s") or 0), drops=_drops(trial),
                        translator_share=_share(trial))


def dut_cpu_sets(record: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Per DUT, the CPUs its cpuset allowed ({} when the record has no placement)."""
    placement = record.get("dut_cpus") or {}
    applied = placement.get("applied") if isinstance(placement, dict) else None
    if not isinstance(applied, dict):
        return {}
    return {dut: tuple(sorted(int(c) for c in info.get("cpus", [])))
            for dut, info in sorted(applied.items()) if isinstance(info, dict) and info.get("cpus")}


def _cpus(text: Any) -> set[int]:
    if isinstance(text, int):
        return {text}
    if isinstance(text, list | tuple):
        return {int(c) for c in text}
    cpus: set[int] = set()
    for part in str(text or "").replace(" ", "").strip("[]").split(","):
        if "-" in part:
            low, high = part.split("-")
            cpus.update(range(int(low), int(high) + 1))
        elif part.isdigit():
            cpus.add(int(part))
    return cpus


def tester_cpus(record: dict[str, Any]) -> tuple[int, ...]:
    """CPUs the tester's threads and Knot were pinned to, as recorded (empty when not pinned)."""
    options = (record.get("tester") or {}).get("options") or {}
    setup = record.get("setup") or {}
    setup_options = setup.get("options") if isinstance(setup.get("options"), dict) else setup
    cpus = _cpus(options.get("sender_cpus")) | _cpus(options.get("receiver_cpus"))
    cpus |= _cpus(setup_options.get("knot_cpus"))
    return tuple(sorted(cpus))


def shared_with_test_system(record: dict[str, Any]) -> tuple[int, ...]:
    """DUT CPUs of this record that the tester or Knot also ran on (emulation on a small machine)."""
    placement = record.get("dut_cpus") or {}
    dut = set(placement.get("cpus") or []) if isinstance(placement, dict) else set()
    for cpus in dut_cpu_sets(record).values():
        dut |= set(cpus)
    return tuple(sorted(dut & set(tester_cpus(record))))


def _cpu_use(per_second: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    columns: dict[str, dict[str, list[float]]] = {}
    for second in per_second:
        for cpu, values in (second.get("cpus") or {}).items():
            for column, value in values.items():
                columns.setdefault(cpu, {}).setdefault(column, []).append(float(value))
    return {cpu: {col: sum(v) / len(v) for col, v in cols.items()} for cpu, cols in columns.items()}


def latency_from(records: list[dict[str, Any]]) -> list[Latency]:
    """Latency per idle capture, from the tester's JSON of each idle run (trials at the median rate)."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in records:
        if record.get("type") == "idle-run":
            runs.setdefault(_key(record), []).append(record)
    out = []
    for key, mine in runs.items():
        docs = [(r.get("raw") or {}).get("latency") or {} for r in mine]
        docs = [d for d in docs if d.get("p50") is not None]
        first = docs[0] if docs else {}
        out.append(Latency(
            setup=key[0], cores=key[1], rate_qps=float(mine[0].get("rate_qps", 0.0)),
            implementation=implementation_label(mine[0].get("dut") or {}), trials=len(docs),
            typical_s=statistics.median(float(d["p50"]) for d in docs) if docs else None,
            worst_s=statistics.median(float(d["p999"]) for d in docs if d.get("p999") is not None)
            if any(d.get("p999") is not None for d in docs) else None,
            resolution_s=first.get("resolution_s"), relative_resolution=first.get("relative_resolution"),
            measured=str(first.get("of", "")),
        ))
    return out
