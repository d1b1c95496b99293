"""RFC 9693's four measurements as procedures of a campaign: the `[stateful]` table (its points: connection
counts with the table and hash sizes set for each, and the connection timeouts of the run) and the
`[[procedure]]` tables whose kind is one of KINDS, parsed and checked up front (one line naming the table and
the key), and the time they take (`campaign plan`).

kinds, in the order they run at each (setup, cores, point):
- "connection-rate": maximum connection establishment rate (scripts.stateful.establishment);
- "throughput-connections": throughput over N established connections (scripts.stateful.throughput; its
  RFC 8219 bracket, error and trial length from the [[search]] table it names);
- "teardown": connection tear-down rate (scripts.stateful.teardown);
- "table-capacity": connection tracking table capacity (scripts.stateful.capacity).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..search import SearchSettings
from .capacity import CapacityParameters
from .measurer import TableSettings
from .parameters import RateBracket, StatefulParameterError, check_factor

CONNECTION_RATE, THROUGHPUT, TEARDOWN, CAPACITY = ("connection-rate", "throughput-connections", "teardown",
                                                   "table-capacity")
KINDS = (CONNECTION_RATE, THROUGHPUT, TEARDOWN, CAPACITY)
DEFAULT_REST_S = 10.0
DEFAULT_SETUP_FRACTION = 0.5
_COMMON = {"kind", "repetitions", "rest_s", "expect_cps"}
_RATE = {"min_cps", "max_cps", "error_cps", "error_ratio", "alpha"}
_SETUP = {"setup_rate_cps", "setup_fraction"}
KEYS = {CONNECTION_RATE: _COMMON | _RATE,
        THROUGHPUT: _COMMON | _SETUP | {"search"},
        TEARDOWN: _COMMON | _SETUP | {"expect_teardown_per_s"},
        CAPACITY: _COMMON | _RATE | {"beta", "gamma", "c0", "r0", "error_connections", "expect_capacity"}}
POINT_KEYS = {"connections", "source_addresses", "source_ports", "table_size", "hash_size", "cores",
              "procedures", "repetitions", "expect_cps"}
STATEFUL_KEYS = {"timeout_s", "rest_s", "point"}


class StatefulCampaignError(ValueError):
    """The [stateful] table or a stateful [[procedure]] is malformed; one line naming the table and key."""


@dataclass(frozen=True)
class Point:
    """One point of the sweep over N: connections (N); source_addresses x source_ports: how the campaign
    file declares the flows (None: not declared); table: the table size, hash size and timeouts set for it;
    cores: the core counts it is measured at (None: every core count of the campaign); procedures: the kinds
    run at it (None: every one); repetitions: replaces each procedure's own at this point (the draft's 5 at
    800 M connections); expect_cps: the establishment rate `campaign plan` assumes here, connections/s."""

    connections: int
    table: TableSettings
    source_addresses: int | None = None
    source_ports: int | None = None
    cores: tuple[int, ...] | None = None
    procedures: tuple[str, ...] | None = None
    repetitions: int | None = None
    expect_cps: float | None = None

    def runs(self, spec: StatefulSpec) -> bool:
        return self.procedures is None or spec.kind in self.procedures

    def repetitions_of(self, spec: StatefulSpec) -> int:
        return self.repetitions or spec.repetitions

    @property
    def name(self) -> str:
        """"nN-tT-hH" (x where a size is left as found): the point's part of every record key."""
        def size(value: int | None) -> str:
            return "x" if value is None else str(value)
        return f"n{self.connections}-t{size(self.table.max_connections)}-h{size(self.table.hash_size)}"

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "connections": self.connections, "source_addresses": self.source_addresses,
                "source_ports": self.source_ports, "table_size": self.table.max_connections,
                "hash_size": self.table.hash_size, "timeout_s": self.table.timeout_s}


@dataclass(frozen=True)
class StatefulSpec:
    """One stateful [[procedure]] table as parsed (the keys of docs/measurement.md, "RFC 9693")."""

    kind: str
    repetitions: int
    rest_s: float
    bracket: RateBracket | None = None
    alpha: float | None = None
    search: str | None = None
    setup_rate_cps: float | None = None
    setup_fraction: float = DEFAULT_SETUP_FRACTION
    capacity: CapacityParameters | None = None
    expect_cps: float | None = None
    expect_teardown_per_s: float | None = None
    expect_capacity: int | None = None

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class StatefulPlan:
    """The [stateful] table and the stateful procedures, in the order they run."""

    points: tuple[Point, ...]
    procedures: tuple[StatefulSpec, ...]
    timeout_s: float | None
    rest_s: float

    def points_at(self, cores: int) -> list[Point]:
        return [p for p in self.points if p.cores is None or cores in p.cores]


def is_stateful(table: Any) -> bool:
    return isinstance(table, dict) and table.get("kind") in KINDS


def parse_stateful(head: Any, tables: Sequence[tuple[int, dict[str, Any]]],
                   searches: dict[str, SearchSettings]) -> StatefulPlan | None:
    """The [stateful] table and the stateful [[procedure]] tables (index in the file, table); None when
    there are neither. StatefulCampaignError (one line) for anything wrong."""
    if head is None and not tables:
        return None
    if head is None:
        raise StatefulCampaignError("RFC 9693 procedures need a [stateful] table with [[stateful.point]] "
                                    "tables (connections, table_size, hash_size)")
    if not tables:
        raise StatefulCampaignError("[stateful] without an RFC 9693 [[procedure]] (kind = "
                                    f"{' | '.join(KINDS)})")
    if not isinstance(head, dict):
        raise StatefulCampaignError("[stateful] must be a table")
    _only(head, "[stateful]", STATEFUL_KEYS)
    timeout = _number(head, "[stateful]", "timeout_s", None, positive=True)
    rest = _number(head, "[stateful]", "rest_s", DEFAULT_REST_S)
    raw_points = head.get("point")
    if not isinstance(raw_points, list) or not raw_points:
        raise StatefulCampaignError("[stateful] needs [[stateful.point]] tables, one per connection count")
    points = tuple(_point(p, i, timeout) for i, p in enumerate(raw_points))
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        raise StatefulCampaignError(f"[[stateful.point]]: the same connections, table and hash size twice: "
                                    f"{names}")
    specs = [_spec(table, index, rest, searches) for index, table in tables]
    kinds = [s.kind for s in specs]
    if len(set(kinds)) != len(kinds):
        raise StatefulCampaignError("[[procedure]]: an RFC 9693 kind twice; give each once")
    for spec in specs:
        derived = spec.kind in (THROUGHPUT, TEARDOWN) and spec.setup_rate_cps is None
        if derived and CONNECTION_RATE not in kinds:
            raise StatefulCampaignError(f"[[procedure]] kind = \"{spec.kind}\": say setup_rate_cps (the safe "
                                        "phase-1 rate), or add a connection-rate procedure whose median sets "
                                        "it (setup_fraction x that rate)")
    ordered = tuple(sorted(specs, key=lambda s: KINDS.index(s.kind)))
    plan = StatefulPlan(points, ordered, timeout, rest)
    check_timeouts(plan, searches)
    return plan


def check_timeouts(plan: StatefulPlan, searches: dict[str, SearchSettings]) -> None:
    """A connection timeout shorter than phase 1 plus phase 2 at a fixed setup rate is refused now: the
    first connections would expire before phase 2 ends."""
    if plan.timeout_s is None:
        return
    for spec in plan.procedures:
        if spec.setup_rate_cps is None:
            continue
        phase_two = searches[spec.search].duration_s if spec.kind == THROUGHPUT and spec.search else 0.0
        for point in plan.points:
            needed = point.connections / spec.setup_rate_cps + phase_two
            if needed >= plan.timeout_s:
                raise StatefulCampaignError(
                    f"[stateful] timeout_s {plan.timeout_s:g} s is shorter than the {spec.kind} procedure's "
                    f"phase 1 ({point.connections:,} connections at {spec.setup_rate_cps:,.0f}/s) plus "
                    f"phase 2 at point {point.name}: {needed:,.0f} s; raise timeout_s")


def _point(table: Any, index: int, timeout: float | None) -> Point:
    where = f"[[stateful.point]] #{index + 1}"
    if not isinstance(table, dict):
        raise StatefulCampaignError(f"{where} must be a table")
    _only(table, where, POINT_KEYS)
    connections = _integer(table, where, "connections", None)
    if connections is None:
        raise StatefulCampaignError(f"{where}: connections (N) is required")
    addresses = _integer(table, where, "source_addresses", None)
    ports = _integer(table, where, "source_ports", None)
    if (addresses is None) != (ports is None):
        raise StatefulCampaignError(f"{where}: give both source_addresses and source_ports, or neither")
    if addresses is not None and ports is not None and addresses * ports != connections:
        raise StatefulCampaignError(f"{where}: source_addresses x source_ports = {addresses * ports:,}, not "
                                    f"connections {connections:,}")
    if ports is not None and ports > 65536:
        raise StatefulCampaignError(f"{where}: source_ports must be at most 65536, got {ports}")
    cores = table.get("cores")
    if cores is not None and (not isinstance(cores, list) or not cores or any(
            isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in cores)):
        raise StatefulCampaignError(f"{where}: cores must be a list of positive integers, got {cores!r}")
    settings = TableSettings(_integer(table, where, "table_size", None),
                             _integer(table, where, "hash_size", None), timeout)
    kinds = table.get("procedures")
    if kinds is not None and (not isinstance(kinds, list) or not kinds or any(k not in KINDS for k in kinds)):
        raise StatefulCampaignError(f"{where}: procedures must be a list of {list(KINDS)}, got {kinds!r}")
    return Point(connections, settings, addresses, ports, None if cores is None else tuple(cores),
                 None if kinds is None else tuple(kinds), _integer(table, where, "repetitions", None),
                 _number(table, where, "expect_cps", None, positive=True))


def _spec(table: dict[str, Any], index: int, rest: float,
          searches: dict[str, SearchSettings]) -> StatefulSpec:
    kind = str(table["kind"])
    where = f"[[procedure]] #{index + 1} ({kind})"
    _only(table, where, KEYS[kind])
    reps = _integer(table, where, "repetitions", None)
    search = table.get("search")
    if kind == THROUGHPUT:
        if search is None:
            if len(searches) != 1:
                raise StatefulCampaignError(f"{where}: search must name the [[search]] table of its RFC 8219 "
                                            f"search; known: {list(searches)}")
            search = next(iter(searches))
        if search not in searches:
            raise StatefulCampaignError(f"{where}: search {search!r} names no [[search]] table; known: "
                                        f"{list(searches)}")
        reps = reps or searches[search].repetitions
    common = {"kind": kind, "repetitions": reps or 10, "rest_s": _number(table, where, "rest_s", rest),
              "expect_cps": _number(table, where, "expect_cps", None, positive=True)}
    try:
        if kind in (THROUGHPUT, TEARDOWN):
            return StatefulSpec(
                **common, search=search, setup_rate_cps=_number(table, where, "setup_rate_cps", None,
                                                                positive=True),
                setup_fraction=check_factor("setup_fraction", _number(
                    table, where, "setup_fraction", DEFAULT_SETUP_FRACTION), upper_inclusive=True),
                expect_teardown_per_s=_number(table, where, "expect_teardown_per_s", None, positive=True))
        top = _number(table, where, "max_cps", None, positive=True) or _missing(where, "max_cps")
        bracket = RateBracket(top,
                              _number(table, where, "min_cps", 0.0), _number(table, where, "error_cps", None),
                              _number(table, where, "error_ratio", None))
        alpha = table.get("alpha")
        if alpha is not None:
            alpha = check_factor("alpha", alpha, upper_inclusive=True)
        if kind == CONNECTION_RATE:
            return StatefulSpec(**common, bracket=bracket, alpha=alpha)
        c0 = _integer(table, where, "c0", None) or _missing(where, "c0")
        capacity = CapacityParameters(
            int(c0), bracket, _number(table, where, "beta", None) or _missing(where, "beta"),
            _number(table, where, "gamma", None) or _missing(where, "gamma"),
            _integer(table, where, "error_connections", 1) or 1,
            _number(table, where, "r0", None, positive=True), alpha)
        return StatefulSpec(**common, bracket=bracket, alpha=alpha, capacity=capacity,
                            expect_capacity=_integer(table, where, "expect_capacity", None))
    except StatefulParameterError as err:
        raise StatefulCampaignError(f"{where}: {err}") from None


def _missing(where: str, key: str) -> Any:
    raise StatefulCampaignError(f"{where}: {key} is required")


def _only(table: dict[str, Any], where: str, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise StatefulCampaignError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _number(table: dict[str, Any], where: str, key: str, default: Any, positive: bool = False) -> Any:
    value = table.get(key, default)
    if value is None:
        return None
    bad = isinstance(value, bool) or not isinstance(value, int | float)
    if bad or value < 0 or (positive and value == 0):
        raise StatefulCampaignError(f"{where}: {key} must be a number {'> 0' if positive else '>= 0'}, got "
                                    f"{value!r}")
    return float(value)


def _integer(table: dict[str, Any], where: str, key: str, default: int | None) -> int | None:
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StatefulCampaignError(f"{where}: {key} must be an integer >= 1, got {value!r}")
    return value


# -- time (campaign plan) ------------------------------------------------------------------------------
def expected_cps(plan: StatefulPlan) -> float | None:
    """The establishment rate the plan assumes where a procedure does not say expect_cps: the
    connection-rate procedure's expect_cps, else the middle of its bracket."""
    found = next((s for s in plan.procedures if s.kind == CONNECTION_RATE), None)
    if found is None or found.bracket is None:
        return None
    return found.expect_cps or (found.bracket.min_cps + found.bracket.max_cps) / 2


def procedure_time_s(spec: StatefulSpec, point: Point, searches: dict[str, SearchSettings],
                     cps: float | None = None) -> tuple[float, str]:
    """Roughly how long one procedure takes at one point, all repetitions, s, and what it assumed: phase-1
    trials take N / rate each, at rates a binary search visits on its way to `expect_cps` (else `cps`, else
    the middle of its bracket); a tear-down N / expect_teardown_per_s (350 000/s, the draft's iptables, if
    not said)."""
    n = point.connections
    expect = spec.expect_cps or point.expect_cps or cps
    repetitions = point.repetitions_of(spec)
    if not point.runs(spec):
        return 0.0, "not run at this point"
    setup = spec.setup_rate_cps or (spec.setup_fraction * expect if expect else None)
    if spec.kind == CONNECTION_RATE:
        assert spec.bracket is not None
        trials, phase_time = _rate_search(spec.bracket, n, expect, spec.alpha, spec.rest_s)
        return repetitions * phase_time, f"{trials} phase-1 trials a search"
    if setup is None and spec.kind in (THROUGHPUT, TEARDOWN):
        return 0.0, "no estimate: say setup_rate_cps or expect_cps"
    if spec.kind == THROUGHPUT:
        assert setup is not None
        settings = searches[str(spec.search)]
        width = settings.error_qps or (settings.error_ratio or 0.01) * settings.max_rate_qps / 2
        span = settings.max_rate_qps - settings.min_rate_qps
        trials = max(1, math.ceil(math.log2(max(span / width, 1))))
        one = n / setup + settings.duration_s + spec.rest_s
        return repetitions * trials * one, f"{trials} trials a search, phase 1 at {setup:,.0f}/s"
    if spec.kind == TEARDOWN:
        assert setup is not None
        rate = spec.expect_teardown_per_s or 350_000.0
        return repetitions * (n / setup + n / rate + spec.rest_s), f"deletion at {rate:,.0f}/s"
    assert spec.capacity is not None and spec.bracket is not None
    size = spec.expect_capacity or point.table.max_connections or n
    params, rate = spec.capacity, expect or (spec.bracket.min_cps + spec.bracket.max_cps) / 2
    total, trials = 0.0, 0
    if params.r0 is None:
        found, spent = _rate_search(spec.bracket, params.c0, expect, params.alpha, spec.rest_s)
        trials, total = trials + found, total + spent
    cs = params.c0
    between = spec.bracket.between(params.beta * rate, rate)
    while 2 * cs <= size:
        found, spent = _rate_search(between, 2 * cs, rate, params.alpha, spec.rest_s)
        trials, total = trials + found + 1, total + spent + 2 * cs / (params.beta * rate) + spec.rest_s
        cs *= 2
    total += 2 * cs / (params.beta * rate) + spec.rest_s  # the step that fails
    binary = max(1, math.ceil(math.log2(max(cs / params.error, 1))))
    total += binary * (1.5 * cs / (params.gamma * rate) + spec.rest_s)
    trials += 1 + binary
    return repetitions * total, f"{trials} phase-1 trials a search, capacity ~{size:,}"


def _rate_search(bracket: RateBracket, n: int, expect: float | None, alpha: float | None,
                 rest: float) -> tuple[int, float]:
    """(trials, s) of one establishment-rate search of n connections whose answer is `expect`."""
    answer = expect if expect is not None else (bracket.min_cps + bracket.max_cps) / 2
    lower, upper, trials, spent = bracket.min_cps, bracket.max_cps, 0, 0.0
    while not bracket.done(lower, upper):
        rate = round((lower + upper) / 2)
        if rate <= lower or rate >= upper:
            break
        trials += 1
        spent += n / rate * (1 + (1 / alpha if alpha else 0)) + rest
        lower, upper = (rate, upper) if rate <= answer else (lower, rate)
    return trials, spent
