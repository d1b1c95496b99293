"""RFC 9693's phases on a testbed: the stateful measurer of the emulation (scripts.stateful.emulated) drives
the PLAT's NAT44 on the sshd hosts (464XLAT, tayga backend: dut2's conntrack) through TestbedChain's
conntrack controls over SSH, with xlatperf's AF_XDP flows on the client host. Known answers from dut2's own
count: phase 1 of N makes exactly N entries, phase 2 makes none, the tear-down removes exactly N; with the
table's size set to C < N (the kernel's global nf_conntrack_max, written in the initial namespace) phase 1
ends with C entries and does not pass. Every value is back after the chain goes down."""

from __future__ import annotations

from pathlib import Path

import pytest
from sshnet import SshHosts
from test_stateful_ssh import GLOBALS, initial_netns, stateful_inventory, sysctls  # noqa: F401 - fixture

from xlatbench.scripts.stateful.emulated import EmulatedStatefulMeasurer
from xlatbench.scripts.stateful.measurer import TableSettings
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.testbed.chain import TestbedChain
from xlatbench.setups.testbed.inventory import load_inventory

pytestmark = [pytest.mark.root]

N, CAPACITY, RATE = 300, 200, 1000.0
TESTER = TesterOptions(io="xdp", first_port=1024, timeout_s=0.5, sender_cpus="0", receiver_cpus="0",
                       extra_args=("--max-lag", "0.5"))


def test_phases_on_the_testbed_plat(hosts: SshHosts, tmp_path: Path, initial_netns: str) -> None:  # noqa: F811
    before = sysctls(None, GLOBALS)
    inventory = load_inventory(stateful_inventory(hosts, tmp_path, initial_netns))
    with TestbedChain.up(inventory, tester_io="xdp") as chain:
        measurer = EmulatedStatefulMeasurer(chain, TESTER)
        measurer.apply(TableSettings(timeout_s=600))
        one = measurer.establish(N, RATE)
        assert (one.sent, one.answered, one.table_after - one.table_before) == (N, N, N), one
        assert one.passed
        two = measurer.over_established(N, RATE, RATE, 1.0)
        assert two.table_after == two.table_before and not two.table_grew, two
        assert two.sent > 0 and two.answered == two.sent
        down = measurer.tear_down(N, RATE)
        assert down.removed == down.loaded == down.setup.table_after, down
        assert down.loaded - down.setup.table_before == N
        assert down.delete_s > 0 and down.empty_delete_s > 0
        print(f"tear-down on dut2 (conntrack -F timed on the host, sshd namespace of this 2-vCPU machine): "
              f"{down.removed} entries in {down.delete_s * 1e3:.2f} ms, empty table "
              f"{down.empty_delete_s * 1e3:.2f} ms, rate {down.rate_per_s or 0:.0f} connections/s; "
              f"phase 1 of {N} at {RATE:g}/s: {one.answered} answered")
        measurer.apply(TableSettings(max_connections=CAPACITY, timeout_s=600))
        assert sysctls(None, ("nf_conntrack_max",)) == {"nf_conntrack_max": str(CAPACITY)}
        full = measurer.establish(N, RATE)
        assert full.table_after == CAPACITY and not full.passed, full
        conditions = measurer.conditions()
        assert conditions.table.max_connections == CAPACITY
        assert conditions.extra["dut"]["host"] == "dut2"
    assert sysctls(None, GLOBALS) == before
