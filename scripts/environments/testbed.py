"""A campaign setup on a real testbed (`[[setup]] kind = "testbed"`, `inventory = PATH`): the inventory's four
hosts over SSH (setups.testbed.TestbedChain), measured with xlatperf on the client host.

Core counts come from the preflight: a DUT can run with CPU 0 plus any of its inventory's `offline_cpus`
that the host really has (`present`); core count N keeps CPU 0 and the N-1 lowest of those online on each
DUT (CPU hotplug), and each trial's record says what every DUT then had online. The preflight is recorded
with every result (the record's `dut.preflight`). The idle capture samples /proc/stat on each DUT host.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import Any

from ...cpulist import parse_cpu_list
from ...cpuload import samples_within, trial_window
from ...setups.placement import OWN_HOSTS
from ...setups.testbed.chain import HostLost
from ...setups.testbed.inventory import DUTS, Inventory, InventoryError, load_inventory
from ...setups.testbed.knot import knot_xdp_refusal
from ...setups.testbed.remote_idle import IdleSampler
from ...setups.transports import StepError
from ..measurers import ChainMeasurer
from ..nat44 import DEFAULT_STREAM_TIMEOUT_S, Cycle, UdpTimeout, chain_refusal
from ..overhead import Overhead
from ..stateful.emulated import EmulatedStatefulMeasurer
from ..stateful.measurer import StatefulMeasurer
from ..trial import Measurer, TrialResult
from ..xlatperf import TesterOptions, flows, source_first_port
from .base import Environment, EnvironmentKind, SetupSpec
from .options import OptionError, check_values, known_topology
from .testerfit import check_chain

SAMPLE_INTERVAL_S = IdleSampler.interval_s  # the DUT hosts' sampling period, s


class TestbedSetupError(RuntimeError):
    """The testbed cannot give what the campaign asks; the message names the host and the fix."""

    __test__ = False  # not a pytest test class


def dut_cpu_order(inventory: Inventory, preflight: dict[str, Any], dut: str) -> list[int]:
    """The DUT's present CPUs in the order core counts take them: first those that stay online (CPU 0 and
    any not in its offline_cpus), then its offline-able ones."""
    found = preflight["hosts"][dut].get("cpus_present") or "0"
    present = sorted(set(parse_cpu_list(str(found))) | {0})
    allowed = set(inventory.hosts[dut].offline_cpus) - {0}
    return [c for c in present if c not in allowed] + [c for c in present if c in allowed]


def fixed_cpus(inventory: Inventory, preflight: dict[str, Any], dut: str) -> list[int]:
    """The DUT's CPUs that hotplug may not take offline (CPU 0 and present CPUs not in offline_cpus)."""
    allowed = set(inventory.hosts[dut].offline_cpus) - {0}
    return [c for c in dut_cpu_order(inventory, preflight, dut) if c not in allowed]


@dataclass
class TestbedEnvironment(Environment):
    """inventory: path of the inventory file; topology: what the campaign asks (must be the inventory's);
    server_io: how Knot answers on the server host ([server] io: "socket", or "xdp", its XDP mode on the
    server's test interface). The tester's io ([tester] io = "xdp": AF_XDP on the client's test interface)
    comes with `tester`; both are checked by the preflight and journalled on their hosts."""

    __test__ = False

    inventory: str
    tester: TesterOptions
    topology: str | None = None
    server_io: str = "socket"
    _inventory: Inventory | None = field(default=None, init=False)
    _preflight: dict[str, Any] | None = field(default=None, init=False)
    _chain: Any = field(default=None, init=False)
    _measurer: ChainMeasurer | None = field(default=None, init=False)

    def _inv(self) -> Inventory:
        if self._inventory is None:
            self._inventory = load_inventory(self.inventory)
        return self._inventory

    def preflight(self) -> dict[str, Any]:
        """The chain's preflight once it is up, else one made now (every host reached over SSH)."""
        if self._chain is not None:
            return self._chain.preflight
        if self._preflight is None:
            from ...setups.testbed.bringup import plan
            from ...setups.testbed.machine import machine_interfaces, transport_for
            from ...setups.testbed.preflight import check

            shell = transport_for(self._inv())
            try:
                self._preflight = check(self._inv(), shell, machine_interfaces(self._inv()),
                                        plan(self._inv(), self.tester.io, self.server_io))
            finally:
                shell.close()
            if not self._preflight["ok"]:
                raise TestbedSetupError(f"testbed {self.inventory}: preflight refused: "
                                        + "; ".join(self._preflight["problems"]))
        return self._preflight

    def up(self) -> None:
        from ...setups.testbed.chain import TestbedChain

        self._chain = TestbedChain.up(self._inv(), tester_io=self.tester.io, server_io=self.server_io)
        self._measurer = ChainMeasurer(self._chain, self.tester)

    def set_tester(self, tester: TesterOptions) -> None:
        """Following trials use these tester options (a sessions sweep's point, a latency procedure's tag)."""
        self.tester = tester
        if self._chain is not None:
            self._measurer = ChainMeasurer(self._chain, tester)

    def down(self) -> None:
        if self._chain is not None:
            chain, self._chain = self._chain, None
            chain.__exit__(None, None, None)

    def max_cores(self) -> int:
        return min(len(dut_cpu_order(self._inv(), self.preflight(), dut)) for dut in DUTS)

    def plan_cores(self) -> tuple[int, str | None]:
        """The preflight's count when the hosts answer; else (a plan on paper, placeholder hosts) what the
        inventory allows: CPU 0 plus each DUT's offline_cpus, the fewest over the DUTs."""
        try:
            return self.max_cores(), None
        except TestbedSetupError:
            inv = self._inv()
            count = min(1 + len(inv.hosts[dut].offline_cpus) for dut in DUTS)
            return count, (f"{self.inventory}: its hosts did not pass the preflight (not reached?): planned "
                           f"at {count} core(s), CPU 0 + the inventory's offline_cpus")

    def per_dut_cpus(self, count: int) -> dict[str, list[int]]:
        """Per DUT the CPUs online for `count` cores; one-line error when a DUT cannot run exactly that."""
        inv, found = self._inv(), self.preflight()
        for dut in DUTS:
            fixed = fixed_cpus(inv, found, dut)
            if len(fixed) > count:
                raise TestbedSetupError(
                    f"testbed {self.inventory}: {dut} keeps CPUs {fixed} online (CPU 0 and CPUs not in "
                    f"hosts.{dut}.offline_cpus), so it cannot run {count} core(s): add them to offline_cpus "
                    f"or drop {count} from the campaign's cores")
        return {dut: dut_cpu_order(inv, found, dut)[:count] for dut in DUTS}

    def refuse_cores(self, counts: list[int]) -> None:
        """Every core count checked against the preflight before the testbed is brought up."""
        for count in counts:
            self.per_dut_cpus(count)

    def dut_cpus(self, count: int) -> list[int]:
        return self.per_dut_cpus(count)[DUTS[0]]

    def set_cores(self, count: int) -> dict[str, Any]:
        assert self._chain is not None, "environment not up"
        cpus = self.per_dut_cpus(count)
        return {"cores": count, "cpus": cpus, "placement": OWN_HOSTS, "per_dut": cpus, "test_system_cpus": [],
                "shared_with_test_system": [], "applied": self._chain.set_dut_cpus(cpus[DUTS[0]], cpus)}

    def measurer(self) -> Measurer:
        assert self._measurer is not None, "environment not up"
        return self._measurer

    def stateful_measurer(self) -> StatefulMeasurer:
        """RFC 9693's phases against the testbed's stateful NAT (the PLAT's, or the MAP-T CE's NAPT44), the
        same measurer as in emulation over the chain's conntrack controls (over SSH, each setting journalled);
        ValueError, one line, for a testbed without one or a socket tester."""
        assert self._chain is not None, "environment not up"
        from ...setups.testbed.machine import TestbedError

        try:
            self._chain.stateful_host()
        except TestbedError as err:
            raise ValueError(str(err)) from None
        return EmulatedStatefulMeasurer(self._chain, self.tester, local_memory=False)

    def describe(self) -> dict[str, Any]:
        if self._chain is not None:
            return self._chain.describe()
        return {"topology": self.topology or self._inv().topology_name, "world": "real testbed",
                "inventory": self.inventory, "preflight": self._preflight}

    def tester_version(self) -> str | None:
        return self._measurer.last_tester_version if self._measurer else None

    def nat44_port_refusal(self, cycles: list[Cycle]) -> str | None:
        return chain_refusal(self._chain, flows(self.tester), source_first_port(self.tester), cycles)

    def probe_trial_overhead(self) -> Overhead | None:
        """The SSH work around a trial timed on the inventory's hosts (setups.testbed.chain's probe, which
        changes nothing there), plus the tester's reply timeout after its send window."""
        from ...setups.testbed.chain import probe_trial_overhead
        from ...setups.testbed.machine import transport_for

        shell = transport_for(self._inv())
        try:
            found = probe_trial_overhead(self._inv(), shell)
        except StepError:
            return None  # hosts not reached (a plan on paper): the stated default stands in
        finally:
            shell.close()
        trips = ", ".join(f"{role} {1000 * s:.0f} ms" for role, s in found["ssh_round_trip_s"].items())
        return Overhead(found["per_trial_s"] + self.tester.timeout_s,
                        f"probe of the hosts of {self.inventory}: SSH round trips {trips}; per trial "
                        f"{found['per_trial_s']:.2f} s of SSH work + the tester's {self.tester.timeout_s} s "
                        f"reply timeout; per idle run {found['per_idle_run_s']:.2f} s more",
                        per_idle_run_s=found["per_idle_run_s"])

    def start_host_idle(self) -> None:
        assert self._chain is not None, "environment not up"
        self._chain.start_idle()

    def collect_host_idle(self, result: TrialResult | None) -> dict[str, list[dict[str, Any]]] | None:
        """Each DUT's samples whose interval lies inside the trial (all of them when the trial's start is
        unknown), t_s counted from the trial's start."""
        assert self._chain is not None, "environment not up"
        found = self._chain.collect_idle()
        client = self._chain.preflight["hosts"]["client"].get("clock") or {}
        offset_s = float(client.get("offset_s", 0.0))
        window = trial_window(result.raw, result.duration_s, offset_s) if result is not None else None
        if window is None:
            return found
        kept = {host: samples_within(samples, window, "t_controller", SAMPLE_INTERVAL_S)
                for host, samples in found.items()}
        for host, samples in kept.items():
            if not samples:
                raise HostLost(f"{host} ({self._inv().hosts[host].ssh}): no CPU idle sample inside the "
                               "trial: the trial is void, not stored; run the same command again to resume")
        return kept



class TestbedKind(EnvironmentKind):
    """`kind = "testbed"`: inventory (required, its file loaded and checked now) and topology (if given, the
    inventory's). The tester runs on the client host; [server] io reaches Knot on the server host."""

    __test__ = False
    name = "testbed"
    summary = "real hosts over SSH: --inventory"
    keys = frozenset({"inventory", "topology"})
    rules = {"topology": known_topology}

    def command_line_table(self, args: argparse.Namespace) -> dict[str, Any]:
        if not args.inventory:
            raise ValueError("--dut testbed needs --inventory PATH (the testbed's TOML inventory)")
        return {"name": "testbed", "kind": "testbed", "inventory": args.inventory}

    def check(self, table: dict[str, Any], where: str) -> None:
        """A valid inventory file; a topology, if given, is the inventory's."""
        path = table.get("inventory")
        if not isinstance(path, str) or not path:
            raise OptionError(f"{where}: a testbed setup needs inventory = \"PATH\" (its inventory file, "
                              "see docs/testbed.md)")
        try:
            inventory = load_inventory(path)
        except InventoryError as err:
            raise OptionError(f"{where} inventory: {err}") from None
        if "topology" in table:
            known_topology(f"{where} topology", table["topology"])
        topology = table.get("topology", inventory.topology_name)
        if topology != inventory.topology_name:
            raise OptionError(f"{where} topology: {topology!r}, but inventory {path} describes "
                              f"{inventory.topology_name!r}: drop topology or make them agree")
        check_values(table, where, self.rules)

    def stateful_refusal(self, setup: SetupSpec) -> str | None:
        """By the inventory (check() loaded it): a testbed has a stateful DUT where its topology has a
        stateful NAT (setups.testbed.stateful: the 464XLAT PLAT, the MAP-T CE's NAPT44, the baseline with
        `nat44 = true`, the scalability draft's Figure 1 gateway)."""
        from ...setups.testbed.machine import TestbedError
        from ...setups.testbed.stateful import stateful_dut

        try:
            stateful_dut(load_inventory(str(setup.params["inventory"])))
        except (TestbedError, InventoryError) as err:
            return f"kind {self.name!r}: {err}"
        return None

    def with_server_io(self, setup: SetupSpec, io: str, where: str) -> SetupSpec:
        """[server] io as the environment's server_io; XDP mode refused where a translator would drop Knot
        XDP's replies (setups.testbed.knot.knot_xdp_refusal)."""
        if io != "xdp":
            return setup
        refusal = knot_xdp_refusal(load_inventory(str(setup.params["inventory"])))  # check() loaded it
        if refusal:
            raise OptionError(f"{where}: {refusal}")
        return replace(setup, params={**setup.params, "server_io": io})

    def check_tester(self, setup: SetupSpec, tester: TesterOptions, most: int, cycles: list[Cycle],
                     where: str) -> None:
        chain = load_inventory(str(setup.params["inventory"])).topology()
        check_chain(chain, setup.name, where, tester, most, cycles, _stream_timeout)

    def build(self, setup: SetupSpec, tester: TesterOptions) -> Environment:
        p = setup.params
        return TestbedEnvironment(str(p["inventory"]), tester, topology=p.get("topology"),
                                  server_io=str(p.get("server_io", "socket")))


def _stream_timeout() -> UdpTimeout:
    """The CE host's UDP conntrack timeout as the campaign assumes it when it is loaded."""
    return UdpTimeout(DEFAULT_STREAM_TIMEOUT_S, "net.netfilter.nf_conntrack_udp_timeout_stream's kernel "
                      "default: the testbed CE host's own value is not read when the campaign is loaded")


KIND = TestbedKind()
