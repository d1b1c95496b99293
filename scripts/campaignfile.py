"""Campaign files (TOML): topologies x core counts x tester sessions x search settings x idle capture,
validated up front.

Every table rejects keys it does not know, so a typo fails at once with the key's name instead of running a
38-hour campaign with a default. See README (section "Measurement") and campaigns/*.toml for examples.
"""

from __future__ import annotations

import resource
import tomllib
from dataclasses import MISSING, asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..results.records import campaign_sha256
from ..setups.cpulist import format_cpu_list, parse_user_cpu_list
from ..setups.paper import TOPOLOGIES
from ..zones import check_io
from .clock import RealClock, SimClock
from .envs import (
    DEFAULT_CHAIN_FACTORY,
    SETUP_KINDS,
    ChainEnvironment,
    Environment,
    FakeEnvironment,
    LoopbackEnvironment,
    emulation_config,
)
from .nat44 import DEFAULT_STREAM_TIMEOUT_S, Cycle, UdpTimeout, ephemeral_refusal, udp_timeout
from .search import MLRSEARCH, RFC8219, SearchSettings, check_method
from .xlatperf import (
    MAX_OUTSTANDING_PER_SOCKET,
    TesterOptions,
    flows,
    options_for_sessions,
    outstanding_per_socket,
    sockets_needed,
    source_first_port,
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
    _only(data, "top level", {"campaign", "search", "tester", "idle", "setup", "server"})
    head = _table(data, "campaign")
    _only(head, "[campaign]", {"name", "store", "methods", "cores", "sessions"})
    name = _str(head, "name", "[campaign]")
    methods = tuple(_list(head, "methods", "[campaign]", [RFC8219]))
    for method in methods:
        _method(method, "[campaign] methods")
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
        if getattr(tester, key) is not None:  # passed to xlatperf in its grammar, however it was written
            spelled = format_cpu_list(_cpus(f"[tester] {key}", getattr(tester, key)))
            tester = replace(tester, **{key: spelled})
    idle = _dataclass(IdleSpec, _table(data, "idle", required=False), "[idle]")
    _method(idle.method, "[idle] method")
    if idle.method not in methods:
        raise CampaignFileError(f"[idle] method {idle.method!r} is not one of the campaign's methods "
                                f"{list(methods)}")
    if idle.search is not None and idle.search not in {n for n, _ in searches}:
        raise CampaignFileError(f"[idle] search {idle.search!r} names no [[search]] table")
    if idle.runs < 0 or idle.interval_s <= 0:
        raise CampaignFileError("[idle] runs must be >= 0 and interval_s > 0")
    server_io = _server_io(_table(data, "server", required=False))
    setups = tuple(_with_server_io(setup, server_io, i) for i, setup in enumerate(_setups(data.get("setup"))))
    sessions = _sessions(head, _table(data, "tester", required=False))
    try:
        testers = [tester if s is None else options_for_sessions(tester, s) for s in sessions or (None,)]
    except ValueError as err:
        raise CampaignFileError(f"[campaign] {err}") from None
    if any(setup.kind != "fake" for setup in setups):
        for search_name, settings in searches:
            for options in testers:
                check_outstanding(search_name, settings, options, swept=bool(sessions))
    most = max(flows(options) for options in testers)
    campaign = Campaign(name, file, store_path, methods, cores, searches, tester, idle, setups,
                        campaign_sha256(data), sessions, server_io)
    for i, setup in enumerate(setups):
        _check_tester_io(setup, tester, most, i)
        _check_flows(setup, most, tester, trial_cycles(campaign))
    if tester.io == "socket" and any(setup.kind == "loopback" or (setup.kind == "chain" and setup.params.get(
            "factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY) for setup in setups):
        _check_local_sockets(most, bool(sessions))  # AF_XDP flows (io = "xdp") need no socket each
    return campaign


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
    _only(server, "[server]", {"io"})
    try:
        return check_io(server.get("io", "socket"), "[server] io")
    except ValueError as err:
        raise CampaignFileError(str(err)) from None


def _with_server_io(setup: SetupSpec, io: str, index: int) -> SetupSpec:
    """The setup with [server] io applied: an emulated chain gets it as its `knot_io` option (a setup that
    sets knot_io itself must agree), a testbed its `server_io` (refused where a translator would drop Knot
    XDP's replies: setups.testbed.knot.knot_xdp_refusal); loopback setups refuse XDP mode; a fake has no
    server."""
    where = f"[[setup]] #{index + 1} ({setup.name})"
    if setup.kind == "chain":
        options = dict(setup.params.get("options", {}))
        if options.get("knot_io", io) != io:
            raise CampaignFileError(f"{where}: options knot_io = {options['knot_io']!r} contradicts "
                                    f"[server] io = {io!r}: drop one")
        if io == "socket" and "knot_io" not in options:
            return setup  # the default: a factory that knows no knot_io still gets the options it knew
        options["knot_io"] = io
        if setup.params.get("factory", DEFAULT_CHAIN_FACTORY) == DEFAULT_CHAIN_FACTORY:
            _check_emulation_options(where, str(setup.params["topology"]), options)
        return replace(setup, params={**setup.params, "options": options})
    if io == "xdp" and setup.kind == "loopback":
        raise CampaignFileError(f"{where}: [server] io = \"xdp\" needs a network interface for Knot's XDP "
                                "mode; a loopback setup has none: use a chain setup (or io = \"socket\")")
    if io == "xdp" and setup.kind == "testbed":
        from ..setups.testbed.inventory import load_inventory
        from ..setups.testbed.knot import knot_xdp_refusal

        refusal = knot_xdp_refusal(load_inventory(str(setup.params["inventory"])))  # _check_testbed loaded it
        if refusal:
            raise CampaignFileError(f"{where}: {refusal}")
        return replace(setup, params={**setup.params, "server_io": io})
    return setup


def _check_tester_io(setup: SetupSpec, tester: TesterOptions, most: int, index: int) -> None:
    """[tester] io = "xdp" runs xlatperf's AF_XDP flows on the client host's interface: an emulated chain or
    a testbed's client host places them (setups.chain.place_tester; another factory's chain is checked when it
    is up); loopback setups refuse it; a fake runs no tester."""
    if tester.io == "socket" or setup.kind == "fake":
        return
    where = f"[[setup]] #{index + 1} ({setup.name})"
    if setup.kind == "loopback":
        raise CampaignFileError(f"{where}: [tester] io = \"xdp\" needs a network interface for AF_XDP; a "
                                "loopback setup has none: use a chain setup (or io = \"socket\")")
    chain = _chain_topology(setup)
    if chain is None:
        return
    from ..setups.chain import place_tester

    try:
        place_tester(chain, tester.io, most, source_first_port(tester))
    except ValueError as err:
        raise CampaignFileError(f"{where}: [tester] io = \"xdp\": {err}") from None


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
    "testbed": {"inventory", "topology"},
}


def _setups(raw: Any) -> tuple[SetupSpec, ...]:
    if not raw or not isinstance(raw, list):
        raise CampaignFileError("no [[setup]] tables: say what to measure (kind = fake | loopback | chain | "
                                "testbed)")
    setups = []
    for i, table in enumerate(raw):
        where = f"[[setup]] #{i + 1}"
        kind = table.get("kind")
        if kind not in SETUP_KINDS:
            raise CampaignFileError(f"{where}: kind must be one of {list(SETUP_KINDS)}, got {kind!r}")
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
        if kind == "testbed":
            _check_testbed(where, table)
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
            value = list(parse_user_cpu_list(value))
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
    "capacity_qps": _number(0, inclusive=False), "scaling": _number(0),
    "noise": _number(0), "buffer_queries": _number(0), "tester_limit_qps": _number(0, inclusive=False),
    "seed": _number(0, integer=True), "realtime": _kind(bool, "true or false"),
    "cores_available": _number(1, integer=True), "background_loss": _number(0),
    "udp_workers": _number(1, integer=True), "rmem_bytes": _number(0, integer=True),
    "knot_cpus": _cpus, "topology": _topology, "factory": _kind(str, "a string 'package.module:function'"),
    "options": _kind(dict, "a table such as { prefix = \"xb1\" }"), "cpu_map": _cpu_map,
    "half_capacity_sessions": _number(0, inclusive=False),
}


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


def _check_flows(setup: SetupSpec, most: int, tester: TesterOptions, cycles: list[Cycle]) -> None:
    """Fail now when the tester would use more flows than a chain carries (a MAP-T port set, a PLAT's
    shared address), or so many on
    ephemeral ports that a MAP-T CE's NAT44 runs out of ports while conntrack keeps earlier trials'
    mappings (scripts.nat44): emulated chains and testbed inventories alike."""
    first_port = tester.first_port
    chain = _chain_topology(setup)
    if chain is None:
        return  # another factory's chain says its max_flows when it is up (ChainMeasurer checks it)
    name = chain.name
    limit = chain.max_flows()
    where = f"setup {setup.name!r}"
    if chain.tester_ces and first_port is not None:
        raise CampaignFileError(f"{where}: [tester] first_port cannot be used with br, which binds the "
                                "tester to its CE's port set itself; remove first_port")
    if limit is not None and most > limit:
        raise CampaignFileError(f"{where}: {most} tester sessions (threads x ports_per_thread) do not fit "
                                f"the {name} chain's {limit} flows ({_port_set_text(chain)}): "
                                f"use sessions <= {limit}")
    if limit is not None and not chain.tester_ces and source_first_port(tester) is None:
        timeout = udp_timeout() if setup.kind == "chain" else UdpTimeout(
            DEFAULT_STREAM_TIMEOUT_S, "net.netfilter.nf_conntrack_udp_timeout_stream's kernel default: the "
            "testbed CE host's own value is not read when the campaign is loaded")
        refusal = ephemeral_refusal(most, limit, cycles, timeout)
        if refusal:
            raise CampaignFileError(f"{where}: {refusal}")


def _chain_topology(setup: SetupSpec) -> Any:
    """The topology of an emulated chain of the default factory or of a testbed inventory, else None."""
    if setup.kind == "testbed":
        from ..setups.testbed.inventory import load_inventory

        return load_inventory(str(setup.params["inventory"])).topology()
    if setup.kind != "chain" or setup.params.get("factory", DEFAULT_CHAIN_FACTORY) != DEFAULT_CHAIN_FACTORY:
        return None
    config = emulation_config(str(setup.params["topology"]), **setup.params.get("options", {}))
    return config.chain_topology()


def _port_set_text(chain: Any) -> str:
    """What bounds the chain's flows with the arithmetic: the MAP-T CE's port set, or a PLAT's one public
    address."""
    from ..setups.mapt import MapCe
    from ..setups.topology import NAT44_PORTS, Plat

    ces = [ce for t in chain.translators().values() if isinstance(ce := getattr(t, "ce", None), MapCe)]
    if not ces and not chain.tester_ces:
        plat = next(t for t in chain.translators().values() if isinstance(t, Plat))
        return (f"the PLAT's NAT44 shares one address {plat.pool4}: its {NAT44_PORTS} ports 1024-65535 "
                "toward the one server address and port; the plat topology's option plat_netmap = true gives "
                "each IPv6 client an address of its own")
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
            f"{soft - TESTER_OTHER_FILES}, raise the limit (ulimit -n; above the hard limit needs root with "
            "CAP_SYS_RESOURCE), or set [tester] io = \"xdp\" (AF_XDP flows need no socket each)")
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
    from ..setups.emulation import EmulationConfig
    from ..setups.emulation.names import check_prefix

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


def _check_testbed(where: str, table: dict[str, Any]) -> None:
    """A testbed setup names a valid inventory file; a topology, if given, is the inventory's."""
    from ..setups.testbed.inventory import InventoryError, load_inventory

    path = table.get("inventory")
    if not isinstance(path, str) or not path:
        raise CampaignFileError(f"{where}: a testbed setup needs inventory = \"PATH\" (its inventory file, "
                                "see docs/testbed.md)")
    try:
        inventory = load_inventory(path)
    except InventoryError as err:
        raise CampaignFileError(f"{where} inventory: {err}") from None
    if "topology" in table:
        _topology(f"{where} topology", table["topology"])
    topology = table.get("topology", inventory.topology_name)
    if topology != inventory.topology_name:
        raise CampaignFileError(f"{where} topology: {topology!r}, but inventory {path} describes "
                                f"{inventory.topology_name!r}: drop topology or make them agree")


def make_environment(setup: SetupSpec, tester: TesterOptions) -> Environment:
    p = setup.params
    if setup.kind == "testbed":
        from .testbed_env import TestbedEnvironment

        return TestbedEnvironment(str(p["inventory"]), tester, topology=p.get("topology"),
                                  server_io=str(p.get("server_io", "socket")))
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
