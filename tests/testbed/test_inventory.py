"""Inventories: the paper's example parses; each bad one fails with one line naming the key and the fix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from xlatbench.setups.testbed.inventory import InventoryError, load_inventory, parse_inventory

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "paper-mapt.toml"


def good() -> dict[str, Any]:
    return {
        "name": "lab",
        "topology": "464xlat",
        "hosts": {
            "client": {"ssh": "c", "interfaces": {"client-dut1": "eth1"}},
            "dut1": {"ssh": "d1", "interfaces": {"client-dut1": "eth1", "dut1-dut2": "eth2"},
                     "offline_cpus": "1-3"},
            "dut2": {"ssh": "d2", "backend": "tayga",
                     "interfaces": {"dut1-dut2": "eth1", "dut2-server": "eth2"}},
            "server": {"ssh": "root@s", "interfaces": {"dut2-server": "eth1"}, "management": "10.9.0.4"},
        },
    }


def edited(path: str, value: Any) -> dict[str, Any]:
    """A copy of good() with the dotted `path` set to `value` (None deletes it)."""
    data = copy.deepcopy(good())
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return data


def test_good_inventory_parses() -> None:
    inv = parse_inventory(good())
    assert inv.hosts["dut1"].offline_cpus == (1, 2, 3)
    assert inv.hosts["dut1"].backend.name == "jool"
    assert inv.hosts["dut2"].backend.name == "tayga"
    choice = inv.backends()  # the hosts' instances, per role: CLAT/CE dut1's, PLAT/BR dut2's
    assert choice.spec() == ("clat=jool,ce=jool,mape-ce=jool,lwb4=jool,plat=tayga,br=tayga,mape-br=tayga,"
                             "lwaftr=tayga")
    assert choice.by_role["clat"] is inv.hosts["dut1"].backend
    assert choice.by_role["br"] is inv.hosts["dut2"].backend
    assert inv.statefile("dut2") == "/run/xlatbench-testbed/lab/dut2/undo.sh"


def test_paper_example_parses() -> None:
    inv = load_inventory(EXAMPLE)
    assert inv.topology_name == "mapt"
    assert inv.hosts["dut2"].interfaces == {"dut1-dut2": "enp5s0f0", "dut2-server": "enp5s0f1"}


BAD = [
    ("topology", "nat46", "topology: set it to one of baseline, 464xlat, mapt"),
    # Single-DUT topologies: one line before anything (was a KeyError traceback in dry-run, up, campaign).
    *[("topology", single, f"topology: {single} has a single DUT, which the four-host testbed path does not "
       "run yet: use one of baseline, 464xlat, mapt, mape, lw4o6, or measure")
      for single in ("plat", "clat", "ce", "br", "mape-br", "mape-ce", "lwaftr", "lwb4")],
    ("colour", "red", "colour: unknown key"),
    ("hosts.router", {"ssh": "r"}, "hosts.router: unknown role"),
    ("hosts.server", None, "hosts.server: missing"),
    ("hosts.dut1.ssh", None, "hosts.dut1.ssh: give the SSH destination"),
    ("hosts.dut1.ssh", "-oProxyCommand=x", "hosts.dut1.ssh: give the SSH destination"),
    ("hosts.dut2.ssh", "d1", "hosts.dut2.ssh: 'd1' is also dut1"),
    ("hosts.dut1.interfaces.dut1-dut2", None, "hosts.dut1.interfaces.dut1-dut2: missing"),
    ("hosts.dut1.interfaces.dut2-server", "eth9", "dut1 has no link 'dut2-server'"),
    ("hosts.dut1.interfaces.dut1-dut2", "eth1", "two links on one interface"),
    ("hosts.dut1.interfaces.dut1-dut2", "a-very-long-interface", "is not an interface name"),
    ("hosts.dut1.backend", "snabb", "hosts.dut1.backend: choose jool or tayga or bpf or vpp or ip6tnl"),
    # a backend that does not play the DUT's role (issue 34: VPP plays the MAP-E BR and the lwAFTR only)
    ("hosts.dut1.backend", "vpp", "hosts.dut1.backend: backend vpp does not serve the clat role of the "
     "464xlat topology: choose jool or tayga or bpf (hosts.dut1.backend)"),
    ("hosts.client.backend", "jool", "hosts.client.backend: only dut1 and dut2 run a translator"),
    ("hosts.dut1.offline_cpus", "0-3", "CPU 0 cannot go offline"),
    ("hosts.dut1.offline_cpus", "one", "give CPU numbers"),
    ("hosts.server.offline_cpus", [1], "only DUTs change core counts"),
    ("hosts.server.management", "203.0.113.9", "lies in the test network 203.0.113.0/24"),
    ("hosts.client.management", "64:ff9b::1", "lies in the test network 64:ff9b::/96"),
    ("hosts.client.management", "not-an-ip", "is not an IP address"),
    ("hosts.dut1.colour", "x", "hosts.dut1.colour: unknown key"),
    ("nat64_prefix", "2001:db8::/64", "nat64_prefix: '2001:db8::/64' is not an IPv6 /96"),
    ("napt_netns", "Bad Name", "napt_netns: must be a namespace name"),
    ("ssh_options", "-v", "ssh_options: must be a list of strings"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD, ids=[f"{p}={v}" for p, v, _ in BAD])
def test_bad_inventory_names_key_and_fix(path: str, value: Any, message: str) -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory(edited(path, value), "inv.toml")
    text = str(err.value)
    assert message in text
    assert text.startswith("inv.toml: ")
    assert "\n" not in text


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="no such inventory file"):
        load_inventory(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("topology = \n")
    with pytest.raises(InventoryError, match="not valid TOML"):
        load_inventory(bad)


def test_cli_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xlatbench.cli import main

    bad = tmp_path / "inv.toml"
    bad.write_text('topology = "mapt"\n[hosts.client]\nssh = "c"\n')
    assert main(["testbed", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0
    assert "hosts.dut1: missing: every testbed needs client, dut1, dut2 and server" in err
