"""A simulated DUT (`[[setup]] kind = "fake"`): a fake whose capacity grows with cores and falls with the
tester's sessions, in simulated time unless asked for real time; the searches' and the campaign's own tests
run on it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock, RealClock, SimClock
from ..fakes import FakeDut, FakeDutBehaviour
from ..trial import Measurer
from ..xlatperf import TesterOptions, flows
from .base import Environment, EnvironmentKind, SetupSpec
from .options import OptionError, check_values, number, of_type


@dataclass
class FakeEnvironment(FakeDutBehaviour, Environment):
    """A fake DUT whose capacity grows with cores and falls with the tester's sessions (flows):
    capacity_qps x cores ** scaling / (1 + sessions / half_capacity_sessions).

    capacity_qps: capacity at one core (and few sessions), queries/s. scaling: exponent (1 = linear).
    half_capacity_sessions: sessions at which the capacity is half (None: sessions do not matter).
    noise, buffer_queries, tester_limit_qps, background_loss, trial_start_loss, capacity_drop, drop_after_s,
    seed: its FakeDutBehaviour (the fake DUT of each core count gets them). realtime: trials really take
    their duration (for kill tests); otherwise time is simulated. cores_available: largest core count the
    fake DUT "has". sessions: the tester's flows (set_tester changes it).
    """

    capacity_qps: float
    scaling: float = 1.0
    realtime: bool = False
    cores_available: int = 16
    clock: Clock = field(default_factory=RealClock)
    half_capacity_sessions: float | None = None
    sessions: int = 4
    _cores: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        self.simulated = not self.realtime
        if self.half_capacity_sessions is not None and self.half_capacity_sessions <= 0:
            raise ValueError(f"half_capacity_sessions must be positive, got {self.half_capacity_sessions}")

    def max_cores(self) -> int:
        return self.cores_available

    def capacity(self) -> float:
        """Capacity at the current cores and sessions, queries/s."""
        cap = self.capacity_qps * self._cores ** self.scaling
        if self.half_capacity_sessions is not None:
            cap /= 1.0 + self.sessions / self.half_capacity_sessions
        return cap

    def set_cores(self, count: int) -> dict[str, Any]:
        self._cores = count
        return {"cores": count, "capacity_qps": self.capacity()}

    def set_tester(self, tester: TesterOptions) -> None:
        self.sessions = flows(tester)

    def measurer(self) -> Measurer:
        return FakeDut(self.capacity(), **{**self.behaviour(), "seed": self.seed * 1000 + self._cores},
                       clock=self.clock, sleep=True)

    def describe(self) -> dict[str, Any]:
        return {"implementation": "fake", "version": "n/a", "capacity_qps_1core": self.capacity_qps,
                "scaling": self.scaling, "noise": self.noise, "buffer_queries": self.buffer_queries,
                "tester_limit_qps": self.tester_limit_qps, "background_loss": self.background_loss,
                "trial_start_loss": self.trial_start_loss, "capacity_drop": self.capacity_drop,
                "drop_after_s": self.drop_after_s,
                "half_capacity_sessions": self.half_capacity_sessions,
                "time": "real" if self.realtime else "simulated"}

    def tester_version(self) -> str | None:
        return "fake"


class SimulatedKind(EnvironmentKind):
    """`kind = "fake"`: capacity_qps (required) and the fake's other knobs; no tester runs, no server."""

    name = "fake"
    summary = "simulated DUT"
    runs_tester = False
    keys = frozenset({"capacity_qps", "scaling", "noise", "buffer_queries", "tester_limit_qps", "seed",
                      "realtime", "cores_available", "background_loss", "half_capacity_sessions",
                      "trial_start_loss", "capacity_drop", "drop_after_s"})
    rules = {"capacity_qps": number(0, inclusive=False), "scaling": number(0), "noise": number(0),
             "buffer_queries": number(0), "tester_limit_qps": number(0, inclusive=False),
             "seed": number(0, integer=True), "realtime": of_type(bool, "true or false"),
             "cores_available": number(1, integer=True), "background_loss": number(0),
             "half_capacity_sessions": number(0, inclusive=False),
             "trial_start_loss": number(0, integer=True), "capacity_drop": number(0),
             "drop_after_s": number(0, inclusive=False)}

    def command_line_table(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"name": "fake", "kind": "fake", "capacity_qps": args.capacity, "noise": args.noise,
                "buffer_queries": args.buffer, "background_loss": args.background_loss,
                "trial_start_loss": args.trial_start_loss, "capacity_drop": args.capacity_drop,
                "drop_after_s": args.drop_after, "realtime": args.realtime,
                **({"tester_limit_qps": args.tester_limit} if args.tester_limit else {})}

    def check(self, table: dict[str, Any], where: str) -> None:
        if "capacity_qps" not in table:
            raise OptionError(f"{where}: a fake setup needs capacity_qps")
        check_values(table, where, self.rules)

    def build(self, setup: SetupSpec, tester: TesterOptions) -> Environment:
        p = setup.params
        realtime = bool(p.get("realtime", False))
        return FakeEnvironment(
            capacity_qps=float(p["capacity_qps"]), scaling=float(p.get("scaling", 1.0)),
            noise=float(p.get("noise", 0.0)), buffer_queries=float(p.get("buffer_queries", 0.0)),
            background_loss=float(p.get("background_loss", 0.0)),
            trial_start_loss=int(p.get("trial_start_loss", 0)),
            capacity_drop=float(p.get("capacity_drop", 0.0)),
            drop_after_s=float(p.get("drop_after_s", 30.0)),
            tester_limit_qps=p.get("tester_limit_qps"), seed=int(p.get("seed", 1)), realtime=realtime,
            cores_available=int(p.get("cores_available", 16)), clock=RealClock() if realtime else SimClock(),
            half_capacity_sessions=p.get("half_capacity_sessions"), sessions=flows(tester))


KIND = SimulatedKind()
