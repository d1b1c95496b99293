"""Campaign files (TOML): topologies x core counts x tester sessions x search settings x idle capture x
RFC 8219 procedures ([[procedure]]: scripts.procedures) x RFC 9693's stateful procedures ([stateful] and
their [[procedure]] kinds: scripts.stateful.procedures), validated up front and turned into a `Campaign`.

Every table rejects keys it does not know, so a typo fails at once with the key's name instead of running a
38-hour campaign with a default. A [[setup]] table is its environment kind's to check (scripts/environments/:
the registry names the kinds, each kind its keys and rules); this module names no kind. See README (section
"Measurement") and campaigns/*.toml for examples.
"""

from __future__ import annotations

import tomllib
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..cpulist import format_cpu_list
from ..data.records import campaign_sha256
from ..zones import check_io
from .environments import registry
from .environments.base import SetupSpec
from .environments.options import OptionError, cpus, only
from .environments.testerfit import check_local_sockets
from .nat44 import Cycle
from .procedures import ProcedureError, ProcedureSpec, parse_procedures
from .search import MLRSEARCH, RFC8219, SearchSettings, check_method
from .stateful.procedures import StatefulCampaignError, StatefulPlan, is_stateful, parse_stateful
from .xlatperf import (
    MAX_OUTSTANDING_PER_SOCKET,
    TesterOptions,
    flows,
    options_for_sessions,
    outstanding_per_socket,
    sockets_needed,
)

DEFAULT_CORES = (1, 2, 4, 8, 16)


class CampaignFileError(ValueError):
    """The campaign file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class IdleSpec:
    """CPU-idle capture at a configuration's median rate.

    runs: full-length trials per configuration (paper: 100; 0 = no capture).
    duration_s, rest_s: of each run, s (default: the search's duration_s and rest_s).
    interval_s: CPU sampling period, s.
    method: whose median rate the runs use ("rfc8219-binary" or "mlrsearch").
    search: name of the search settings whose median is used (default: the first).
    """

    runs: int = 0
    duration_s: float | None = None
    rest_s: float | None = None
    interval_s: float = 1.0
    method: str = RFC8219
    search: str | None = None


@dataclass(frozen=True)
class Campaign:
    """A parsed campaign file. sha256: hash of its normalized content (every record carries it).
    sessions: the tester flow counts swept ([campaign] sessions); () = no sweep, [tester] as given.
    server_io: how the echo server takes its queries ([server] io: "socket" or "xdp", Knot's XDP mode)."""

    name: str
    file: str
    store: Path
    methods: tuple[str, ...]
    cores: tuple[int, ...]
    searches: tuple[tuple[str, SearchSettings], ...]
    tester: TesterOptions
    idle: IdleSpec
    setups: tuple[SetupSpec, ...]
    sha256: str
    sessions: tuple[int, ...] = ()
    server_io: str = "socket"
    procedures: tuple[ProcedureSpec, ...] = ()  # [[procedure]] tables: latency, PDV, FLR (scripts.procedures)
    stateful: StatefulPlan | None = None  # [stateful] and RFC 9693's [[procedure]] kinds (scripts.stateful)

    def session_counts(self) -> tuple[int | None, ...]:
        """The sweep's session counts in order; (None,) without a sweep."""
        return self.sessions or (None,)

    def tester_for(self, sessions: int | None) -> TesterOptions:
        """The tester options of one point of the sweep (docs/measurement.md, "Sessions")."""
        return self.tester if sessions is None else options_for_sessions(self.tester, sessions)

    def idle_search(self) -> tuple[str, SearchSettings]:
        if self.idle.search is None:
            return self.searches[0]
        return next((n, s) for n, s in self.searches if n == self.idle.search)

    def idle_timing(self) -> tuple[float, float]:
        """(duration, rest) of one idle-capture run, s: [idle] values, else the idle search's."""
        _, settings = self.idle_search()
        duration = self.idle.duration_s or settings.duration_s
        rest = self.idle.rest_s if self.idle.rest_s is not None else settings.rest_s
        return duration, rest

    def settings(self, name: str) -> SearchSettings:
        """The search settings called name."""
        return dict(self.searches)[name]

    def setup(self, name: str) -> SetupSpec:
        return next(s for s in self.setups if s.name == name)


def load_campaign(path: Path, store: Path | None = None) -> Campaign:
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CampaignFileError(f"{path}: no such campaign file") from None
    except tomllib.TOMLDecodeError as err:
        raise CampaignFileError(f"{path}: not valid TOML: {err}") from None
    try:
        return parse_campaign(data, str(path), store)
    except (CampaignFileError, ValueError, TypeError) as err:
        raise CampaignFileError(f"{path}: {err}") from None


def parse_campaign(data: dict[str, Any], file: str, store: Path | None = None) -> Campaign:
    """The campaign of a campaign file's TOML (CampaignFileError, one line naming the table and the key,
    for anything wrong in it: the environment kinds' own rules included)."""
    try:
        return _parse_campaign(data, file, store)
    except OptionError as err:
        raise CampaignFileError(str(err)) from None


def _parse_campaign(data: dict[str, Any], file: str, store: Path | None) -> Campaign:
    only(data, "top level",
         {"campaign", "search", "tester", "idle", "setup", "server", "procedure", "stateful"})
    raw_procedures = data.get("procedure")
    stateful_tables = [(i, t) for i, t in enumerate(raw_procedures)
                       if is_stateful(t)] if isinstance(raw_procedures, list) else []
    head = _table(data, "campaign")
    only(head, "[campaign]", {"name", "store", "methods", "cores", "sessions"})
    name = _str(head, "name", "[campaign]")
    methods = tuple(_list(head, "methods", "[campaign]", [RFC8219]))
    for method in methods:
        _method(method, "[campaign] methods")
    if not methods and not (stateful_tables or "stateful" in data):
        raise CampaignFileError("[campaign] methods is empty (only a campaign of RFC 9693 procedures may run "
                                "no throughput search)")
    cores = tuple(_list(head, "cores", "[campaign]", list(DEFAULT_CORES)))
    if not cores or any(not isinstance(c, int) or c < 1 for c in cores):
        raise CampaignFileError(f"[campaign] cores must be a list of positive integers, got {list(cores)}")
    store_path = store or Path(head.get("store", f"results/{name}.jsonl"))
    searches = _searches(data.get("search")) if data.get("search") is not None or methods else ()
    tester = _dataclass(TesterOptions, _table(data, "tester", required=False), "[tester]",
                        convert={"extra_args": tuple})
    for key in ("sender_cpus", "receiver_cpus"):
        if getattr(tester, key) is not None:  # passed to xlatperf in its grammar, however it was written
            spelled = format_cpu_list(cpus(f"[tester] {key}", getattr(tester, key)))
            tester = replace(tester, **{key: spelled})
    idle = _dataclass(IdleSpec, _table(data, "idle", required=False), "[idle]")
    _method(idle.method, "[idle] method")
    if idle.method not in methods and (methods or idle.runs):
        raise CampaignFileError(f"[idle] method {idle.method!r} is not one of the campaign's methods "
                                f"{list(methods)}")
    if idle.search is not None and idle.search not in {n for n, _ in searches}:
        raise CampaignFileError(f"[idle] search {idle.search!r} names no [[search]] table")
    if idle.runs < 0 or idle.interval_s <= 0:
        raise CampaignFileError("[idle] runs must be >= 0 and interval_s > 0")
    others = [t for t in raw_procedures if not is_stateful(t)] if isinstance(raw_procedures, list) \
        else raw_procedures
    if others and not methods:
        raise CampaignFileError("RFC 8219's [[procedure]] kinds (latency, pdv, flr) need a throughput "
                                "search: [campaign] methods is empty")
    try:
        procedures = parse_procedures(others or None, [n for n, _ in searches], methods)
        stateful = parse_stateful(data.get("stateful"), stateful_tables, dict(searches))
    except (ProcedureError, StatefulCampaignError) as err:
        raise CampaignFileError(str(err)) from None
    server_io = _server_io(_table(data, "server", required=False))
    setups = tuple(registry.kind(setup.kind).with_server_io(setup, server_io, _where(setup, i))
                   for i, setup in enumerate(_setups(data.get("setup"))))
    sessions = _sessions(head, _table(data, "tester", required=False))
    try:
        testers = [tester if s is None else options_for_sessions(tester, s) for s in sessions or (None,)]
    except ValueError as err:
        raise CampaignFileError(f"[campaign] {err}") from None
    # RFC 9693's phase 2 sends over the N flows phase 1 made, not over the tester's sockets: a campaign of
    # them alone (no method) has no socket budget to check.
    if methods and any(registry.kind(setup.kind).runs_tester for setup in setups):
        for search_name, settings in searches:
            for options in testers:
                check_outstanding(search_name, settings, options, swept=bool(sessions))
    most = max(flows(options) for options in testers)
    if stateful is not None:
        for i, setup in enumerate(setups):
            refusal = registry.kind(setup.kind).stateful_refusal(setup)
            if refusal:
                raise CampaignFileError(f"{_where(setup, i)}: {refusal}")
    campaign = Campaign(name, file, store_path, methods, cores, searches, tester, idle, setups,
                        campaign_sha256(data), sessions, server_io, procedures, stateful)
    cycles = trial_cycles(campaign)
    for i, setup in enumerate(setups):
        registry.kind(setup.kind).check_tester(setup, tester, most, cycles, _where(setup, i))
    if tester.io == "socket" and any(registry.kind(setup.kind).tester_is_local(setup) for setup in setups):
        check_local_sockets(most, bool(sessions))  # AF_XDP flows (io = "xdp") need no socket each
    return campaign


def _where(setup: SetupSpec, index: int) -> str:
    """How a message names a parsed setup's table."""
    return f"[[setup]] #{index + 1} ({setup.name})"


def trial_cycles(campaign: Campaign) -> list[Cycle]:
    """Every kind of trial the campaign runs, with the rest after it (the NAT44 port rule takes the
    shortest: scripts.nat44)."""
    cycles = []
    for name, settings in campaign.searches:
        cycles.append(Cycle(settings.duration_s, settings.rest_s, f"search {name!r}"))
        if MLRSEARCH in campaign.methods:
            cycles += [Cycle(duration, settings.rest_after(duration), f"search {name!r}, MLRsearch's {what}")
                       for duration, what in mlrsearch_trials(settings)]
    if campaign.idle.runs:
        cycles.append(Cycle(*campaign.idle_timing(), "the idle runs"))
    for spec in campaign.procedures:
        rest = spec.rest_s if spec.rest_s is not None else campaign.settings(spec.search).rest_s
        cycles.append(Cycle(spec.duration_s, rest, f"the {spec.kind} procedure's trials"))
    return cycles


def mlrsearch_trials(settings: SearchSettings) -> list[tuple[float, str]]:
    """Each goal's shortest trials (its initial ones, when it has preceding targets; the library's other
    preceding-target trials lie between them and the final ones) and its final trials, s, with what they
    are."""
    out = []
    for goal in settings.mlr_goals():
        if goal.preceding_targets:
            out.append((goal.initial_trial_duration_s, f"goal {goal.name!r} initial trials"))
        out.append((goal.final_trial_duration_s, f"goal {goal.name!r} final trials"))
    return out


def _method(method: object, where: str) -> str:
    """A method the suite runs (search.check_method: a retired one says why and what to write instead)."""
    try:
        return check_method(method, where)
    except ValueError as err:
        raise CampaignFileError(str(err)) from None


def _sessions(head: dict[str, Any], tester: dict[str, Any]) -> tuple[int, ...]:
    """[campaign] sessions: distinct positive counts; it sets ports_per_thread, so [tester] must not."""
    if "sessions" not in head:
        return ()
    sessions = head["sessions"]
    if not isinstance(sessions, list) or not sessions or \
            any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sessions):
        raise CampaignFileError(f"[campaign] sessions must be a list of positive integers, got {sessions!r}")
    if len(set(sessions)) != len(sessions):
        raise CampaignFileError(f"[campaign] sessions has repeated values: {sessions}")
    if "ports_per_thread" in tester:
        raise CampaignFileError("[tester] ports_per_thread and [campaign] sessions both given: sessions sets "
                                "ports_per_thread = sessions / threads; remove ports_per_thread")
    return tuple(sessions)


def _server_io(server: dict[str, Any]) -> str:
    """[server] io: "socket" (default) or "xdp" (Knot answers in XDP mode on the server's interface)."""
    only(server, "[server]", {"io"})
    try:
        return check_io(server.get("io", "socket"), "[server] io")
    except ValueError as err:
        raise CampaignFileError(str(err)) from None


def _searches(raw: Any) -> tuple[tuple[str, SearchSettings], ...]:
    if raw is None:
        raise CampaignFileError("no [search] table: say at least max_rate_qps and error_qps or error_ratio")
    tables = raw if isinstance(raw, list) else [dict(raw, name=raw.get("name", "default"))]
    result = []
    for i, table in enumerate(tables):
        where = f"[[search]] #{i + 1}"
        if "name" not in table:
            raise CampaignFileError(f"{where}: every [[search]] table needs a name")
        settings_table = {k: v for k, v in table.items() if k != "name"}
        result.append((str(table["name"]), _dataclass(SearchSettings, settings_table, where)))
    names = [n for n, _ in result]
    if len(set(names)) != len(names):
        raise CampaignFileError(f"[[search]] names must be unique, got {names}")
    return tuple(result)


def _setups(raw: Any) -> tuple[SetupSpec, ...]:
    """The [[setup]] tables: each a registered kind (registry.py) with its name, its keys and its values
    checked by that kind."""
    if not raw or not isinstance(raw, list):
        raise CampaignFileError("no [[setup]] tables: say what to measure "
                                f"(kind = {' | '.join(registry.names())})")
    setups = []
    for i, table in enumerate(raw):
        where = f"[[setup]] #{i + 1}"
        kind = registry.kind(table.get("kind"), where)
        only(table, where, {"name", "kind"} | kind.keys)
        name = str(table.get("name", table.get("topology", kind.name)))
        if "/" in name or not name:
            raise CampaignFileError(f"{where}: name {name!r} must be non-empty and contain no '/'")
        kind.check(table, where)
        params = {k: v for k, v in table.items() if k not in ("name", "kind")}
        setups.append(SetupSpec(name, kind.name, params))
    names = [s.name for s in setups]
    if len(set(names)) != len(names):
        raise CampaignFileError(f"[[setup]] names must be unique, got {names}")
    return tuple(setups)


def _list(table: dict[str, Any], key: str, where: str, default: list[Any]) -> list[Any]:
    value = table.get(key, default)
    if not isinstance(value, list):
        raise CampaignFileError(f"{where} {key} must be a list such as {default!r}, got {value!r}")
    return value


def check_outstanding(name: str, settings: SearchSettings, tester: TesterOptions,
                      swept: bool = False,
                      sockets_option: str = "[tester] threads x ports_per_thread") -> None:
    """Fail now, not at the first trial, when max_rate_qps is more than xlatperf can keep in flight.

    sockets_option: how the user sets the tester's sockets where the fix is named (a campaign's keys, or
    command-line options)."""
    sockets = tester.threads * tester.ports_per_thread
    outstanding = outstanding_per_socket(settings.max_rate_qps, sockets, tester.timeout_s)
    if outstanding > MAX_OUTSTANDING_PER_SOCKET:
        needed = sockets_needed(settings.max_rate_qps, tester.timeout_s)
        raise CampaignFileError(
            f"search {name!r}: max_rate_qps {settings.max_rate_qps:.0f} over {sockets} tester socket(s) "
            f"keeps {outstanding:.0f} queries in flight per socket, xlatperf allows "
            f"{MAX_OUTSTANDING_PER_SOCKET}: " + (
                f"use [campaign] sessions >= {needed} or a lower max_rate_qps" if swept
                else f"set {sockets_option} >= {needed}"))


def _table(data: dict[str, Any], key: str, required: bool = True) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        if required:
            raise CampaignFileError(f"missing [{key}] table")
        return {}
    if not isinstance(value, dict):
        raise CampaignFileError(f"[{key}] must be a table")
    return value


def _str(table: dict[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value or "/" in value:
        raise CampaignFileError(f"{where} {key} must be a non-empty string without '/'")
    return value


# Numbers of [search], [tester] and [idle] that only make sense above (or at) zero.
POSITIVE = {"max_rate_qps", "error_qps", "error_ratio", "duration_s", "short_duration_s", "repetitions",
            "threads", "ports_per_thread", "timeout_s", "port", "interval_s", "rcvbuf_bytes", "sndbuf_bytes"}
NON_NEGATIVE = {"min_rate_qps", "loss_ratio", "rest_s", "short_rest_s", "tester_retries", "runs"}
_TYPES = {"float": ((int, float), "a number"), "int": ((int,), "an integer"), "str": ((str,), "a string"),
          "bool": ((bool,), "true or false")}


def _check_fields(cls: type, table: dict[str, Any], where: str) -> None:
    """Every required field present, and each value of the type its field declares (int/float/str/bool)."""
    for f in fields(cls):
        if f.name not in table:
            if f.default is MISSING and f.default_factory is MISSING:
                raise CampaignFileError(f"{where}: missing {f.name}: add it (e.g. {f.name} = 100000)")
            continue
        kinds, noun = _TYPES.get(str(f.type).removesuffix(" | None"), (None, ""))
        value = table[f.name]
        if kinds and (not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)):
            raise CampaignFileError(f"{where}: {f.name} must be {noun}, got {value!r}")
        if f.name in POSITIVE and value <= 0 or f.name in NON_NEGATIVE and value < 0:
            bound = "> 0" if f.name in POSITIVE else ">= 0"
            raise CampaignFileError(f"{where}: {f.name} must be {bound}, got {value!r}")


def _dataclass(cls: type, table: dict[str, Any], where: str, convert: dict[str, Any] | None = None) -> Any:
    allowed = {f.name for f in fields(cls)}
    only(table, where, allowed)
    _check_fields(cls, table, where)
    values = {k: (convert[k](v) if convert and k in convert else v) for k, v in table.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:
        raise CampaignFileError(f"{where}: {err}") from None


def settings_record(settings: SearchSettings) -> dict[str, Any]:
    return asdict(settings)
