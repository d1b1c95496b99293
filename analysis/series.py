"""Load a campaign's results store into series: the shapes the report needs.

The store is read through xlatbench.data.store, the one reader, into the typed records of
xlatbench.data.records (the suite's one data shape). The throughput tables use `summary` records (a
repeated search at one core count: median, minimum, maximum); the idle captures (`idle-run`, `idle-mean`)
and the failing trial just above each median rate (`trial`) become analysis.evidence.Evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.records import Provenance, Record, StatefulResult, SummaryEntry, TrialEntry, provenance
from ..data.store import ResultStore, StoreError
from .evidence import Evidence, evidence_from, shared_with_test_system
from .joinkey import JoinKey, join_key, trial_key


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
    implementation: which DUT implementation produced the number, its short tag (Context.tag; the full
        label is under the report's Conditions).
    trials: trials the searches ran, count. elapsed_s: their time with rests, s.
    shared_cpus: DUT CPUs the tester or Knot also ran on (emulation on a small machine), else empty.
    placement: how the DUTs were placed at this count (setups.placement: "per-dut", "shared-duts",
        "with-test-system", "cpu_map", "own-hosts"), None when not recorded (fake DUTs, old stores).
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
    shared_cpus: tuple[int, ...] = ()
    sessions: int = 4
    mixed: bool = False  # its trials came from more than one suite commit, tester build or host
    placement: str | None = None


@dataclass
class Series:
    """All core counts of one setup searched with one method and one [[search]] table (one table of the
    paper); in a sessions sweep, at one session count. search: the [[search]] table's name; sessions: the
    tester's flows (None when the campaign did not sweep them); flows: the tester's flows either way."""

    setup: str
    topology: str
    method: str
    rfc8219_exact: bool
    conditions: dict[str, Any]
    cells: dict[int, Throughput] = field(default_factory=dict)
    search: str = ""
    sessions: int | None = None
    flows: int = 0

    def key(self, cores: int) -> JoinKey:
        """The join key of this series' cell at `cores` (analysis.joinkey)."""
        return JoinKey(self.setup, cores, self.flows, self.search, self.method)

    @property
    def group(self) -> tuple[str, str]:
        """(method, [[search]] name): one comparison or sessions table per group."""
        return self.method, self.search

    @property
    def label(self) -> str:
        """The setup's name, with the session count in a sweep."""
        return self.setup if self.sessions is None else f"{self.setup}, {self.sessions} tester sessions"



@dataclass
class Campaign:
    """Everything the report needs from one store."""

    path: Path
    name: str
    series: list[Series]
    idle: list[Evidence]
    host: dict[str, Any]
    tester: dict[str, Any]
    records: list[Record] = field(default_factory=list)
    provenances: list[Provenance] = field(default_factory=list)  # every suite/tester/host that measured


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
    if not summaries and not any(isinstance(r, StatefulResult) for r in records):
        raise ReportError(f"{path} has {len(records)} records but no finished search summary yet: "
                          "let the campaign finish (or resume it) and report again")
    first = records[0].context
    return Campaign(path=path, name=first.campaign.name, series=series_of(summaries, mixed_keys(records)),
                    idle=evidence_from(records),
                    host=first.host, tester=first.tester, records=records,
                    provenances=list(dict.fromkeys(provenance(r.context) for r in records)))


def mixed_keys(records: list[Record]) -> set[JoinKey]:
    """Join keys whose trials were measured by more than one suite commit, tester build or host (a resume
    allowed to mix: scripts.records.provenance)."""
    seen: dict[JoinKey, set[Provenance]] = {}
    for record in records:
        if isinstance(record, TrialEntry):
            seen.setdefault(trial_key(record), set()).add(provenance(record.context))
    return {key for key, found in seen.items() if len(found) > 1}


def series_of(summaries: list[SummaryEntry], mixed: set[JoinKey] | None = None) -> list[Series]:
    """One Series per (setup, method, [[search]] name, swept session count), in the order of the summaries; a
    later summary of the same cores replaces an earlier one. mixed: join keys whose cells are marked."""
    grouped: dict[tuple[str, str, str, int], Series] = {}
    for record in summaries:
        setup = record.context.setup
        sessions = record.context.sessions if record.context.swept else None
        key = (record.context.setup_name, record.method, record.settings_name, record.context.sessions)
        if key not in grouped:
            grouped[key] = Series(
                setup=record.context.setup_name, topology=setup.get("topology", setup.get("kind", "?")),
                method=record.method, rfc8219_exact=record.rfc8219_exact, conditions=_conditions(record),
                search=record.settings_name,
                sessions=sessions, flows=record.context.sessions,
            )
        grouped[key].cells[record.context.cores] = _cell(
            record, join_key(record.context, record.settings_name, record.method) in (mixed or set()))
    return list(grouped.values())


def _cell(record: SummaryEntry, mixed: bool = False) -> Throughput:
    stats = record.stats
    return Throughput(
        cores=record.context.cores, status=record.status, n=stats.n if stats else 0,
        median=stats.median if stats else None, minimum=stats.minimum if stats else None,
        maximum=stats.maximum if stats else None, p1=stats.p1 if stats else None,
        p99=stats.p99 if stats else None, dispersion=stats.dispersion if stats else None,
        tester_limit_qps=record.tester_limit_qps, implementation=record.context.tag,
        trials=record.trials, elapsed_s=record.elapsed_s, shared_cpus=shared_with_test_system(record.context),
        sessions=record.context.sessions, mixed=mixed,
        placement=(record.context.dut_cpus or {}).get("placement"),
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
        "error_qps": settings.get("error_qps"),
        "error_ratio": settings.get("error_ratio"),
    }
