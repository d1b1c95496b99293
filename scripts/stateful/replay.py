"""Every call a stateful procedure makes, stored as it finishes and replayed on resume: `RecordingMeasurer`
wraps the environment's StatefulMeasurer for one repetition of one procedure at one point. Call i is taken
from the store when the store has it (and asked the same: else the store belongs to another campaign), else
measured: the real measurer is obtained only then (a resumed campaign brings no environment up for what it
has), the point's table settings applied first, the rest owed to taken before it, and the result
handed to `on_call` to be stored. The searches being deterministic given their calls' results, a resume
reproduces them exactly and goes on from the first missing call."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..clock import Clock
from .measurer import PhaseOne, PhaseTwo, StatefulConditions, StatefulMeasurer, TableSettings, TearDown


class StatefulReplayMismatch(RuntimeError):
    """A stored call does not match what the procedure asks now."""


@dataclass(frozen=True)
class Call:
    """One call: its method, arguments, result (as a dict, raw document apart), raw, conditions (dict),
    rest before it and wall time, s."""

    method: str
    args: dict[str, Any]
    result: dict[str, Any]
    raw: dict[str, Any] | None
    conditions: dict[str, Any]
    rest_before_s: float = 0.0
    wall_s: float = 0.0


def phase_one_of(data: dict[str, Any], raw: dict[str, Any] | None = None) -> PhaseOne:
    return PhaseOne(int(data["connections"]), float(data["rate_qps"]), int(data["sent"]),
                    int(data["answered"]), data["table_before"], data["table_after"],
                    bool(data.get("tester_limited", False)), tuple(data.get("reasons", ())), raw)


Result = PhaseOne | PhaseTwo | TearDown


def result_of(method: str, data: dict[str, Any], raw: dict[str, Any] | None) -> Result:
    """A stored call's result as the dataclass the measurer returned."""
    if method == "establish":
        return phase_one_of(data, raw)
    setup = phase_one_of(data["setup"])
    if method == "over_established":
        return PhaseTwo(int(data["connections"]), setup, float(data["rate_qps"]), float(data["duration_s"]),
                        int(data["sent"]), int(data["answered"]), data["table_before"], data["table_after"],
                        bool(data.get("tester_limited", False)), tuple(data.get("reasons", ())), raw)
    return TearDown(int(data["connections"]), setup, int(data["loaded"]), int(data["removed"]),
                    float(data["delete_s"]), float(data["empty_delete_s"]))


def plain(result: Result) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the result as a dict without raw documents, its raw document)."""
    data = asdict(result)
    raw = data.pop("raw", None)
    if isinstance(data.get("setup"), dict):
        data["setup"].pop("raw", None)
    for key in ("reasons",):
        if key in data:
            data[key] = list(data[key])
    return data, raw


@dataclass
class RecordingMeasurer(StatefulMeasurer):
    """source: gives the real measurer (bringing the environment up); table: the point's settings, applied
    to it before its first call; stored: this repetition's stored calls in order; on_call(index, call): a new
    call to store; clock and rest_s: the rest before every measured call, s."""

    source: Callable[[], StatefulMeasurer]
    table: TableSettings
    stored: list[Call]
    on_call: Callable[[int, Call], None]
    clock: Clock
    rest_s: float
    calls: int = field(default=0, init=False)
    last_conditions: dict[str, Any] | None = field(default=None, init=False)
    _real: StatefulMeasurer | None = field(default=None, init=False)
    _most: int | None = field(default=None, init=False)

    def real(self) -> StatefulMeasurer:
        if self._real is None:
            self._real = self.source()
            self._real.apply(self.table)
        return self._real

    # -- the interface -------------------------------------------------------------------------------
    def apply(self, table: TableSettings) -> None:
        self.table = table
        if self._real is not None:
            self._real.apply(table)

    def max_connections(self) -> int:
        """From the first stored call when there is one (a resume asks no environment); else the DUT's."""
        if self._most is None:
            stored = next((c.conditions.get("extra", {}).get("max_connections") for c in self.stored), None)
            self._most = int(stored) if stored is not None else self.real().max_connections()
        return self._most

    def establish(self, connections: int, rate_qps: float) -> PhaseOne:
        result = self._call("establish", {"connections": connections, "rate_qps": rate_qps},
                            lambda m: m.establish(connections, rate_qps))
        assert isinstance(result, PhaseOne)
        return result

    def over_established(self, connections: int, setup_rate_qps: float, rate_qps: float,
                         duration_s: float) -> PhaseTwo:
        args = {"connections": connections, "setup_rate_qps": setup_rate_qps, "rate_qps": rate_qps,
                "duration_s": duration_s}
        result = self._call("over_established", args,
                            lambda m: m.over_established(connections, setup_rate_qps, rate_qps, duration_s))
        assert isinstance(result, PhaseTwo)
        return result

    def tear_down(self, connections: int, setup_rate_qps: float) -> TearDown:
        args = {"connections": connections, "setup_rate_qps": setup_rate_qps}
        result = self._call("tear_down", args, lambda m: m.tear_down(connections, setup_rate_qps))
        assert isinstance(result, TearDown)
        return result

    def conditions(self) -> StatefulConditions:
        real = self.real()
        return real.conditions()

    def conditions_dict(self) -> dict[str, Any]:
        """The conditions of the last call (stored or measured): no environment needed on a resume."""
        if self.last_conditions is not None:
            return self.last_conditions
        return self._conditions(self.real())

    # -- calls ------------------------------------------------------------------------------------------
    def _conditions(self, real: StatefulMeasurer) -> dict[str, Any]:
        data = asdict(real.conditions())
        data["extra"] = {**data.get("extra", {}), "max_connections": self.max_connections()}
        return data

    def _call(self, method: str, args: dict[str, Any], run: Callable[[StatefulMeasurer], Result]) -> Result:
        index = self.calls
        self.calls += 1
        if index < len(self.stored):
            call = self.stored[index]
            if call.method != method or not _same(call.args, args):
                raise StatefulReplayMismatch(
                    f"stored call {index} was {call.method}({call.args}) but the procedure now asks "
                    f"{method}({args}): the store was written by a different campaign; use a new store file")
            self.last_conditions = call.conditions
            return result_of(method, call.result, call.raw)
        real = self.real()
        rest = self.rest_s
        self.clock.sleep(rest)
        started = self.clock.now()
        result = run(real)
        wall = self.clock.now() - started
        data, raw = plain(result)
        conditions = self._conditions(real)
        self.last_conditions = conditions
        self.on_call(index, Call(method, args, data, raw, conditions, rest, wall))
        return result


def _same(stored: dict[str, Any], asked: dict[str, Any]) -> bool:
    if set(stored) != set(asked):
        return False
    return all(math.isclose(float(stored[k]), float(asked[k]), rel_tol=1e-9, abs_tol=0.5) for k in asked)
