"""The testbed half of RFC 9693 proven on the suite's sshd hosts (namespaces on this machine): the PLAT's
NAT44 on dut2 (464XLAT with the tayga backend, the kernel's conntrack) gets its table size, hash size and UDP
timeouts over SSH, journalled; the count and the timed deletion give known answers against the real
conntrack of dut2's namespace (K flows sent through the chain: K entries, the deletion removes them, a table
of C entries holds C when more flows come); `down` restores every value exactly, after a failure inside the
run and after a controller that never ran down (killed). nf_conntrack_max and _buckets are the kernel's own
(global): they are read before and compared after, from this machine's initial namespace."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshnet import SshHosts
from test_testbed_ssh import tayga_inventory

from xlatbench.cli import main
from xlatbench.setups.backends.statetable import ConntrackTable, TableSpec
from xlatbench.setups.testbed.chain import TestbedChain
from xlatbench.setups.testbed.inventory import load_inventory
from xlatbench.setups.testbed.stateful import apply_table, count, flush, stateful_dut

pytestmark = [pytest.mark.root]

GLOBALS = ("nf_conntrack_max", "nf_conntrack_buckets")
TIMEOUTS = ("nf_conntrack_udp_timeout", "nf_conntrack_udp_timeout_stream")
# K flows from K sockets of the client host, one DNS query each (the root's SOA), kept open until all left.
SEND = """
import socket, sys
server, source, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
query = bytes.fromhex("1234010000010000000000000000060001")
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((source, 0))
    s.sendto(query, (server, 53))
    socks.append(s)
print(len({s.getsockname()[1] for s in socks}))
"""


@pytest.fixture
def initial_netns(hosts: SshHosts) -> Iterator[str]:
    """/run/netns/NAME naming this machine's initial network namespace, for the DUTs' `initial_netns`
    (their sshd runs in a child namespace, where conntrack's table and hash size are read-only); removed
    afterwards (the name only: the namespace is the machine's own)."""
    name = f"init-{hosts.prefix}"
    subprocess.run(["ip", "netns", "attach", name, str(os.getpid())], check=True)
    try:
        yield f"/run/netns/{name}"
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def stateful_inventory(hosts: SshHosts, tmp_path: Path, initial: str) -> Path:
    path = tayga_inventory(hosts, tmp_path)
    text = path.read_text()
    for dut in ("dut1", "dut2"):
        text = text.replace(f"[hosts.{dut}]", f'[hosts.{dut}]\ninitial_netns = "{initial}"')
    path.write_text(text)
    return path


def sysctls(netns: str | None, names: tuple[str, ...]) -> dict[str, str]:
    """The values as this machine's kernel has them (initial namespace, or `netns`), read without SSH."""
    prefix = [] if netns is None else ["ip", "netns", "exec", netns]
    out = subprocess.run([*prefix, "cat", *(f"/proc/sys/net/netfilter/{n}" for n in names)],
                         capture_output=True, text=True, check=True).stdout.split()
    return dict(zip(names, out, strict=True))


def state(hosts: SshHosts) -> dict[str, str]:
    return sysctls(None, GLOBALS) | sysctls(hosts.netns("dut2"), TIMEOUTS)


def send_flows(hosts: SshHosts, chain: TestbedChain, flows: int) -> None:
    done = subprocess.run(["ip", "netns", "exec", hosts.netns("client"), "python3", "-c", SEND,
                           chain.server_address, chain.client_address, str(flows)],
                          capture_output=True, text=True, check=True, timeout=30)
    assert int(done.stdout) == flows  # distinct source ports: distinct flows


def settled(read, want: int, timeout_s: float = 10.0) -> int:  # noqa: ANN001 - a count reader
    """The count once it reaches `want` (the packets cross two translators first), or its last value."""
    deadline = time.monotonic() + timeout_s
    while (found := read()) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def test_table_set_counted_flushed_and_restored_after_a_failure(hosts: SshHosts, tmp_path: Path,
                                                                initial_netns: str) -> None:
    before, snapshot = state(hosts), hosts.snapshot()
    inventory = load_inventory(stateful_inventory(hosts, tmp_path, initial_netns))
    dut = stateful_dut(inventory)
    assert (dut.role, dut.netns, type(dut.table)) == ("dut2", None, ConntrackTable)
    # Values none of which is in force: a table size, a hash size and timeouts of this point.
    spec = TableSpec(max_connections=int(before["nf_conntrack_max"]) + 4321,
                     hash_size=int(before["nf_conntrack_buckets"]) // 2 + 7, timeout_s=1799.5)
    flows, capacity = 200, 120
    with pytest.raises(RuntimeError, match="the run failed here"), TestbedChain.up(inventory) as chain:
        applied = apply_table(chain.shell, chain, inventory, dut, spec)
        now = state(hosts)
        # The kernel fills whole pages of buckets: 4096 / 8 bytes per head = multiples of 512.
        assert now == {"nf_conntrack_max": str(spec.max_connections),
                       "nf_conntrack_buckets": str(-(-spec.hash_size // 512) * 512),
                       "nf_conntrack_udp_timeout": "1800", "nf_conntrack_udp_timeout_stream": "1800"}
        assert applied["in_force"]["net.netfilter.nf_conntrack_max"] == str(spec.max_connections)
        assert applied["in_force"]["net.netfilter.nf_conntrack_udp_timeout"] == "1800"

        flush(chain, dut)
        assert count(chain, dut, udp_only=True) == 0
        send_flows(hosts, chain, flows)
        assert settled(lambda: count(chain, dut, udp_only=True), flows) == flows
        assert count(chain, dut) >= flows  # the whole table: the flows and whatever else dut2 tracks
        deleted = flush(chain, dut)
        assert deleted.before >= flows and deleted.removed >= flows and deleted.seconds > 0
        assert count(chain, dut, udp_only=True) == 0

        # A table of `capacity` entries holds `capacity` when more flows come (a second point's size).
        apply_table(chain.shell, chain, inventory, dut, TableSpec(max_connections=capacity))
        assert state(hosts)["nf_conntrack_max"] == str(capacity)
        send_flows(hosts, chain, flows)
        assert settled(lambda: count(chain, dut), capacity) == capacity
        raise RuntimeError("the run failed here")
    assert state(hosts) == before
    assert hosts.snapshot() == snapshot


def test_a_controller_that_never_ran_down_leaves_down_to_restore(hosts: SshHosts, tmp_path: Path,
                                                                 initial_netns: str) -> None:
    before = state(hosts)
    path = stateful_inventory(hosts, tmp_path, initial_netns)
    inventory = load_inventory(path)
    chain = TestbedChain.up(inventory)
    dut = stateful_dut(inventory)
    apply_table(chain.shell, chain, inventory, dut, TableSpec(int(before["nf_conntrack_max"]) + 99,
                                                              int(before["nf_conntrack_buckets"]) + 99, 3600))
    apply_table(chain.shell, chain, inventory, dut, TableSpec(int(before["nf_conntrack_max"]) + 7))
    assert state(hosts)["nf_conntrack_max"] == str(int(before["nf_conntrack_max"]) + 7)
    chain.shell.close()  # as a killed controller: no down; the hosts' state files say what to undo
    assert main(["testbed", "down", str(path)]) == 0
    assert state(hosts) == before


def test_jool_plat_refused_by_preflight_and_its_table_settings(hosts: SshHosts, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tayga_inventory(hosts, tmp_path)
    text = path.read_text().split("[hosts.dut2]")
    tail = "\n".join(line for line in text[1].splitlines()
                     if not line.startswith(("backend", "tayga_binary")))
    jool = tail.replace("[hosts.server]", 'backend = "jool"\n\n[hosts.server]')
    path.write_text(f"{text[0]}[hosts.dut2]{jool}\n")
    assert main(["testbed", "check", str(path)]) == 1
    out = capsys.readouterr()
    assert "dut2: Jool module jool neither loaded nor installed: install Jool (jool-dkms + jool-tools), or " \
           "use backend = \"tayga\"" in out.out + out.err
    assert main(["testbed", "dry-run", str(path), "--table-max", "1000"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "xlatbench testbed: dut2: Jool 4.1 has no session-table size nor hash size to set (its BIB and "
        "session tables are trees bounded by memory): leave max_connections and hash_size unset for a jool "
        "PLAT"]
