"""The stateful table on a testbed, without hosts: where each topology keeps its connections, the steps a
point's settings render (conntrack's globals through the inventory's initial namespace, the UDP timeouts
where the NAT runs, Jool's udp-timeout), their undo lines, the dry run, and one-line refusals: a setting the
table lacks, a bad value, a host whose answer is not a number."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from test_inventory import good

from xlatbench.cli import main
from xlatbench.setups.backends.jool import JoolSessionTable
from xlatbench.setups.backends.statetable import ConntrackTable, TableError, TableSpec, parse_flush
from xlatbench.setups.steps import Cmd
from xlatbench.setups.testbed.bringup import plan
from xlatbench.setups.testbed.hostout import HostOutputError
from xlatbench.setups.testbed.inventory import InventoryError, parse_inventory
from xlatbench.setups.testbed.machine import TestbedError
from xlatbench.setups.testbed.preflight import stateful_warnings
from xlatbench.setups.testbed.stateful import (
    apply_table,
    count,
    flush,
    seconds_of,
    stateful_dut,
    stats,
    table_steps,
)
from xlatbench.setups.testbed.undo import record_script

INIT = "/run/netns/init-x"


def inventory(topology: str = "464xlat", dut2: str = "tayga", initial: str | None = INIT) -> Any:
    data = copy.deepcopy(good())
    data["topology"] = topology
    data["hosts"]["dut2"]["backend"] = dut2
    if topology == "mapt":
        data["hosts"]["dut1"]["backend"] = "tayga"
    for dut in ("dut1", "dut2"):
        if initial:
            data["hosts"][dut]["initial_netns"] = initial
    return parse_inventory(data)


def shells(steps: list) -> list[str]:
    return [s.shell() for s in steps if isinstance(s, Cmd)]


def test_where_each_topology_keeps_its_connections() -> None:
    plat = stateful_dut(inventory())
    assert (plat.role, plat.netns, type(plat.table)) == ("dut2", None, ConntrackTable)
    assert plat.initial_netns == INIT
    assert plat.implementation == "tayga PLAT with the kernel's NAT44 behind it"
    jool = stateful_dut(inventory(dut2="jool"))
    assert (jool.role, type(jool.table), jool.implementation) == ("dut2", JoolSessionTable, "jool PLAT")
    ce = stateful_dut(inventory("mapt"))
    assert (ce.role, ce.netns, type(ce.table)) == ("dut1", "napt", ConntrackTable)
    with pytest.raises(TestbedError, match="topology baseline has no stateful NAT .*: use topology 464xlat"):
        stateful_dut(inventory("baseline"))


def test_conntrack_steps_and_their_undo_lines() -> None:
    spec = TableSpec(max_connections=1_000_000, hash_size=262_144, timeout_s=599.2)
    assert shells(table_steps(stateful_dut(inventory("mapt")), spec)) == [
        f"nsenter --net={INIT} sysctl -w net.netfilter.nf_conntrack_max=1000000",
        f"nsenter --net={INIT} sysctl -w net.netfilter.nf_conntrack_buckets=262144",
        "ip netns exec napt sysctl -w net.netfilter.nf_conntrack_udp_timeout=600",
        "ip netns exec napt sysctl -w net.netfilter.nf_conntrack_udp_timeout_stream=600"]
    steps = table_steps(stateful_dut(inventory(initial=None)), spec)
    assert shells(steps)[0] == "sysctl -w net.netfilter.nf_conntrack_max=1000000"  # a real host's sshd
    root = table_steps(stateful_dut(inventory()), spec)[0]
    record = record_script(root, "/run/x/undo.sh")
    assert record is not None
    assert (f"nsenter --net={INIT} sysctl -qw net.netfilter.nf_conntrack_max=$(nsenter --net={INIT} "
            "sysctl -n net.netfilter.nf_conntrack_max)") in record  # read and restored in the same namespace
    # a timeout inside the napt namespace goes with it: no line of its own
    assert record_script(table_steps(stateful_dut(inventory("mapt")), TableSpec(timeout_s=60))[0],
                         "/run/x/undo.sh") is None


def test_jool_sets_only_its_udp_timeout() -> None:
    dut = stateful_dut(inventory(dut2="jool"))
    assert shells(table_steps(dut, TableSpec(timeout_s=3600))) == ["jool global update udp-timeout 1:00:00"]
    assert shells(table_steps(dut, TableSpec(timeout_s=7322))) == ["jool global update udp-timeout 2:02:02"]
    assert table_steps(dut, TableSpec()) == []
    with pytest.raises(TestbedError, match="^dut2: Jool 4.1 has no session-table size nor hash size"):
        table_steps(dut, TableSpec(max_connections=1000))
    with pytest.raises(TestbedError, match="^dut2: Jool 4.1 has no session-table size nor hash size"):
        table_steps(dut, TableSpec(hash_size=1024))
    with pytest.raises(TestbedError, match="at least 120 s .*timeout 60 s is below it"):
        table_steps(dut, TableSpec(timeout_s=60))
    with pytest.raises(TestbedError, match="^dut2: Jool 4.1 has no session flush"):
        flush(Lying(""), dut)


@pytest.mark.parametrize("spec, message", [
    (TableSpec(max_connections=0), "max_connections must be a whole number >= 1, got 0"),
    (TableSpec(hash_size=True), "hash_size must be a whole number >= 1, got True"),  # type: ignore[arg-type]
    (TableSpec(timeout_s=float("nan")), "timeout_s must be a number of seconds >= 1, got nan"),
    (TableSpec(timeout_s=0.5), "timeout_s must be a number of seconds >= 1, got 0.5"),
])
def test_bad_values_refused(spec: TableSpec, message: str) -> None:
    with pytest.raises(TableError, match=f"^{message}$"):
        ConntrackTable().settings_steps(spec, None)


class Lying:
    """A host answering `text` to every reading."""

    def __init__(self, text: str) -> None:
        self.text = text

    def read(self, role: str, script: str, what: str, check: bool = False) -> str:
        return self.text


def test_readings_parsed_and_lies_refused_in_one_line() -> None:
    dut = stateful_dut(inventory())
    assert count(Lying("1234\n"), dut) == 1234
    done = flush(Lying("5000 3 1000000000 1250000000\n"), dut)
    assert (done.removed, done.seconds) == (4997, 0.25)
    assert stats(Lying("cpu=0 found=1 early_drop=2 drop=0\ncpu=1 found=3 early_drop=5 drop=1\n"), dut) == \
        {"found": 4, "early_drop": 7, "drop": 1}
    for junk in ("", "12 entries", "\x1b[31m7", "-5"):
        with pytest.raises(HostOutputError, match="^dut2: .*one whole number") as err:
            count(Lying(junk), dut)
        assert "\n" not in str(err.value) and "\x1b" not in str(err.value)
    for junk in ("1 2 3", "5 3 20 10", "a b c d"):
        with pytest.raises(HostOutputError, match="^dut2: .*BEFORE AFTER T0_NS T1_NS"):
            flush(Lying(junk), dut)
    assert parse_flush("5 3 20 10") is None  # the clock went backwards: no time
    assert [seconds_of(v) for v in ("1800", "0:30:00", "1:00:00.500", "x", "1:2:3:4")] == \
        [1800, 1800, 3600, None, None]


def test_initial_netns_is_a_dut_path() -> None:
    data = copy.deepcopy(good())
    data["hosts"]["client"]["initial_netns"] = INIT
    with pytest.raises(InventoryError, match=r"hosts\.client\.initial_netns: only dut1 and dut2 use it"):
        parse_inventory(data)
    data = copy.deepcopy(good())
    data["hosts"]["dut2"]["initial_netns"] = "/run/netns/$(reboot)"
    with pytest.raises(InventoryError, match=r"hosts\.dut2\.initial_netns: must be a path of letters"):
        parse_inventory(data)


def test_dry_run_shows_the_point_and_its_undo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lab.toml"
    path.write_text('name = "lab"\ntopology = "mapt"\n' + "".join(
        f'[hosts.{role}]\nssh = "{role}"\n{extra}interfaces = {{ {links} }}\n' for role, extra, links in (
            ("client", "", 'client-dut1 = "eth1"'),
            ("dut1", 'backend = "tayga"\n', 'client-dut1 = "eth1", dut1-dut2 = "eth2"'),
            ("dut2", 'backend = "tayga"\n', 'dut1-dut2 = "eth1", dut2-server = "eth2"'),
            ("server", "", 'dut2-server = "eth1"'))))
    assert main(["testbed", "dry-run", str(path), "--table-max", "4000", "--table-buckets", "1024",
                 "--table-timeout", "900"]) == 0
    out = capsys.readouterr().out
    part = out[out.index("### stateful table"):]
    assert part.splitlines()[0].startswith("### stateful table: netfilter conntrack of the kernel NAT44 "
                                           "(iptables SNAT) in namespace napt (namespace napt on dut1)")
    for line in ("sysctl -w net.netfilter.nf_conntrack_max=4000",
                 "sysctl -w net.netfilter.nf_conntrack_buckets=1024",
                 "ip netns exec napt sysctl -w net.netfilter.nf_conntrack_udp_timeout=900",
                 "sysctl -qw net.netfilter.nf_conntrack_buckets=<value before the point>",
                 "sysctl -qw net.netfilter.nf_conntrack_max=<value before the point>",
                 "# ip netns exec napt sysctl -w net.netfilter.nf_conntrack_udp_timeout=900: goes with its "
                 "namespace or translator instance (removed by down)"):
        assert line in part.splitlines()
    assert main(["testbed", "dry-run", str(path), "--table-timeout", "0"]) == 1
    assert capsys.readouterr().err == ("xlatbench testbed: --table-*: timeout_s must be a number of seconds "
                                       ">= 1, got 0.0\n")


class Shell:
    """Takes every script and runs nothing (the host's answers come from a Lying reader)."""

    def __init__(self) -> None:
        self.scripts: list[str] = []

    def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None) -> None:
        self.scripts.append(stdin or script)


def test_a_value_the_kernel_did_not_take_is_refused_in_one_line() -> None:
    """Debian's sysctl -w exits 0 on a read-only key (conntrack's table size in a child namespace): the
    values are read back, the buckets allowed the kernel's rounding up to whole pages."""
    inv, shell = inventory(initial=None), Shell()
    dut = stateful_dut(inv)
    found = ("net.netfilter.nf_conntrack_max = 262144\nnet.netfilter.nf_conntrack_buckets = 1536\n"
             "net.netfilter.nf_conntrack_udp_timeout = 600\n"
             "net.netfilter.nf_conntrack_udp_timeout_stream = 600\n")
    applied = apply_table(shell, Lying(found), inv, dut, TableSpec(hash_size=1025, timeout_s=600))
    assert applied["in_force"]["net.netfilter.nf_conntrack_buckets"] == "1536"
    assert "sysctl -w net.netfilter.nf_conntrack_buckets=1025" in shell.scripts[0]
    with pytest.raises(TestbedError) as err:
        apply_table(shell, Lying(found), inv, dut, TableSpec(max_connections=50_000))
    assert str(err.value) == ("dut2: net.netfilter.nf_conntrack_max is 262144 after setting 50000: the "
                              "kernel did not take it (a child namespace only reads it: set this DUT's "
                              "initial_netns, or reach the host with an sshd in its initial namespace)")
    with pytest.raises(TestbedError, match="^dut2: net.netfilter.nf_conntrack_udp_timeout is 600 after "
                                           "setting 900: the kernel did not take it$"):
        apply_table(shell, Lying(found), inv, dut, TableSpec(timeout_s=900))


def test_preflight_warns_where_the_stateful_host_lacks_conntrack() -> None:
    facts = {"conntrack_cli": "no"}
    found = {"dut1": ({"conntrack_cli": "no"}, {}), "dut2": (facts, {})}
    assert stateful_warnings(inventory(), found) == [
        "dut2: conntrack (conntrack-tools) is not installed: the stateful measurements (RFC 9693) cannot "
        "empty and time its table there: apt-get install conntrack"]
    assert stateful_warnings(inventory(), {"dut2": ({"conntrack_cli": "yes"}, {})}) == []
    assert stateful_warnings(inventory(dut2="jool"), found) == []  # Jool's table needs none
    assert stateful_warnings(inventory("baseline"), found) == []  # no stateful part
    assert stateful_warnings(inventory(), {"dut2": "unreachable: ..."}) == []  # said elsewhere


def test_the_figure_1_gateway_leaves_by_the_inventorys_nic() -> None:
    data = copy.deepcopy(good())
    data["topology"], data["nat44"] = "baseline", True
    inv = parse_inventory(data)
    dut = stateful_dut(inv)
    assert (dut.role, dut.netns, type(dut.table)) == ("dut1", None, ConntrackTable)
    rules = [s for s in shells(plan(inv)["dut1"]) if s.startswith("iptables")]
    assert rules == ["iptables -t nat -A POSTROUTING -s 192.168.0.0/24 -o eth2 -p udp -j SNAT --to-source "
                     "198.51.100.1"]  # dut1's NIC on link dut1-dut2 and its address there
    step = next(s for s in plan(inv)["dut1"] if isinstance(s, Cmd) and s.argv[0] == "iptables")
    record = record_script(step, "/run/x/undo.sh")
    assert record is not None and record.startswith("if nft list table ip nat >/dev/null 2>&1; then ")
    assert "nft delete table ip nat" in record  # a nat table the step made goes with its last rule
    data["topology"] = "464xlat"
    with pytest.raises(InventoryError, match="nat44: only topology baseline takes it"):
        parse_inventory(data)
