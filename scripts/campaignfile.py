"""Campaign files (TOML): topologies x core counts x tester sessions x search settings x idle capture,
validated up front.

Every table rejects keys it does not know, so a typo fails at once with the key's name instead of running a
38-hour campaign with a default. See README (section "Measurement") and campaigns/*.toml for examples.
"""

from __future__ import annotations

import hashlib
import json
import resource
import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

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
    """A parsed campaign file. sha256: hash of its normalized content (every record carries it).
    sessions: the tester flow counts swept ([campaign] sessions); () = no sweep, [tester] as given."""

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
    _only(data, "top level", {"campaign", "search", "tester", "idle", "setup"})
    head = _table(data, "campaign")
    _only(head, "[campaign]", {"name", "store", "methods", "cores", "sessions"})
    name = _str(head, "name", "[campaign]")
    methods = tuple(head.get("methods", [RFC8219]))
    for method in methods:
        if method not in METHODS:
            raise CampaignFileError(f"[campaign] methods: unknown method {method!r}; use {list(METHODS)}")
    if not methods:
        raise CampaignFileError("[campaign] methods is empty")
    cores = tuple(head.get("cores", DEFAULT_CORES))
    if not cores or any(not isinstance(c, int) or c < 1 for c in cores):
        raise CampaignFileError(f"[campaign] cores must be a list of positive integers, got {list(cores)}")
    store_path = store or Path(head.get("store", f"results/{name}.jsonl"))
    searches = _searches(data.get("search"))
    tester = _dataclass(TesterOptions, _table(data, "tester", required=False), "[tester]",
                        convert={"extra_args": tuple})
    idle = _dataclass(IdleSpec, _table(data, "idle", required=False), "[idle]")
    if idle.method not in METHODS or idle.method not in methods:
        raise CampaignFileError(f"[idle] method {idle.method!r} is not one of the campaign's methods "
                                f"{list(methods)}")
    if idle.search is not None and idle.search not in {n for n, _ in searches}:
        raise CampaignFileError(f"[idle] search {idle.search!r} names no [[search]] table")
    if idle.runs < 0 or idle.interval_s <= 0:
        raise CampaignFileError("[idle] runs must be >= 0 and interval_s > 0")
    setups = _setups(data.get("setup"))
    sessions = _sessions(head, _table(data, "tester", required=False))
    try:
        testers = [tester if s is None else options_for_sessions(tester, s) for s in sessions or (None,)]
    except ValueError as err:
        raise CampaignFileError(f"[campaign] {err}") from None
    if any(setup.kind != "fake" for setup in setups):
        for search_name, settings in searches:
            for options in testers:
                _check_outstanding(search_name, settings, options, swept=bool(sessions))
    most = max(flows(options) for options in testers)
    for setup in setups:
        _check_flows(setup, most, tester.first_port)
    if any(setup.kind == "loopback" or (setup.kind == "chain" and setup.params.get(
            "factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY) for setup in setups):
        _check_local_sockets(most, bool(sessions))
    normalized = json.dumps(data, sort_keys=True, default=str).encode()
    return Campaign(name, file, store_path, methods, cores, searches, tester, idle, setups,
                    hashlib.sha256(normalized).hexdigest(), sessions)


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
             "cores_available", "background_loss", "half_capacity_sessions"},
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
            raise CampaignFileError(f"{where}: a chain setup needs topology (baseline | 464xlat | mapt)")
        if kind == "chain" and table.get("factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY:
            _check_emulation_options(where, str(table["topology"]), table.get("options", {}))
        setups.append(SetupSpec(name, kind, {k: v for k, v in table.items() if k not in ("name", "kind")}))
    names = [s.name for s in setups]
    if len(set(names)) != len(names):
        raise CampaignFileError(f"[[setup]] names must be unique, got {names}")
    return tuple(setups)


def _check_outstanding(name: str, settings: SearchSettings, tester: TesterOptions,
                       swept: bool = False) -> None:
    """Fail now, not at the first trial, when max_rate_qps is more than xlatperf can keep in flight."""
    sockets = tester.threads * tester.ports_per_thread
    outstanding = outstanding_per_socket(settings.max_rate_qps, sockets, tester.timeout_s)
    if outstanding > MAX_OUTSTANDING_PER_SOCKET:
        needed = sockets_needed(settings.max_rate_qps, tester.timeout_s)
        raise CampaignFileError(
            f"search {name!r}: max_rate_qps {settings.max_rate_qps:.0f} over {sockets} tester socket(s) "
            f"keeps {outstanding:.0f} queries in flight per socket, xlatperf allows "
            f"{MAX_OUTSTANDING_PER_SOCKET}: " + (
                f"use [campaign] sessions >= {needed} or a lower max_rate_qps" if swept
                else f"set [tester] threads x ports_per_thread >= {needed}"))


def _check_flows(setup: SetupSpec, most: int, first_port: int | None) -> None:
    """Fail now when the tester would use more flows than an emulated chain carries (a MAP-T port set), or
    so many on ephemeral ports that a MAP-T CE's NAT44 runs out of ports between trials."""
    if setup.kind != "chain" or setup.params.get("factory", DEFAULT_CHAIN_FACTORY) != DEFAULT_CHAIN_FACTORY:
        return  # another factory's chain says its max_flows when it is up (ChainMeasurer checks it)
    from ..setups.testbeds import topology

    config = emulation_config(str(setup.params["topology"]), **setup.params.get("options", {}))
    chain = topology(config.topology, config.effective_nat64_prefix, config.ces)
    limit = chain.max_flows()
    where = f"setup {setup.name!r}"
    if chain.tester_ces and first_port is not None:
        raise CampaignFileError(f"{where}: [tester] first_port cannot be used with br, which binds the "
                                "tester to its CE's port set itself; remove first_port")
    if limit is not None and most > limit:
        raise CampaignFileError(f"{where}: {most} tester sessions (threads x ports_per_thread) do not fit "
                                f"the {config.topology} chain's {limit} flows ({_port_set_text(chain)}): "
                                f"use sessions <= {limit}")
    if limit is not None and not chain.tester_ces and first_port is None and 2 * most > limit:
        raise CampaignFileError(
            f"{where}: {most} tester sessions on ephemeral ports are new flows every trial, and the CE's "
            f"NAT44 keeps the last trial's mappings (conntrack, 30-120 s), so {2 * most} do not fit its "
            f"{limit}-port set: set [tester] first_port (e.g. 20000) so every trial reuses the same flows")


def _port_set_text(chain: Any) -> str:
    """The MAP-T CE's port set and the arithmetic behind its size."""
    from ..setups.mapt import MapCe

    ces = [ce for t in chain.translators().values() if isinstance(ce := getattr(t, "ce", None), MapCe)]
    ce = (ces or list(chain.tester_ces))[0]
    ranges = ", ".join(f"{first}-{last}" for first, last in ce.port_ranges)
    return (f"MAP-T CE {ce.ipv4_address} PSID {ce.psid}: PSID length {ce.psid_len} leaves "
            f"2^(16 - {ce.psid_len}) = {ce.port_count} ports, {ranges}")


# Files xlatperf holds open besides its sockets (stdio, its JSON, /proc and /sys reads), with room to spare.
TESTER_OTHER_FILES = 16


def _check_local_sockets(most: int, swept: bool) -> None:
    """Fail now when the tester, run on this machine, cannot open one socket per flow: its open-file limit
    (RLIMIT_NOFILE, inherited) and, with ephemeral source ports, the host's ephemeral port range."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    what = "[campaign] sessions" if swept else "[tester] threads x ports_per_thread"
    if most + TESTER_OTHER_FILES > soft:
        raise CampaignFileError(
            f"{what} asks for {most} tester sockets, but this process may open only {soft} files "
            f"(ulimit -n; hard limit {hard}) and xlatperf needs about {TESTER_OTHER_FILES} more: use at most "
            f"{soft - TESTER_OTHER_FILES} or raise the limit (ulimit -n; above the hard limit needs "
            "root with CAP_SYS_RESOURCE)")
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return
    if most > high - low + 1:
        raise CampaignFileError(
            f"{what} asks for {most} tester sockets on ephemeral source ports, more than this host's range "
            f"{low}-{high} ({high - low + 1} ports, net.ipv4.ip_local_port_range): use fewer")


def _check_emulation_options(where: str, topology: str, options: Any) -> None:
    """Catch a typo in a chain's options now rather than hours into a campaign."""
    if not isinstance(options, dict):
        raise CampaignFileError(f"{where}: options must be a table")
    try:
        from ..setups import EmulationConfig  # noqa: F401
    except ImportError:
        return  # the setups part is not installed: the chain fails with its own message when brought up
    try:
        emulation_config(topology, **options)
    except (TypeError, ValueError) as err:
        raise CampaignFileError(f"{where}: {err}") from None


def make_environment(setup: SetupSpec, tester: TesterOptions) -> Environment:
    p = setup.params
    if setup.kind == "fake":
        realtime = bool(p.get("realtime", False))
        return FakeEnvironment(
            capacity_qps=float(p["capacity_qps"]), scaling=float(p.get("scaling", 1.0)),
            noise=float(p.get("noise", 0.0)), buffer_queries=float(p.get("buffer_queries", 0.0)),
            background_loss=float(p.get("background_loss", 0.0)),
            tester_limit_qps=p.get("tester_limit_qps"), seed=int(p.get("seed", 1)), realtime=realtime,
            cores_available=int(p.get("cores_available", 16)), clock=RealClock() if realtime else SimClock(),
            half_capacity_sessions=p.get("half_capacity_sessions"), sessions=flows(tester))
    if setup.kind == "loopback":
        cpus = p.get("knot_cpus")
        return LoopbackEnvironment(tester, knot_cpus=tuple(cpus) if cpus is not None else None,
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


def _dataclass(cls: type, table: dict[str, Any], where: str, convert: dict[str, Any] | None = None) -> Any:
    allowed = {f.name for f in fields(cls)}
    _only(table, where, allowed)
    values = {k: (convert[k](v) if convert and k in convert else v) for k, v in table.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:
        raise CampaignFileError(f"{where}: {err}") from None


def settings_record(settings: SearchSettings) -> dict[str, Any]:
    return asdict(settings)
