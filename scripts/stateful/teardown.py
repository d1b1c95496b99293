"""RFC 9693's connection tear-down rate, as the draft's §2.5 refines it: N connections loaded by phase 1 at a
safe rate, the whole table deleted and timed (T), the deletion of the empty table timed too (T_empty, the
deletion's own cost, which grows with the table's size) and subtracted: N / (T - T_empty) connections/s. One
repetition per call; the campaign repeats it."""

from __future__ import annotations

from dataclasses import dataclass

from .measurer import StatefulMeasurer, TearDown
from .parameters import StatefulParameterError, check_connections


@dataclass(frozen=True)
class TearDownRate:
    """One tear-down repetition.

    connections: N asked; loaded: entries the table held before the deletion; removed: entries the
    deletion removed (a known answer: N). full_delete_s / empty_delete_s: T and T_empty, s.
    rate_per_s: removed / (T - T_empty), connections/s (None when T <= T_empty: no number).
    complete: phase 1 made all N connections and the deletion removed all N.
    """

    connections: int
    setup_rate_cps: float
    loaded: int
    removed: int
    full_delete_s: float
    empty_delete_s: float
    rate_per_s: float | None
    complete: bool


def teardown_rate(measurer: StatefulMeasurer, connections: int, setup_rate_cps: float) -> TearDownRate:
    """One tear-down measurement of `connections` connections loaded at `setup_rate_cps`."""
    check_connections("connections", connections, measurer.max_connections())
    if setup_rate_cps <= 0:
        raise StatefulParameterError(f"the tear-down's setup rate must be > 0 connections/s, got "
                                     f"{setup_rate_cps}")
    done: TearDown = measurer.tear_down(connections, setup_rate_cps)
    complete = done.setup.passed and done.loaded >= connections and done.removed == connections
    return TearDownRate(connections, setup_rate_cps, done.loaded, done.removed, done.delete_s,
                        done.empty_delete_s, done.rate_per_s, complete)
