"""A simulated stateful NAT (`[[setup]] kind = "fake-stateful"`): scripts.stateful.fake's FakeStatefulDut of
known table size, new-connection cap, phase-2 throughput and tear-down rate, its rates scaled by cores **
scaling, in simulated time: RFC 9693's procedures, their campaign wiring, store and report run on it in
seconds, and anyone can reproduce their known answers without a DUT."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..clock import SimClock
from ..fakes import FakeDut
from ..stateful.fake import FLOW_LIMIT, FakeStatefulDut
from ..stateful.measurer import StatefulMeasurer
from ..trial import Measurer
from ..xlatperf import TesterOptions
from .base import Environment, EnvironmentKind, SetupSpec
from .options import OptionError, check_values, number

IMPLEMENTATION = "fake-stateful"


@dataclass
class FakeStatefulEnvironment(Environment):
    """params: the FakeStatefulDut's keywords (table_size, max_cps, ...) as the [[setup]] table gives them;
    cores_available: the largest core count it "has"."""

    params: dict[str, Any]
    cores_available: int = 16
    clock: SimClock = field(default_factory=SimClock)
    _cores: int = field(default=1, init=False)
    _dut: FakeStatefulDut | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.simulated = True

    def max_cores(self) -> int:
        return self.cores_available

    def set_cores(self, count: int) -> dict[str, Any]:
        self._cores, self._dut = count, None
        return {"cores": count}

    def stateful_measurer(self) -> StatefulMeasurer:
        if self._dut is None:
            params = {**self.params, "seed": int(self.params.get("seed", 1)) * 1000 + self._cores}
            self._dut = FakeStatefulDut(**params, cores=self._cores, clock=self.clock)
        return self._dut

    def measurer(self) -> Measurer:
        """Stateless trials (a campaign's ordinary searches): the phase-2 throughput at these cores."""
        capacity = float(self.params.get("throughput_qps", 1e6)) * self._cores ** float(
            self.params.get("scaling", 1.0))
        return FakeDut(capacity, noise=float(self.params.get("noise", 0.0)), clock=self.clock, sleep=True)

    def describe(self) -> dict[str, Any]:
        return {"implementation": IMPLEMENTATION, "version": "n/a", "time": "simulated", **self.params}

    def tester_version(self) -> str | None:
        return "fake"


class SimulatedStatefulKind(EnvironmentKind):
    """`kind = "fake-stateful"`: table_size and max_cps required, the fake's other knobs optional."""

    name = "fake-stateful"
    summary = "simulated stateful NAT (RFC 9693 known answers)"
    runs_tester = False
    dut_keys = frozenset({"table_size", "max_cps", "throughput_qps", "teardown_per_s",
                          "empty_delete_s_per_bucket", "hash_size", "scaling", "noise", "tester_cps",
                          "max_flows", "seed"})
    keys = dut_keys | {"cores_available"}
    rules = {"table_size": number(1, integer=True), "max_cps": number(0, inclusive=False),
             "throughput_qps": number(0, inclusive=False), "teardown_per_s": number(0, inclusive=False),
             "empty_delete_s_per_bucket": number(0), "hash_size": number(1, integer=True),
             "scaling": number(0), "noise": number(0), "tester_cps": number(0, inclusive=False),
             "max_flows": number(1, integer=True), "seed": number(0, integer=True),
             "cores_available": number(1, integer=True)}

    def check(self, table: dict[str, Any], where: str) -> None:
        for key in ("table_size", "max_cps"):
            if key not in table:
                raise OptionError(f"{where}: a fake-stateful setup needs {key}")
        check_values(table, where, self.rules)
        if int(table.get("max_flows", FLOW_LIMIT)) > FLOW_LIMIT:
            raise OptionError(f"{where}: max_flows must be at most {FLOW_LIMIT}")

    def stateful_refusal(self, setup: SetupSpec) -> str | None:
        return None

    def build(self, setup: SetupSpec, tester: TesterOptions) -> Environment:
        p = setup.params
        params = {k: v for k, v in p.items() if k in self.dut_keys and k != "seed"}
        params["seed"] = int(p.get("seed", 1))
        return FakeStatefulEnvironment(params, int(p.get("cores_available", 16)))


KIND = SimulatedStatefulKind()
