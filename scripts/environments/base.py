"""The interface every environment kind gives the campaign: one setup brought up only when a trial really has
to run (a resumed campaign replays stored trials without it), and always torn down, also on Ctrl-C."""

from __future__ import annotations

from typing import Any

from ..clock import Clock, RealClock
from ..nat44 import Cycle
from ..overhead import Overhead
from ..trial import Measurer, TrialResult
from ..xlatperf import TesterOptions


class Environment:
    """One setup of a campaign. Subclasses fill in up/down/measurer/describe.

    simulated: trials take no real time (no CPU samples in the idle capture). clock: the time the searches
    rest and measure on (a fake DUT in simulated time brings its own).
    """

    simulated = False
    clock: Clock = RealClock()

    def up(self) -> None: ...

    def down(self) -> None: ...

    def max_cores(self) -> int:
        return 1

    def refuse_cores(self, counts: list[int]) -> None:
        """Raise (one line) when one of these core counts (each <= max_cores) cannot be set up; called
        before anything is brought up, so a campaign fails before its first up/down."""

    def dut_cpus(self, count: int) -> list[int]:
        return list(range(count))

    def set_cores(self, count: int) -> dict[str, Any]:
        return {"cores": count}

    def set_tester(self, tester: TesterOptions) -> None:
        """Following trials use these tester options (a point of a sessions sweep)."""

    def measurer(self) -> Measurer:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {}

    def tester_version(self) -> str | None:
        return None

    def nat44_port_refusal(self, cycles: list[Cycle]) -> str | None:
        """Once up: why the tester's flows on ephemeral ports do not fit a MAP-T CE's port set with the
        conntrack timeout its NAT44 really has (scripts.nat44), or None."""
        return None

    def probe_trial_overhead(self) -> Overhead | None:
        """What a trial takes beyond its duration here, measured without bringing the setup up (campaign
        plan); None: this environment cannot measure it before running."""
        return Overhead(0.0, "simulated time: trials take only their duration") if self.simulated else None

    def start_host_idle(self) -> None:
        """Start per-host CPU samplers (a real testbed's DUT hosts) before an idle-capture trial."""

    def collect_host_idle(self, result: TrialResult | None) -> dict[str, list[dict[str, Any]]] | None:
        """Stop them: per host its samples during `result`'s trial (None: the trial failed); None where the
        hosts share the campaign's own machine."""
        return None
