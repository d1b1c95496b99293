"""Read a campaign's results store into the shapes the report needs.

The store (xlatbench.scripts.store) holds one JSON record per line; the report uses three record types:
`summary` (a repeated search at one core count), `idle-run` (one full-length trial at the median rate with
per-second CPU samples and the DUTs' per-trial statistics) and `idle-mean` (the per-second average of the
idle runs). Trials are not needed: summaries already carry median, minimum and maximum.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlatbench.analysis.evidence import shared_with_test_system
from xlatbench.scripts.envs import implementation_label


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
    shared_cpus: DUT CPUs the tester or Knot also ran on (emulation on a small machine), else empty.
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
    shared_cpus: tuple[int, ...] = ()


@dataclass
class Series:
    """All core counts of one setup searched with one method and one [[search]] table (one table of the
    paper). search: the [[search]] table's name ("" when the store does not say)."""

    setup: str
    topology: str
    method: str
    rfc8219_exact: bool
    conditions: dict[str, Any]
    cells: dict[int, Throughput] = field(default_factory=dict)
    search: str = ""


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


def load_records(path: Path) -> list[dict[str, Any]]:
    """Complete records of a store file; a torn last line (a run killed while writing) is skipped."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ReportError(f"cannot read the results store {path}: {err.strerror}") from None
    records = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ReportError(f"{path}:{number}: not a JSON record ({err.msg})") from None
    return records


def load_campaign(path: Path) -> Campaign:
    records = load_records(path)
    if not records:
        raise ReportError(f"{path} holds no records: run a campaign first (xlatbench campaign run FILE)")
    summaries = [r for r in records if r.get("type") == "summary"]
    idle_runs = [r for r in records if r.get("type") == "idle-run"]
    idle_means = [r for r in records if r.get("type") == "idle-mean"]
    if not summaries:
        raise ReportError(f"{path} has {len(records)} records but no finished search summary yet: "
                          "let the campaign finish (or resume it) and report again")
    first = records[0]
    return Campaign(
        path=path,
        name=first.get("campaign", {}).get("name", path.stem),
        series=_series(summaries),
        idle=[_idle(mean, idle_runs) for mean in idle_means],
        host=first.get("host", {}),
        tester=first.get("tester", {}),
    )


def _series(summaries: list[dict[str, Any]]) -> list[Series]:
    grouped: dict[tuple[str, str, str], Series] = {}
    for record in summaries:
        summary = record["summary"]
        setup = record["setup"]
        key = (setup["name"], summary["method"], str(summary.get("settings_name") or ""))
        if key not in grouped:
            grouped[key] = Series(
                setup=setup["name"], topology=setup.get("topology", setup.get("kind", "?")),
                method=summary["method"], rfc8219_exact=bool(summary.get("rfc8219_exact")),
                conditions=_conditions(record), search=key[2],
            )
        stats = summary.get("summary") or {}
        cores = int(record["cores"])
        grouped[key].cells[cores] = Throughput(
            cores=cores, status=summary.get("status", "?"), n=int(stats.get("n", 0)),
            median=stats.get("median"), minimum=stats.get("min"), maximum=stats.get("max"),
            p1=stats.get("p1"), p99=stats.get("p99"), dispersion=stats.get("dispersion"),
            tester_limit_qps=summary.get("tester_limit_qps"),
            implementation=implementation_label(record.get("dut", {})),
            shared_cpus=shared_with_test_system(record),
        )
    return list(grouped.values())


def _conditions(record: dict[str, Any]) -> dict[str, Any]:
    settings = record["summary"].get("settings", {})
    return {
        "trial_s": settings.get("duration_s"),
        "rest_s": settings.get("rest_s"),
        "loss_ratio": settings.get("loss_ratio"),
        "timeout_s": record.get("tester", {}).get("options", {}).get("timeout_s"),
        "repetitions": settings.get("repetitions"),
        "error": settings.get("error_ratio") or settings.get("error_qps"),
    }


def _idle(mean: dict[str, Any], runs: list[dict[str, Any]]) -> IdleCapture:
    setup, cores = mean["setup"]["name"], int(mean["cores"])
    mine = [r for r in runs if r["setup"]["name"] == setup and int(r["cores"]) == cores]
    cpu_share: dict[str, list[float]] = defaultdict(list)
    drops: dict[str, list[float]] = defaultdict(list)
    losses = []
    for run in mine:
        trial = run.get("trial", {})
        duration = float(trial.get("duration_s") or 0)
        stats = trial.get("dut_stats") or {}
        for dut, seconds in (stats.get("cpu_s") or {}).items():
            if duration > 0:
                cpu_share[dut].append(100.0 * float(seconds) / duration)
        for hop, counters in (stats.get("counters") or {}).items():
            for name, value in counters.items():
                if _is_drop(name):
                    drops[f"{hop}:{name}"].append(float(value))
        if trial.get("loss_ratio") is not None:
            losses.append(float(trial["loss_ratio"]))
    return IdleCapture(
        setup=setup, topology=mean["setup"].get("topology", "?"), cores=cores,
        rate_qps=float(mean["rate_qps"]), interval_s=float(mean.get("interval_s", 1.0)),
        runs=int(mean.get("runs", len(mine))), per_second=mean.get("per_second", []),
        dut_cpu_share={dut: sum(v) / len(v) for dut, v in cpu_share.items()},
        hop_drops={hop: sum(v) / len(v) for hop, v in drops.items() if any(v)},
        loss_ratio=sum(losses) / len(losses) if losses else None,
        dut_cpus=mean.get("dut_cpus") or {},
        implementation=implementation_label(mean.get("dut", {})),
        emulated="namespaces" in mean.get("dut", {}),
        tun_devices=_tun_devices(mean.get("dut", {})),
    )


def _tun_devices(dut: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    translators = dut.get("translators") or {}
    return {host: (info["tun_device"],) for host, info in translators.items()
            if isinstance(info, dict) and info.get("tun_device")}


def _is_drop(counter: str) -> bool:
    lowered = counter.lower()
    return any(word in lowered for word in ("drop", "error", "rcvbuf", "sndbuf", "noports")) and \
        "indatagrams" not in lowered
