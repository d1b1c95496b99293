"""The results store's records: the one data shape the campaign writes and the campaign replay and analysis/
read back (JSON Schema: data/schema/store.schema.json; prose: docs/results.md).

Every line of a store is one record: an envelope (key, type, campaign, setup, cores, DUT, tester, host and
the implementation label) and a body by type: "trial" (one trial of a search), "search" (one search's
outcome), "summary" (a repeated search at one core count), "idle-run" (one full-length trial at the median
rate with per-second CPU samples), "idle-mean" (the per-second mean of the idle runs) and "procedure-trial"
(one trial of an RFC 8219 latency, PDV or frame loss rate procedure at the found throughput:
scripts.procedures), "stateful-trial" (one call of an RFC 9693 procedure on a stateful DUT: phase 1, phase 2
or a tear-down) and "stateful-result" (one repetition of an RFC 9693 procedure: scripts.stateful).

Version 2 added the "implementation" label to the envelope, version 3 "sessions", the tester's distinct
flows, version 4 (this module) "rate_of" on the idle records (which search's median they offered, and
whether that is a lower bound or a median over fewer repetitions), "tester_shortfall" in trial results and
"suite" (the suite's git describe, dirty flag and uncommitted difference) in the envelope. Older records
still read: a version-1 label is made from its "dut" description, a record without "sessions" had the tester
options' own flow count (threads x ports_per_thread), an idle record without "rate_of" names its search in
"rate_source", and a record without "suite" has an unrecorded one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

SCHEMA = "xlatbench.results/4"
OLD_SCHEMAS = ("xlatbench.results/1", "xlatbench.results/2", "xlatbench.results/3")
UNLABELLED_SCHEMA = "xlatbench.results/1"  # written before the envelope carried "implementation"

RFC8219_LABEL = "RFC 8219 binary search"
FAST_LABEL = "fast search (retired, not RFC 8219 exact)"  # read from old stores only
MLRSEARCH_LABEL = "MLRsearch (RFC 9971), first goal's conditional throughput (not RFC 8219 exact)"


# A trial during which the hypervisor took at least this share of one of this host's CPUs (%) gets a note:
# its figure may be low for a reason that is neither the DUT nor the tester.
STEAL_NOTE_PCT = 2.0


def steal_note(steal: dict[str, float] | None) -> str | None:
    """One line naming the most stolen CPU when any lost STEAL_NOTE_PCT or more of a trial, else None."""
    if not steal:
        return None
    cpu, pct = max(steal.items(), key=lambda item: item[1])
    if pct < STEAL_NOTE_PCT:
        return None
    return f"CPU steal: the hypervisor took {pct:.1f} % of CPU {cpu} during the trial"


def idle_run_exclusion(result: dict[str, Any]) -> str | None:
    """Why an idle run's CPU samples must stay out of the idle mean, else None: the tester could not offer
    the rate (the DUTs saw less load than the mean would claim), or the hypervisor took STEAL_NOTE_PCT or
    more of a CPU (the idle it shows is partly another guest's). `result` is a trial's stored dict."""
    if result.get("tester_limited"):
        return "tester-limited: the tester could not offer the rate"
    steal = result.get("host_steal_pct") or {}
    if steal:
        cpu, pct = max(steal.items(), key=lambda item: item[1])
        if pct >= STEAL_NOTE_PCT:
            return f"CPU steal: the hypervisor took {pct:.1f} % of CPU {cpu}"
    return None


class RecordError(ValueError):
    """A record lacks a field or has one of the wrong type; the message names the record's key."""


def method_label(rfc8219_exact: bool, method: str | None = None) -> str:
    """How every table and summary names a search method (method: its name, when the caller has it)."""
    if method == "mlrsearch":
        return MLRSEARCH_LABEL
    return RFC8219_LABEL if rfc8219_exact else FAST_LABEL


def implementation_label(dut: dict[str, Any]) -> str:
    """One line naming what produced a number, from an environment's describe()."""
    translators = dut.get("translators")
    if isinstance(translators, dict) and translators:
        parts = [f"{host} {v.get('implementation', '?')} {v.get('version', '?')}"
                 for host, v in translators.items() if isinstance(v, dict)]
        return f"{dut.get('topology', '?')}: " + ", ".join(parts)
    kernel = dut.get("kernel")
    nat44 = dut.get("nat44")
    if isinstance(kernel, dict) and isinstance(nat44, dict) and nat44:
        nat = next(iter(nat44.values()))
        rule = f"{nat.get('nat', 'NAT44')}, {nat.get('nat44', '?')}" if isinstance(nat, dict) else "NAT44"
        return f"{dut.get('topology', '?')}: linux NAT44 ({rule}, kernel {kernel.get('version', '?')})"
    if isinstance(kernel, dict):
        return f"{dut.get('topology', '?')}: linux forwarding (kernel {kernel.get('version', '?')})"
    server = dut.get("server")
    if isinstance(server, dict):
        name = f"{server.get('implementation')} {server.get('version')}"
        return f"{dut.get('implementation', '?')}, server {name}"
    return f"{dut.get('implementation', dut.get('topology', '?'))} {dut.get('version', '')}".strip()


def implementation_tag(dut: dict[str, Any], label: str) -> str:
    """A short name of what produced a number, for titles and tables ("tayga 0.9.2-8 + 2 patches"): per
    translator its implementation, the first word of its version and how many patches it carries, once when
    every DUT runs the same; `label` (the full one-line label) where there are no translators."""
    translators = dut.get("translators")
    if not isinstance(translators, dict) or not translators:
        return label
    tags = {host: _short_version(v) for host, v in translators.items() if isinstance(v, dict)}
    distinct = set(tags.values())
    if len(distinct) == 1:
        return distinct.pop()
    return ", ".join(f"{host} {tag}" for host, tag in tags.items())


def _short_version(translator: dict[str, Any]) -> str:
    version = str(translator.get("version", "?"))
    words = version.split()
    text = f"{translator.get('implementation', '?')} {words[0] if words else '?'}"
    if "patches:" in version:
        count = len(version.split("patches:", 1)[1].split())
        text += f" + {count} patch{'es' if count != 1 else ''}"
    return text


def search_error_qps(error_qps: float | None, error_ratio: float | None, rate_qps: float) -> float:
    """A search's error (the bracket width at which it stops) at rate_qps, queries/s: the larger of the
    absolute and the relative error, at least 1 query/s."""
    return max(error_qps or 0.0, (error_ratio or 0.0) * rate_qps, 1.0)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class ConfigKey:
    """One planned configuration of a campaign: setup x DUT cores x tester sessions x search settings x
    method.
    sessions: distinct tester flows of a campaign's `sessions` sweep; None when the campaign has none (the
    tester options' own flow count)."""

    setup: str
    cores: int
    search: str
    method: str
    sessions: int | None = None

    @property
    def prefix(self) -> str:
        """Prefix of its search ids: "setup/coresN/settings" (".../coresN/sessionsS/settings" in a sweep)."""
        return f"{sweep_point(self.setup, self.cores, self.sessions)}/{self.search}"

    @property
    def summary_key(self) -> str:
        return f"summary:{self.prefix}/{self.method}"


def trial_failed_key(config_prefix: str, method: str, when_utc: str) -> str:
    """Each failure is its own record (the campaign stops after it; a resume may fail again)."""
    return f"trial-failed:{config_prefix}/{method}:{when_utc}"


def trial_key(search_id: str, step: int) -> str:
    return f"trial:{search_id}:{step}"


def search_key(search_id: str) -> str:
    return f"search:{search_id}"


def sweep_point(setup: str, cores: int, sessions: int | None = None) -> str:
    """"setup/coresN", with "/sessionsS" in a sessions sweep: the start of every key of that point."""
    return f"{setup}/cores{cores}" + ("" if sessions is None else f"/sessions{sessions}")


def idle_run_key(setup: str, cores: int, run: int, sessions: int | None = None) -> str:
    return f"idle:{sweep_point(setup, cores, sessions)}/run{run}"


def idle_mean_key(setup: str, cores: int, sessions: int | None = None) -> str:
    return f"idle-mean:{sweep_point(setup, cores, sessions)}"


def procedure_key(setup: str, cores: int, sessions: int | None, search: str, method: str, procedure: str,
                  repetition: int, fraction: float | None = None) -> str:
    """One trial of a [[procedure]]: "procedure:setup/coresN[/sessionsS]/search/method/kind/repR", with
    "/at0.9" (the fraction of the throughput) for a frame loss rate step."""
    step = "" if fraction is None else f"/at{fraction:g}"
    point = sweep_point(setup, cores, sessions)
    return f"procedure:{point}/{search}/{method}/{procedure}/rep{repetition}{step}"


def _need(data: dict[str, Any], name: str, kind: type | tuple[type, ...], key: str) -> Any:
    """data[name], checked: missing or of another type is a RecordError naming the record."""
    if name not in data:
        raise RecordError(f"record {key!r} lacks {name!r}")
    value = data[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _types(kind)):
        raise RecordError(f"record {key!r}: {name!r} is {type(value).__name__}, not {_names(kind)}")
    return value


def _types(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in _types(kind))


NUMBER = (int, float)
OPTIONAL_NUMBER = (int, float, type(None))
OPTIONAL_DICT = (dict, type(None))


def campaign_sha256(data: dict[str, Any]) -> str:
    """The hash every record carries of its campaign file: sha256 of the parsed TOML, keys sorted."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class CampaignRef:
    """Which campaign file wrote a record: name, file as given, sha256 of its normalized content."""

    name: str
    file: str
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "file": self.file, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: dict[str, Any], key: str) -> CampaignRef:
        return cls(_need(data, "name", str, key), _need(data, "file", str, key),
                   _need(data, "sha256", str, key))


@dataclass(frozen=True)
class Context:
    """Where and with what a record was measured (the envelope every record carries).

    setup: the campaign's [[setup]] table. cores: DUT cores active, count. dut_cpus: the CPUs they got, as
    the environment applied them (None before any was applied). dut: the environment's describe().
    implementation: one line naming the DUT implementation (made from dut when stored). tester: tool,
    version, options. host: the machine that ran the tester. sessions: the tester's distinct flows (source
    address x source port), count; swept: True when the campaign swept them ([campaign] sessions).
    suite: the suite's code that wrote it (scripts.hostinfo.suite_build: git describe, dirty, sha256 of the
    uncommitted difference); {} in records written before version 4.
    """

    campaign: CampaignRef
    setup: dict[str, Any]
    cores: int
    dut_cpus: dict[str, Any] | None
    dut: dict[str, Any]
    implementation: str
    tester: dict[str, Any]
    host: dict[str, Any]
    sessions: int = 0
    swept: bool = False
    suite: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sessions <= 0:  # not given: the tester options' own flow count
            object.__setattr__(self, "sessions", options_flows(self.tester.get("options", {})))

    @property
    def setup_name(self) -> str:
        return str(self.setup["name"])

    @property
    def tag(self) -> str:
        """The short implementation name titles and tables use (implementation_tag); the full label is in
        `implementation`."""
        return implementation_tag(self.dut, self.implementation)

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign.to_json(), "setup": self.setup, "cores": self.cores,
                "dut_cpus": self.dut_cpus, "dut": self.dut, "implementation": self.implementation,
                "tester": self.tester, "host": self.host,
                "sessions": {"count": self.sessions, "swept": self.swept}, "suite": self.suite}

    @classmethod
    def from_json(cls, data: dict[str, Any], key: str) -> Context:
        setup = _need(data, "setup", dict, key)
        _need(setup, "name", str, key)
        dut = _need(data, "dut", dict, key)
        label = (implementation_label(dut) if data.get("schema") == UNLABELLED_SCHEMA
                 else _need(data, "implementation", str, key))
        sessions = _need(data, "sessions", dict, key) if "sessions" in data else {"count": 0, "swept": False}
        return cls(CampaignRef.from_json(_need(data, "campaign", dict, key), key), setup,
                   _need(data, "cores", int, key), _need(data, "dut_cpus", OPTIONAL_DICT, key), dut,
                   label,
                   _need(data, "tester", dict, key), _need(data, "host", dict, key),
                   _need(sessions, "count", int, key), _need(sessions, "swept", bool, key),
                   _need(data, "suite", dict, key) if "suite" in data else {})


class Provenance(NamedTuple):
    """What measured a record: the suite's code, the tester's build, the host and the version of the search
    library the suite ran (MLRsearch: its trial choices are the library's). A resume that would add records
    of another provenance to a store is refused (unless allowed), and a cell whose trials have several is
    marked. library: None in stores written before it was recorded."""

    suite: str | None
    tester: str | None
    host: str | None
    library: str | None = None

    def text(self) -> str:
        return (f"suite {self.suite or 'unrecorded'}, tester {self.tester or 'unrecorded'}, "
                f"host {self.host or 'unrecorded'}, MLRsearch library {self.library or 'unrecorded'}")


def provenance(context: Context) -> Provenance:
    """The one rule of what counts as the same code, tester and host."""
    suite = context.suite.get("describe")
    if suite and context.suite.get("dirty") and context.suite.get("diff_sha256"):
        suite = f"{suite} (uncommitted difference {str(context.suite['diff_sha256'])[:12]})"
    return Provenance(suite, context.tester.get("version"), context.host.get("hostname"),
                      context.suite.get("mlrsearch"))


def options_flows(options: dict[str, Any]) -> int:
    """Flows of recorded tester options: threads x ports_per_thread (xlatperf's defaults 1 x 4 if absent)."""
    return int(options.get("threads", 1)) * int(options.get("ports_per_thread", 4))


@dataclass(frozen=True, kw_only=True)
class Record:
    """A store record: unique key, context, time written (UTC, ISO 8601). Subclasses add a body."""

    TYPE: ClassVar[str] = ""
    key: str
    context: Context
    written_utc: str = field(default_factory=utc_now)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "key": self.key, "type": self.TYPE, "written_utc": self.written_utc,
                **self.context.to_json(), **self.body_json()}

    def body_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def envelope(cls, data: dict[str, Any]) -> dict[str, Any]:
        key = _need(data, "key", str, "?")
        return {"key": key, "context": Context.from_json(data, key),
                "written_utc": _need(data, "written_utc", str, key)}


@dataclass(frozen=True)
class TrialPosition:
    """Where a trial sits in its search: search id, settings name, method, repetition (from 1), step (from
    0), phase ("binary", "short", "full"), the bracket before it (queries/s) and the search settings."""

    id: str
    settings_name: str
    method: str
    rfc8219_exact: bool
    repetition: int
    step: int
    phase: str
    lower_qps: float
    upper_qps: float
    settings: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "settings_name": self.settings_name, "method": self.method,
                "rfc8219_exact": self.rfc8219_exact, "repetition": self.repetition, "step": self.step,
                "phase": self.phase, "lower_qps": self.lower_qps, "upper_qps": self.upper_qps,
                "settings": self.settings}

    @classmethod
    def from_json(cls, data: dict[str, Any], key: str) -> TrialPosition:
        return cls(_need(data, "id", str, key), _need(data, "settings_name", str, key),
                   _need(data, "method", str, key), _need(data, "rfc8219_exact", bool, key),
                   _need(data, "repetition", int, key), _need(data, "step", int, key),
                   _need(data, "phase", str, key), float(_need(data, "lower_qps", NUMBER, key)),
                   float(_need(data, "upper_qps", NUMBER, key)), _need(data, "settings", dict, key))


@dataclass(frozen=True, kw_only=True)
class TrialEntry(Record):
    """One trial. result: the tester's trial result without its raw JSON (TrialResult.to_dict); verdict:
    "pass", "fail" or "tester-limited"; rest_before_s, wall_s: s; raw: the tester's JSON document."""

    TYPE: ClassVar[str] = "trial"
    search: TrialPosition
    result: dict[str, Any]
    verdict: str
    rest_before_s: float
    wall_s: float
    raw: dict[str, Any] | None

    def body_json(self) -> dict[str, Any]:
        trial = {**self.result, "verdict": self.verdict, "rest_before_s": self.rest_before_s,
                 "wall_s": self.wall_s}
        return {"search": self.search.to_json(), "trial": trial, "raw": self.raw}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialEntry:
        head = cls.envelope(data)
        trial = dict(_need(data, "trial", dict, head["key"]))
        verdict = _need(trial, "verdict", str, head["key"])
        rest = float(_need(trial, "rest_before_s", NUMBER, head["key"]))
        wall = float(_need(trial, "wall_s", NUMBER, head["key"]))
        for name in ("verdict", "rest_before_s", "wall_s"):
            trial.pop(name)
        return cls(**head, search=TrialPosition.from_json(_need(data, "search", dict, head["key"]),
                                                          head["key"]),
                   result=trial, verdict=verdict, rest_before_s=rest, wall_s=wall,
                   raw=_need(data, "raw", OPTIONAL_DICT, head["key"]))

    @property
    def time_s(self) -> float:
        """Trial time it stands for (duration + the rest before it), s."""
        return float(self.result["duration_s"]) + self.rest_before_s


@dataclass(frozen=True, kw_only=True)
class SearchEntry(Record):
    """One search's outcome (SearchOutcome.to_dict), its settings and a one-line description."""

    TYPE: ClassVar[str] = "search"
    outcome: dict[str, Any]
    settings_name: str
    settings: dict[str, Any]
    describe: str

    def body_json(self) -> dict[str, Any]:
        return {"search": {**self.outcome, "settings_name": self.settings_name, "settings": self.settings,
                           "describe": self.describe}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchEntry:
        head = cls.envelope(data)
        body = dict(_need(data, "search", dict, head["key"]))
        fields = {name: _need(body, name, kind, head["key"])
                  for name, kind in (("settings_name", str), ("settings", dict), ("describe", str))}
        for name in fields:
            body.pop(name)
        return cls(**head, outcome=body, **fields)


@dataclass(frozen=True)
class Stats:
    """median/min/max over n searches, queries/s; p1, p99, dispersion only with n >= 20."""

    n: int
    median: float
    minimum: float
    maximum: float
    p1: float | None
    p99: float | None
    dispersion: float | None

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "median": self.median, "min": self.minimum, "max": self.maximum,
                "p1": self.p1, "p99": self.p99, "dispersion": self.dispersion}

    @classmethod
    def from_json(cls, data: dict[str, Any], key: str) -> Stats:
        return cls(_need(data, "n", int, key), *(_need(data, name, NUMBER, key)
                                                   for name in ("median", "min", "max")),
                   *(_need(data, name, OPTIONAL_NUMBER, key) for name in ("p1", "p99", "dispersion")))


@dataclass(frozen=True, kw_only=True)
class SummaryEntry(Record):
    """A repeated search at one configuration: method, status, stats of the throughputs (None without
    a number), the tester limit (queries/s or None), every repetition's throughput, trials and time."""

    TYPE: ClassVar[str] = "summary"
    method: str
    rfc8219_exact: bool
    status: str
    stats: Stats | None
    tester_limit_qps: float | None
    throughputs_qps: list[float | None]
    trials: int
    elapsed_s: float
    settings_name: str
    settings: dict[str, Any]
    describe: str

    def body_json(self) -> dict[str, Any]:
        return {"summary": {
            "method": self.method, "status": self.status, "rfc8219_exact": self.rfc8219_exact,
            "summary": None if self.stats is None else self.stats.to_json(),
            "tester_limit_qps": self.tester_limit_qps, "throughputs_qps": self.throughputs_qps,
            "trials": self.trials, "elapsed_s": self.elapsed_s, "settings_name": self.settings_name,
            "settings": self.settings, "describe": self.describe}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SummaryEntry:
        head = cls.envelope(data)
        key = head["key"]
        body = _need(data, "summary", dict, key)
        stats = _need(body, "summary", OPTIONAL_DICT, key)
        return cls(**head, method=_need(body, "method", str, key),
                   rfc8219_exact=_need(body, "rfc8219_exact", bool, key),
                   status=_need(body, "status", str, key),
                   stats=None if stats is None else Stats.from_json(stats, key),
                   tester_limit_qps=_need(body, "tester_limit_qps", OPTIONAL_NUMBER, key),
                   throughputs_qps=_need(body, "throughputs_qps", list, key),
                   trials=_need(body, "trials", int, key), elapsed_s=_need(body, "elapsed_s", NUMBER, key),
                   settings_name=_need(body, "settings_name", str, key),
                   settings=_need(body, "settings", dict, key), describe=_need(body, "describe", str, key))


@dataclass(frozen=True, kw_only=True)
class FlatRecord(Record):
    """A record whose body is top-level fields: FIELDS = (attribute, JSON name, accepted types)."""

    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = ()
    # JSON names added later: older records lack them and read as None.
    ADDED: ClassVar[frozenset[str]] = frozenset()

    def body_json(self) -> dict[str, Any]:
        return {name: _plain(getattr(self, attribute)) for attribute, name, _ in self.FIELDS}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FlatRecord:
        head = cls.envelope(data)
        return cls(**head, **{attribute: None if name in cls.ADDED and name not in data
                              else _need(data, name, kind, head["key"])
                              for attribute, name, kind in cls.FIELDS})


def _plain(value: Any) -> Any:
    return value.to_json() if hasattr(value, "to_json") else value


@dataclass(frozen=True)
class RateOf:
    """What an idle capture's rate is: the median of the [[search]] table `search` run with `method`;
    lower_bound: that search never failed (the throughput is at least the rate); partial: the median is
    over fewer repetitions than were run (the others gave no number)."""

    search: str
    method: str
    lower_bound: bool
    partial: bool

    def to_json(self) -> dict[str, Any]:
        return {"search": self.search, "method": self.method, "lower_bound": self.lower_bound,
                "partial": self.partial}

    @classmethod
    def from_json(cls, data: dict[str, Any], key: str) -> RateOf:
        return cls(_need(data, "search", str, key), _need(data, "method", str, key),
                   _need(data, "lower_bound", bool, key), _need(data, "partial", bool, key))


def _rate_of(record: Any) -> None:
    """Read a stored rate_of (a dict) into a RateOf, in place of the frozen record's field."""
    if isinstance(record.rate_of, dict):
        object.__setattr__(record, "rate_of", RateOf.from_json(record.rate_of, record.key))


@dataclass(frozen=True, kw_only=True)
class IdleRun(FlatRecord):
    """One idle-capture run: a full-length trial at rate_qps (queries/s) with CPU samples every interval_s
    (s). rate_source says which median the rate is; result as in TrialEntry plus rest_before_s; samples:
    [{"t_s": end of the interval since the start, s, "cpus": {cpu: {column: %}}}] of the machine that ran
    the campaign (in emulation: every host); note: why there are no samples (simulated time), or None.
    hosts: on a real testbed, per DUT host its own samples (setups.testbed.remote_idle: "t_s", "t_host",
    "t_controller", "cpus"); None elsewhere and in records written before it existed."""

    TYPE: ClassVar[str] = "idle-run"
    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = (
        ("run", "run", int), ("rate_qps", "rate_qps", NUMBER), ("interval_s", "interval_s", NUMBER),
        ("rate_source", "rate_source", str), ("result", "trial", dict), ("samples", "samples", list),
        ("raw", "raw", OPTIONAL_DICT), ("note", "note", (str, type(None))), ("hosts", "hosts", OPTIONAL_DICT),
        ("rate_of", "rate_of", OPTIONAL_DICT + (RateOf,)))
    ADDED: ClassVar[frozenset[str]] = frozenset({"hosts", "rate_of"})
    run: int
    rate_qps: float
    interval_s: float
    rate_source: str
    result: dict[str, Any]
    samples: list[dict[str, Any]]
    raw: dict[str, Any] | None
    note: str | None
    hosts: dict[str, list[dict[str, Any]]] | None = None
    rate_of: RateOf | None = None

    def __post_init__(self) -> None:
        _rate_of(self)


@dataclass(frozen=True, kw_only=True)
class IdleMean(FlatRecord):
    """The per-second mean of `runs` idle runs at rate_qps (queries/s), sampled every interval_s (s):
    per_second = [{"second": i, "runs": k, "cpus": {cpu: {column: mean %}}}]; hosts: on a real testbed,
    the same per DUT host ({host: per_second}), else None. runs counts the runs averaged; excluded: the
    runs left out and why ([{"run": n, "why": ...}], `idle_run_exclusion`), None in records written
    before it existed."""

    TYPE: ClassVar[str] = "idle-mean"
    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = (
        ("rate_qps", "rate_qps", NUMBER), ("runs", "runs", int), ("interval_s", "interval_s", NUMBER),
        ("per_second", "per_second", list), ("hosts", "hosts", OPTIONAL_DICT),
        ("excluded", "excluded", (list, type(None))),
        ("rate_of", "rate_of", OPTIONAL_DICT + (RateOf,)))
    ADDED: ClassVar[frozenset[str]] = frozenset({"hosts", "excluded", "rate_of"})
    rate_qps: float
    runs: int
    interval_s: float
    per_second: list[dict[str, Any]]
    hosts: dict[str, list[dict[str, Any]]] | None = None
    excluded: list[dict[str, Any]] | None = None
    rate_of: RateOf | None = None

    def __post_init__(self) -> None:
        _rate_of(self)


@dataclass(frozen=True, kw_only=True)
class TrialFailed(FlatRecord):
    """A trial voided because a component it depends on (knotd, a translator, the tester) died or the
    tester failed: kind (the exception's name) and reason. Never a result: a resumed campaign measures that
    trial again."""

    TYPE: ClassVar[str] = "trial-failed"
    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = (
        ("failure", "failure", dict),)
    failure: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ProcedureTrial(FlatRecord):
    """One trial of an RFC 8219 procedure ([[procedure]] of a campaign, scripts.procedures) at a rate set by
    a search's median throughput: procedure ("latency" §7.2, "pdv" §7.3, "flr" frame loss rate §7.4 / RFC
    2544 §26.3); repetition (from 1); fraction: of the throughput the rate is (FLR steps; 1.0 otherwise);
    throughput_qps: the search's median it is a fraction of, queries/s; rate_qps: the rate offered,
    queries/s; duration_s, s; spec: the procedure's settings as the campaign file gave them; result as in
    TrialEntry plus rest_before_s and wall_s; raw: the tester's JSON (None for a simulated DUT); rate_of:
    which search's median it is, a lower bound or partial."""

    TYPE: ClassVar[str] = "procedure-trial"
    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = (
        ("procedure", "procedure", str), ("repetition", "repetition", int), ("fraction", "fraction", NUMBER),
        ("throughput_qps", "throughput_qps", NUMBER), ("rate_qps", "rate_qps", NUMBER),
        ("duration_s", "duration_s", NUMBER), ("spec", "spec", dict), ("result", "trial", dict),
        ("raw", "raw", OPTIONAL_DICT), ("rate_of", "rate_of", (dict, RateOf)))
    procedure: str
    repetition: int
    fraction: float
    throughput_qps: float
    rate_qps: float
    duration_s: float
    spec: dict[str, Any]
    result: dict[str, Any]
    raw: dict[str, Any] | None
    rate_of: RateOf

    def __post_init__(self) -> None:
        _rate_of(self)


def stateful_scope(setup: str, cores: int, point: str, procedure: str, repetition: int) -> str:
    """One repetition of an RFC 9693 procedure at one point: "setup/coresN/POINT/procedure/repR" (POINT:
    scripts.stateful.procedures.Point.name, "nN-tT-hH")."""
    return f"{sweep_point(setup, cores)}/{point}/{procedure}/rep{repetition}"


def stateful_trial_key(scope: str, call: int) -> str:
    return f"stateful:{scope}/call{call}"


def stateful_result_key(scope: str) -> str:
    return f"stateful-result:{scope}"


@dataclass(frozen=True, kw_only=True)
class StatefulTrial(FlatRecord):
    """One call of an RFC 9693 procedure on the stateful DUT (scripts.stateful.measurer): procedure (its
    kind), point (the sweep's point: connections, declared flows, table size, hash size, timeouts),
    repetition (from 1), call (its index within the repetition, from 0), method ("establish",
    "over_established", "tear_down"), args (what it was asked), result (PhaseOne, PhaseTwo or TearDown as a
    dict, without the tester's raw document), raw (that document, or None), conditions
    (StatefulConditions: implementation, role, table settings in force), rest_before_s and wall_s, s. A
    resumed campaign replays these instead of measuring again."""

    TYPE: ClassVar[str] = "stateful-trial"
    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = (
        ("procedure", "procedure", str), ("point", "point", dict), ("repetition", "repetition", int),
        ("call", "call", int), ("method", "method", str), ("args", "args", dict), ("result", "result", dict),
        ("raw", "raw", OPTIONAL_DICT), ("conditions", "conditions", dict),
        ("rest_before_s", "rest_before_s", NUMBER), ("wall_s", "wall_s", NUMBER))
    procedure: str
    point: dict[str, Any]
    repetition: int
    call: int
    method: str
    args: dict[str, Any]
    result: dict[str, Any]
    raw: dict[str, Any] | None
    conditions: dict[str, Any]
    rest_before_s: float
    wall_s: float


@dataclass(frozen=True, kw_only=True)
class StatefulResult(FlatRecord):
    """One repetition of an RFC 9693 procedure at one point: procedure, point and repetition as in
    StatefulTrial; spec (the [[procedure]] table as parsed); value: its figure (connections/s for
    "connection-rate" and "teardown", queries/s for "throughput-connections", entries for
    "table-capacity"), None when the search gave none; unit; error: the search's final bracket width in that
    unit (None where there is none); status ("ok", "upper-bound-not-failed", "below-lower-bound",
    "tester-limited", "c0-not-safe", "incomplete"); outcome: the search's dataclass as a dict; conditions:
    StatefulConditions as a dict; calls: how many StatefulTrial records it took."""

    TYPE: ClassVar[str] = "stateful-result"
    FIELDS: ClassVar[tuple[tuple[str, str, type | tuple[type, ...]], ...]] = (
        ("procedure", "procedure", str), ("point", "point", dict), ("repetition", "repetition", int),
        ("spec", "spec", dict), ("value", "value", OPTIONAL_NUMBER), ("unit", "unit", str),
        ("error", "error", OPTIONAL_NUMBER), ("status", "status", str), ("outcome", "outcome", dict),
        ("conditions", "conditions", dict), ("calls", "calls", int))
    procedure: str
    point: dict[str, Any]
    repetition: int
    spec: dict[str, Any]
    value: float | None
    unit: str
    error: float | None
    status: str
    outcome: dict[str, Any]
    conditions: dict[str, Any]
    calls: int


READERS: dict[str, Callable[[dict[str, Any]], Record]] = {  # type -> reader
    cls.TYPE: cls.from_json
    for cls in (TrialEntry, SearchEntry, SummaryEntry, IdleRun, IdleMean, TrialFailed, ProcedureTrial,
                StatefulTrial, StatefulResult)}


def record_from_json(data: dict[str, Any]) -> Record:
    """The typed record of one store line (version 1 or 2); RecordError says what is wrong."""
    key = data.get("key", "?")
    schema = data.get("schema")
    if schema != SCHEMA and schema not in OLD_SCHEMAS:
        raise RecordError(f"record {key!r} has schema {schema!r}; this xlatbench reads {SCHEMA!r} and "
                          f"{', '.join(OLD_SCHEMAS)} (a newer store needs a newer xlatbench)")
    reader = READERS.get(str(data.get("type")))
    if reader is None:
        raise RecordError(f"record {key!r} has unknown type {data.get('type')!r}; known: {list(READERS)}")
    return reader(data)
