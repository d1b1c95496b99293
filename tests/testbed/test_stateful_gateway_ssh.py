"""The scalability draft's Figure 1 gateway on a testbed (`topology = "baseline"`, `nat44 = true`): dut1 of
the sshd hosts source-NATs the client's network to its own DUT1-DUT2 address with iptables, and its
conntrack holds the flows. Known answers: K flows through it make K IPv4 UDP entries on dut1, each
translated to dut1's address (read on this machine with conntrack, not over SSH); the timed deletion
removes them; the table's settings are back after down, and so is every host."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sshnet import SshHosts
from test_stateful_ssh import GLOBALS, initial_netns, send_flows, settled, stateful_inventory, sysctls  # noqa: F401

from xlatbench.setups.backends.statetable import ConntrackTable, TableSpec
from xlatbench.setups.testbed.chain import TestbedChain
from xlatbench.setups.testbed.inventory import load_inventory
from xlatbench.setups.testbed.stateful import apply_table, count, flush, stateful_dut

pytestmark = [pytest.mark.root]

FLOWS = 150
DUT1_OUTSIDE = "198.51.100.1"  # dut1's address on the DUT1-DUT2 link (setups.paper.BASELINE_INNER)


def test_figure_1_gateway(hosts: SshHosts, tmp_path: Path, initial_netns: str) -> None:  # noqa: F811
    before, snapshot = sysctls(None, GLOBALS), hosts.snapshot()
    path = stateful_inventory(hosts, tmp_path, initial_netns)
    text = path.read_text().replace('topology = "464xlat"', 'topology = "baseline"')
    path.write_text(f"nat44 = true\n{text}")
    inventory = load_inventory(path)
    dut = stateful_dut(inventory)
    assert (dut.role, dut.netns, type(dut.table)) == ("dut1", None, ConntrackTable)
    with TestbedChain.up(inventory) as chain:
        apply_table(chain.shell, chain, inventory, dut, TableSpec(max_connections=50_000, timeout_s=900))
        assert sysctls(None, ("nf_conntrack_max",)) == {"nf_conntrack_max": "50000"}
        assert sysctls(hosts.netns("dut1"), ("nf_conntrack_udp_timeout",)) == \
            {"nf_conntrack_udp_timeout": "900"}
        flush(chain, dut)
        send_flows(hosts, chain, FLOWS)
        assert settled(lambda: count(chain, dut, udp_only=True), FLOWS) == FLOWS
        translated = subprocess.run(["ip", "netns", "exec", hosts.netns("dut1"), "conntrack", "-L", "-p",
                                     "udp", "--reply-dst", DUT1_OUTSIDE],
                                    capture_output=True, text=True, check=True)
        assert len(translated.stdout.splitlines()) == FLOWS
        deleted = flush(chain, dut)
        assert deleted.removed >= FLOWS and deleted.seconds > 0
        assert count(chain, dut, udp_only=True) == 0
    assert sysctls(None, GLOBALS) == before
    assert hosts.snapshot() == snapshot
