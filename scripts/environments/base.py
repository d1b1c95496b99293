"""The interfaces of an environment kind: the kind (`EnvironmentKind`: what its [[setup]] table may say, its
checks against the campaign's tester and server, the environment it builds) and the environment itself
(`Environment`: one setup brought up only when a trial really has to run, a resumed campaign replaying stored
trials without it, and always torn down, also on Ctrl-C). `SetupSpec` is one [[setup]] table as parsed.
Each kind is one module of this folder, registered in registry.py."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ..clock import Clock, RealClock
from ..nat44 import Cycle
from ..overhead import Overhead
from ..stateful.measurer import StatefulMeasurer
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

    def plan_cores(self) -> tuple[int, str | None]:
        """The core count `campaign plan` assumes and, when it is not what the DUTs have, why (one line)."""
        return self.max_cores(), None

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

    def stateful_measurer(self) -> StatefulMeasurer:
        """Once up: RFC 9693's phases against this setup's stateful DUT (ValueError, one line: none)."""
        raise ValueError(f"the {type(self).__name__} setup has no stateful DUT to run RFC 9693's phases on")

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


@dataclass(frozen=True)
class SetupSpec:
    """One thing to measure.

    name: unique label; kind: a registered kind's name (registry.py); params: the rest of its table.
    """

    name: str
    kind: str
    params: dict[str, Any]

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **self.params}


class EnvironmentKind:
    """One kind of environment, named by a [[setup]] table's `kind`. It parses and checks its own options
    (raising options.OptionError, one line naming the table and the key) and builds its environment; the
    campaign-file parser asks it through these methods and knows no kind by name.

    name: the `kind` value. summary: what it is, for --dut's help. keys: the table's keys besides name and
    kind. runs_tester: xlatperf runs (False: a simulated DUT, whose searches are not checked against the
    tester's limits).
    """

    name: str = ""
    summary: str = ""
    keys: frozenset[str] = frozenset()
    runs_tester: bool = True

    def command_line_table(self, args: argparse.Namespace) -> dict[str, Any]:
        """The [[setup]] table of `--dut NAME` and its options on the command line (`search`, `trial`,
        `search-bench`: scripts/cli.py), checked like a campaign file's (ValueError for what the table
        cannot even say)."""
        return {"name": self.name, "kind": self.name}

    def check(self, table: dict[str, Any], where: str) -> None:
        """Its table's required keys present and every value valid (where: "[[setup]] #N")."""

    def with_server_io(self, setup: SetupSpec, io: str, where: str) -> SetupSpec:
        """The setup with [server] io ("socket" or "xdp", Knot's XDP mode) applied, or OptionError where it
        cannot be had (where: "[[setup]] #N (NAME)")."""
        return setup

    def check_tester(self, setup: SetupSpec, tester: TesterOptions, most: int, cycles: list[Cycle],
                     where: str) -> None:
        """Refuse now a tester this environment cannot carry (most: the sweep's most flows; cycles: every
        kind of trial the campaign runs, with the rest after it)."""

    def stateful_refusal(self, setup: SetupSpec) -> str | None:
        """Why this setup cannot run RFC 9693's procedures (one line), or None when it has a stateful DUT
        (Environment.stateful_measurer)."""
        return (f"kind {self.name!r} has no stateful DUT for RFC 9693's procedures (connection-rate, "
                "throughput-connections, teardown, table-capacity)")

    def tester_is_local(self, setup: SetupSpec) -> bool:
        """xlatperf runs on this machine (its sockets count against this process's limits)."""
        return False

    def build(self, setup: SetupSpec, tester: TesterOptions) -> Environment:
        """The environment of this setup, not yet up."""
        raise NotImplementedError
