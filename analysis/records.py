"""Read a campaign's results store into the shapes the report needs.

The store is read through xlatbench.scripts.store, the one reader, into the typed records of
xlatbench.scripts.records (the shared data shape). The report uses three record types: `summary` (a
repeated search at one core count), `idle-run` (one full-length trial at the median rate with per-second CPU
samples and the DUTs' per-trial statistics) and `idle-mean` (the per-second average of the idle runs).
Trials are not needed: summaries already carry median, minimum and maximum.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..scripts.records import IdleMean, IdleRun, Record, SummaryEntry
from ..scripts.store import ResultStore, StoreError


class ReportError(ValueError):
    """The store cannot be reported on; the message names the file and what is missing."""


@dataclass(frozen=True)
class Throughput:
    """One repeated search: a cell of a throughput table.

    cores: DUT cores active, count.
    status: "ok", "tester-limited", "upper-bound-not-failed" or "below-lower-bound".
    n, median, minimum, maximum, p1, p99: throughput over the repetitions, queries/s (None without a number).
    dispersion: (p99 - p1) / median, fraction (None below 20 repetitions).
    tester_limit_qps: the rate at which the tester could not keep up, queries/s (None if never).
    implementation: which DUT implementation produced the number, one line.
    trials: trials the searches ran, count. elapsed_s: their time with rests, s.
    """

    cores: int
    status: str
    n: int
    median: float | None
    minimum: float | None
    maximum: float | None
    p1: float | None
    p99: float | None
    dispersion: float | None
    tester_limit_qps: float | None
    implementation: str
    trials: int = 0
    elapsed_s: float = 0.0


@dataclass
class Series:
    """All core counts of one setup searched with one method (one table of the paper)."""

    setup: str
    topology: str
    method: str
    rfc8219_exact: bool
    conditions: dict[str, Any]
    cells: dict[int, Throughput] = field(default_factory=dict)


@dataclass(frozen=True)
class IdleCapture:
    """CPU use while the chain carried its median rate (the paper's Figures 8-17).

    rate_qps: the offered rate, queries/s. interval_s: sampling period, s.
    per_second: [{"second": i, "runs": k, "cpus": {cpu: {column: mean %}}}] averaged over the runs.
    dut_cpu_share: per DUT, mean share of one CPU its translator processes used during the runs, %.
    hop_drops: per counter ("host:interface:dropped", ...), mean increase per run, packets.
    loss_ratio: mean loss of the runs, fraction.
    emulated: the DUTs were namespaces on this machine, sharing its CPUs with tester and server.
    tun_devices: per host, the TUN devices of its user-space translator.
    """

    setup: str
    topology: str
    cores: int
    rate_qps: float
    interval_s: float
    runs: int
    per_second: list[dict[str, Any]]
    dut_cpu_share: dict[str, float]
    hop_drops: dict[str, float]
    loss_ratio: float | None
    dut_cpus: dict[str, Any]
    implementation: str
    emulated: bool
    tun_devices: dict[str, tuple[str, ...]]


@dataclass
class Campaign:
    """Everything the report needs from one store."""

    path: Path
    name: str
    series: list[Series]
    idle: list[IdleCapture]
    host: dict[str, Any]
    tester: dict[str, Any]


def load_records(path: Path) -> list[Record]:
    """Complete records of a store file; a torn last line (a run killed while writing) is skipped."""
    if not path.exists():
        raise ReportError(f"cannot read the results store {path}: No such file or directory")
    try:
        return list(ResultStore(path).records())
    except StoreError as err:
        raise ReportError(str(err)) from None


def load_campaign(path: Path) -> Campaign:
    records = load_records(path)
    if not records:
        raise ReportError(f"{path} holds no records: run a campaign first (xlatbench campaign run FILE)")
    summaries = [r for r in records if isinstance(r, SummaryEntry)]
    idle_runs = [r for r in records if isinstance(r, IdleRun)]
    if not summaries:
        raise ReportError(f"{path} has {len(records)} records but no finished search summary yet: "
                          "let the campaign finish (or resume it) and report again")
    first = records[0].context
    return Campaign(path=path, name=first.campaign.name, series=series_of(summaries),
                    idle=[_idle(mean, idle_runs) for mean in records if isinstance(mean, IdleMean)],
                    host=first.host, tester=first.tester)


def series_of(summaries: list[SummaryEntry]) -> list[Series]:
    """One Series per (setup, method), in the order of the summaries; a later summary of the same cores
    replaces an earlier one."""
    grouped: dict[tuple[str, str], Series] = {}
    for record in summaries:
        setup = record.context.setup
        key = (record.context.setup_name, record.method)
        if key not in grouped:
            grouped[key] = Series(
                setup=record.context.setup_name, topology=setup.get("topology", setup.get("kind", "?")),
                method=record.method, rfc8219_exact=record.rfc8219_exact, conditions=_conditions(record),
            )
        grouped[key].cells[record.context.cores] = _cell(record)
    return list(grouped.values())


def _cell(record: SummaryEntry) -> Throughput:
    stats = record.stats
    return Throughput(
        cores=record.context.cores, status=record.status, n=stats.n if stats else 0,
        median=stats.median if stats else None, minimum=stats.minimum if stats else None,
        maximum=stats.maximum if stats else None, p1=stats.p1 if stats else None,
        p99=stats.p99 if stats else None, dispersion=stats.dispersion if stats else None,
        tester_limit_qps=record.tester_limit_qps, implementation=record.context.implementation,
        trials=record.trials, elapsed_s=record.elapsed_s,
    )


def _conditions(record: SummaryEntry) -> dict[str, Any]:
    settings = record.settings
    return {
        "trial_s": settings.get("duration_s"),
        "rest_s": settings.get("rest_s"),
        "loss_ratio": settings.get("loss_ratio"),
        "timeout_s": record.context.tester.get("options", {}).get("timeout_s"),
        "repetitions": settings.get("repetitions"),
        "error": settings.get("error_ratio") or settings.get("error_qps"),
    }


def _idle(mean: IdleMean, runs: list[IdleRun]) -> IdleCapture:
    setup, cores = mean.context.setup_name, mean.context.cores
    mine = [r for r in runs if r.context.setup_name == setup and r.context.cores == cores]
    cpu_share, drops = _dut_load(mine)
    losses = [float(run.result["loss_ratio"]) for run in mine if run.result.get("loss_ratio") is not None]
    dut = mean.context.dut
    return IdleCapture(
        setup=setup, topology=mean.context.setup.get("topology", "?"), cores=cores,
        rate_qps=float(mean.rate_qps), interval_s=float(mean.interval_s), runs=mean.runs,
        per_second=mean.per_second,
        dut_cpu_share={d: sum(v) / len(v) for d, v in cpu_share.items()},
        hop_drops={hop: sum(v) / len(v) for hop, v in drops.items() if any(v)},
        loss_ratio=sum(losses) / len(losses) if losses else None,
        dut_cpus=mean.context.dut_cpus or {}, implementation=mean.context.implementation,
        emulated="namespaces" in dut, tun_devices=_tun_devices(dut),
    )


def _dut_load(runs: list[IdleRun]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per DUT, the share of one CPU its translator used in each run (%); per drop counter, its increase
    in each run (packets)."""
    cpu_share: dict[str, list[float]] = defaultdict(list)
    drops: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        duration = float(run.result.get("duration_s") or 0)
        stats = run.result.get("dut_stats") or {}
        for dut, seconds in (stats.get("cpu_s") or {}).items():
            if duration > 0:
                cpu_share[dut].append(100.0 * float(seconds) / duration)
        for hop, counters in (stats.get("counters") or {}).items():
            for name, value in counters.items():
                if _is_drop(name):
                    drops[f"{hop}:{name}"].append(float(value))
    return cpu_share, drops


def _tun_devices(dut: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    translators = dut.get("translators") or {}
    return {host: (info["tun_device"],) for host, info in translators.items()
            if isinstance(info, dict) and info.get("tun_device")}


def _is_drop(counter: str) -> bool:
    lowered = counter.lower()
    return any(word in lowered for word in ("drop", "error", "rcvbuf", "sndbuf", "noports")) and \
        "indatagrams" not in lowered
