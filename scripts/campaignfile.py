"""Campaign files (TOML): topologies x core counts x search settings x idle capture, validated up front.

Every table rejects keys it does not know, so a typo fails at once with the key's name instead of running a
38-hour campaign with a default. See README (section "Measurement") and campaigns/*.toml for examples.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..setups.placement import parse_cpu_list
from ..setups.testbeds import TOPOLOGIES
from .clock import RealClock, SimClock
from .envs import (
    DEFAULT_CHAIN_FACTORY,
    KINDS,
    ChainEnvironment,
    Environment,
    FakeEnvironment,
    LoopbackEnvironment,
    emulation_config,
)
from .search import METHODS, RFC8219, SearchSettings
from .xlatperf import (
    MAX_OUTSTANDING_PER_SOCKET,
    TesterOptions,
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
    method: whose median rate the runs use ("rfc8219-binary" or "fast").
    search: name of the search settings whose median is used (default: the first).
    """

    runs: int = 0
    duration_s: float | None = None
    rest_s: float | None = None
    interval_s: float = 1.0
    method: str = RFC8219
    search: str | None = None


@dataclass(frozen=True)
class SetupSpec:
    """One thing to measure.

    name: unique label; kind: fake | loopback | chain; params: the rest of its table.
    """

    name: str
    kind: str
    params: dict[str, Any]

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **self.params}


@dataclass(frozen=True)
class Campaign:
    """A parsed campaign file. sha256: hash of its normalized content (every record carries it)."""

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
    _only(data, "top level", {"campaign", "search", "tester", "idle", "setup"})
    head = _table(data, "campaign")
    _only(head, "[campaign]", {"name", "store", "methods", "cores"})
    name = _str(head, "name", "[campaign]")
    methods = tuple(_list(head, "methods", "[campaign]", [RFC8219]))
    for method in methods:
        if method not in METHODS:
            raise CampaignFileError(f"[campaign] methods: unknown method {method!r}; use {list(METHODS)}")
    if not methods:
        raise CampaignFileError("[campaign] methods is empty")
    cores = tuple(_list(head, "cores", "[campaign]", list(DEFAULT_CORES)))
    if not cores or any(not isinstance(c, int) or c < 1 for c in cores):
        raise CampaignFileError(f"[campaign] cores must be a list of positive integers, got {list(cores)}")
    store_path = store or Path(head.get("store", f"results/{name}.jsonl"))
    searches = _searches(data.get("search"))
    tester = _dataclass(TesterOptions, _table(data, "tester", required=False), "[tester]",
                        convert={"extra_args": tuple})
    for key in ("sender_cpus", "receiver_cpus"):
        if getattr(tester, key) is not None:
            _cpus(f"[tester] {key}", getattr(tester, key))
    idle = _dataclass(IdleSpec, _table(data, "idle", required=False), "[idle]")
    if idle.method not in METHODS or idle.method not in methods:
        raise CampaignFileError(f"[idle] method {idle.method!r} is not one of the campaign's methods "
                                f"{list(methods)}")
    if idle.search is not None and idle.search not in {n for n, _ in searches}:
        raise CampaignFileError(f"[idle] search {idle.search!r} names no [[search]] table")
    if idle.runs < 0 or idle.interval_s <= 0:
        raise CampaignFileError("[idle] runs must be >= 0 and interval_s > 0")
    setups = _setups(data.get("setup"))
    if any(setup.kind != "fake" for setup in setups):
        for search_name, settings in searches:
            _check_outstanding(search_name, settings, tester)
    normalized = json.dumps(data, sort_keys=True, default=str).encode()
    return Campaign(name, file, store_path, methods, cores, searches, tester, idle, setups,
                    hashlib.sha256(normalized).hexdigest())


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


SETUP_KEYS = {
    "fake": {"capacity_qps", "scaling", "noise", "buffer_queries", "tester_limit_qps", "seed", "realtime",
             "cores_available", "background_loss"},
    "loopback": {"knot_cpus", "udp_workers", "rmem_bytes"},
    "chain": {"topology", "options", "factory", "cpu_map"},
}


def _setups(raw: Any) -> tuple[SetupSpec, ...]:
    if not raw or not isinstance(raw, list):
        raise CampaignFileError("no [[setup]] tables: say what to measure (kind = fake | loopback | chain)")
    setups = []
    for i, table in enumerate(raw):
        where = f"[[setup]] #{i + 1}"
        kind = table.get("kind")
        if kind not in KINDS:
            raise CampaignFileError(f"{where}: kind must be one of {list(KINDS)}, got {kind!r}")
        _only(table, where, {"name", "kind"} | SETUP_KEYS[kind])
        name = str(table.get("name", table.get("topology", kind)))
        if "/" in name or not name:
            raise CampaignFileError(f"{where}: name {name!r} must be non-empty and contain no '/'")
        if kind == "fake" and "capacity_qps" not in table:
            raise CampaignFileError(f"{where}: a fake setup needs capacity_qps")
        if kind == "chain" and "topology" not in table:
            raise CampaignFileError(f"{where}: a chain setup needs topology ({' | '.join(TOPOLOGIES)})")
        if kind == "chain":
            _topology(f"{where} topology", table["topology"])
        if kind == "chain" and table.get("factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY:
            _check_emulation_options(where, str(table["topology"]), table.get("options", {}))
        for key, value in table.items():
            if key in SETUP_VALUES:
                SETUP_VALUES[key](f"{where} {key}", value)
        setups.append(SetupSpec(name, kind, {k: v for k, v in table.items() if k not in ("name", "kind")}))
    names = [s.name for s in setups]
    if len(set(names)) != len(names):
        raise CampaignFileError(f"[[setup]] names must be unique, got {names}")
    return tuple(setups)


def _number(low: float, inclusive: bool = True, integer: bool = False) -> Any:
    """A check that a value is a number (an integer if `integer`) >= low (> low unless inclusive)."""
    def check(where: str, value: Any) -> None:
        kinds = (int,) if integer else (int, float)
        noun = "an integer" if integer else "a number"
        bound = f"{'>=' if inclusive else '>'} {low:g}"
        if isinstance(value, bool) or not isinstance(value, kinds) or not (
                value >= low if inclusive else value > low):
            raise CampaignFileError(f"{where} must be {noun} {bound}, got {value!r}")
    return check


def _cpus(where: str, value: Any) -> tuple[int, ...]:
    """A CPU list (a TOML list of integers, or text such as "0,1") of CPUs this process may run on."""
    from .hostinfo import usable_cpus

    if isinstance(value, str):
        try:
            value = list(parse_cpu_list(value.strip("[] ")))
        except ValueError as err:
            raise CampaignFileError(f"{where}: {err}; write CPU numbers such as [0, 1] or \"0,1\"") from None
    usable = usable_cpus()
    if (not isinstance(value, list) or not value or any(isinstance(c, bool) or not isinstance(c, int)
                                                         or c not in usable for c in value)):
        raise CampaignFileError(f"{where} must be a non-empty list of this machine's CPUs {usable}, "
                                f"got {value!r}")
    return tuple(value)


def _topology(where: str, value: Any) -> None:
    topologies = tuple(TOPOLOGIES)
    if value not in topologies:
        raise CampaignFileError(f"{where} must be one of {list(topologies)}, got {value!r}")


def _kind(kind: type, noun: str) -> Any:
    def check(where: str, value: Any) -> None:
        if not isinstance(value, kind):
            raise CampaignFileError(f"{where} must be {noun}, got {value!r}")
    return check


def _cpu_map(where: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise CampaignFileError(f"{where} must be a table such as {{ 1 = [1], 2 = [0, 1] }}, got {value!r}")
    for cores, cpus in value.items():
        if not str(cores).isdigit() or int(cores) < 1:
            raise CampaignFileError(f"{where}: key {cores!r} must be a core count >= 1")
        if len(_cpus(f"{where} {cores}", cpus)) != int(cores):
            raise CampaignFileError(f"{where} {cores}: list exactly {cores} CPU(s), got {cpus!r}")


SETUP_VALUES = {
    "capacity_qps": _number(0, inclusive=False), "scaling": _number(0, inclusive=False),
    "noise": _number(0), "buffer_queries": _number(0), "tester_limit_qps": _number(0, inclusive=False),
    "seed": _number(0, integer=True), "realtime": _kind(bool, "true or false"),
    "cores_available": _number(1, integer=True), "background_loss": _number(0),
    "udp_workers": _number(1, integer=True), "rmem_bytes": _number(0, integer=True),
    "knot_cpus": _cpus, "topology": _topology, "factory": _kind(str, "a string 'package.module:function'"),
    "options": _kind(dict, "a table such as { prefix = \"xb1\" }"), "cpu_map": _cpu_map,
}


def _list(table: dict[str, Any], key: str, where: str, default: list[Any]) -> list[Any]:
    value = table.get(key, default)
    if not isinstance(value, list):
        raise CampaignFileError(f"{where} {key} must be a list such as {default!r}, got {value!r}")
    return value


def _check_outstanding(name: str, settings: SearchSettings, tester: TesterOptions) -> None:
    """Fail now, not at the first trial, when max_rate_qps is more than xlatperf can keep in flight."""
    sockets = tester.threads * tester.ports_per_thread
    outstanding = outstanding_per_socket(settings.max_rate_qps, sockets, tester.timeout_s)
    if outstanding > MAX_OUTSTANDING_PER_SOCKET:
        needed = sockets_needed(settings.max_rate_qps, tester.timeout_s)
        raise CampaignFileError(
            f"search {name!r}: max_rate_qps {settings.max_rate_qps:.0f} over {sockets} tester socket(s) "
            f"keeps {outstanding:.0f} queries in flight per socket, xlatperf allows "
            f"{MAX_OUTSTANDING_PER_SOCKET}: "
            f"set [tester] threads x ports_per_thread >= {needed}")


def _check_emulation_options(where: str, topology: str, options: Any) -> None:
    """Catch a typo in a chain's options now rather than hours into a campaign."""
    if not isinstance(options, dict):
        raise CampaignFileError(f"{where}: options must be a table")
    from ..setups import EmulationConfig
    from ..setups.names import check_prefix

    allowed = {f.name for f in fields(EmulationConfig)} - {"topology"}
    _only(options, f"{where} options", allowed)
    try:
        config = emulation_config(topology, **options)
        check_prefix(config.prefix)
    except (TypeError, ValueError) as err:
        raise CampaignFileError(f"{where} options: {err}") from None
    for key in ("knot_cpus", "dut_cpus"):
        if getattr(config, key) is not None:
            _cpus(f"{where} options {key}", list(getattr(config, key)))


def make_environment(setup: SetupSpec, tester: TesterOptions) -> Environment:
    p = setup.params
    if setup.kind == "fake":
        realtime = bool(p.get("realtime", False))
        return FakeEnvironment(
            capacity_qps=float(p["capacity_qps"]), scaling=float(p.get("scaling", 1.0)),
            noise=float(p.get("noise", 0.0)), buffer_queries=float(p.get("buffer_queries", 0.0)),
            background_loss=float(p.get("background_loss", 0.0)),
            tester_limit_qps=p.get("tester_limit_qps"), seed=int(p.get("seed", 1)), realtime=realtime,
            cores_available=int(p.get("cores_available", 16)), clock=RealClock() if realtime else SimClock())
    if setup.kind == "loopback":
        cpus = p.get("knot_cpus")
        return LoopbackEnvironment(tester, knot_cpus=_cpus("knot_cpus", cpus) if cpus is not None else None,
                                   udp_workers=int(p.get("udp_workers", 1)),
                                   rmem_bytes=int(p.get("rmem_bytes", 4 << 20)))
    cpu_map = {int(k): [int(c) for c in v] for k, v in p.get("cpu_map", {}).items()}
    return ChainEnvironment(str(p["topology"]), tester, options=dict(p.get("options", {})),
                            factory=str(p.get("factory", DEFAULT_CHAIN_FACTORY)), cpu_map=cpu_map)


def _table(data: dict[str, Any], key: str, required: bool = True) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        if required:
            raise CampaignFileError(f"missing [{key}] table")
        return {}
    if not isinstance(value, dict):
        raise CampaignFileError(f"[{key}] must be a table")
    return value


def _only(table: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise CampaignFileError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


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
    _only(table, where, allowed)
    _check_fields(cls, table, where)
    values = {k: (convert[k](v) if convert and k in convert else v) for k, v in table.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:
        raise CampaignFileError(f"{where}: {err}") from None


def settings_record(settings: SearchSettings) -> dict[str, Any]:
    return asdict(settings)
