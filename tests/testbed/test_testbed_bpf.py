"""The bpf backend on a real testbed, proven against the SSH hosts of sshnet (four namespaces running sshd):
preflight finds bpftool, the bpffs and the object the inventory names on the DUT hosts (a copy of the
build's, `bpf_binary`), `up` loads it over SSH, a trial through the chain meets a known answer (the server
host drops exactly every 50th query with nftables, so 4000 queries give 3920 valid replies, and each DUT's
own counters show each query and reply translated once), and `down`, also after a kill -9 of a campaign in
mid-trial, leaves no bpffs mount, no pinned program or map, no clsact qdisc and nothing else on any host.

The hosts share this machine's kernel: the program and map ids read over SSH during the run must be gone
from it afterwards, and each host's mounts are those of its sshd's mount namespace (`ip netns exec` gives
it its own), read from /proc/PID/mountinfo.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from sshnet import ROLES, SshHosts, fake_irqs, fake_sysfs, online_states, sh
from test_testbed_ssh import kill_campaign_mid_trial, setup_on_testbed, write_campaign

from xlatbench.cli import main
from xlatbench.paths import build_dir
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.backends import IN_KERNEL_SOFTIRQ
from xlatbench.setups.testbed.chain import TestbedChain
from xlatbench.setups.testbed.inventory import load_inventory

pytestmark = [pytest.mark.root, pytest.mark.slow]
DUTS = ("dut1", "dut2")
EVERY = 50  # the server host drops every 50th query it receives (nftables `numgen inc`)


def drop_rule(prefix: str) -> str:
    """nftables script: the server host drops every EVERY-th query arriving on its test link."""
    return (f"table inet {prefix}drop {{\nchain input {{\ntype filter hook input priority 0; policy accept;\n"
            f"iifname \"eth1\" udp dport 53 numgen inc mod {EVERY} == 0 drop\n}}\n}}\n")


@pytest.fixture
def inventory(hosts: SshHosts, tmp_path: Path) -> Path:
    return bpf_inventory(hosts, tmp_path)


def bpf_inventory(hosts: SshHosts, tmp_path: Path) -> Path:
    """The sshnet inventory with backend = "bpf" on both DUTs, each naming a copy of the build's object."""
    build = Path(os.environ.get("XLATBENCH_BUILD") or build_dir())
    for dut in DUTS:
        fake_sysfs(tmp_path / "sys" / dut, 4)
        fake_irqs(tmp_path / "sys" / dut, tmp_path / "proc" / dut, {"eth1": [40, 41], "eth2": [42]})
    objects = tmp_path / "on-the-duts"
    objects.mkdir()
    shutil.copy(build / "bpf" / "siit.bpf.o", objects / "siit.bpf.o")
    path = hosts.inventory(tmp_path / "testbed.toml", build, tmp_path / "sys", tmp_path / "run")
    text = path.read_text().replace('backend = "tayga"', 'backend = "bpf"')
    text = text.replace(f'tayga_binary = "{build / "tayga" / "tayga"}"',
                        f'bpf_binary = "{objects / "siit.bpf.o"}"')
    assert text.count("bpf_binary") == 2
    path.write_text(text)
    return path


def mounts(hosts: SshHosts, role: str, under: Path) -> list[str]:
    """bpf mounts below `under` in the mount namespace of the host's sshd (where its SSH sessions mount)."""
    text = Path(f"/proc/{hosts.sshd[role].pid}/mountinfo").read_text()
    return [line for line in text.splitlines() if " - bpf " in line and f" {under}/" in line]


def loaded(chain: TestbedChain, role: str) -> dict[str, object]:
    """The pinned program of a DUT host, read over SSH: its id and its maps' ids."""
    pin = f"{chain.inventory.rundir(role)}/bpf/{role}/siit"
    out = chain.shell.capture(role, f"bpftool -j prog show pinned {pin}").stdout
    info = json.loads(out)
    return {"id": info["id"], "map_ids": info.get("map_ids", [])}


def kernel_has(kind: str, ident: int, wait_s: float = 3.0) -> bool:
    """Whether the kernel still has program/map `ident` after up to `wait_s` (it frees them after an RCU
    grace period once the last pin, filter or descriptor is gone)."""
    deadline = time.monotonic() + wait_s
    while subprocess.run(["bpftool", kind, "show", "id", str(ident)], capture_output=True,
                         check=False).returncode == 0:
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False


def assert_nothing_left(hosts: SshHosts, before: dict[str, str], tmp_path: Path,
                        ids: dict[str, dict[str, object]]) -> None:
    assert hosts.snapshot() == before
    for role in ROLES:
        assert mounts(hosts, role, tmp_path / "run") == [], role
        assert "clsact" not in sh("ip", "netns", "exec", hosts.netns(role), "tc", "qdisc", "show"), role
    for dut in DUTS:
        assert online_states(tmp_path / "sys" / dut / "devices" / "system" / "cpu", 4) == ["1", "1", "1"]
    for dut, found in ids.items():
        assert not kernel_has("prog", int(found["id"])), f"{dut}: program {found['id']} still loaded"
        for map_id in found["map_ids"]:  # type: ignore[attr-defined]
            assert not kernel_has("map", int(map_id)), f"{dut}: map {map_id} still exists"
    assert not list((tmp_path / "run").rglob("*"))  # state files, pins, bpffs mount points


@pytest.mark.parametrize("topology", ["464xlat", "mapt"])
def test_bpf_testbed_check_up_trial_down(hosts: SshHosts, inventory: Path, tmp_path: Path, topology: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    inventory.write_text(inventory.read_text().replace('topology = "464xlat"', f'topology = "{topology}"'))
    drop = drop_rule(hosts.prefix)
    subprocess.run(["ip", "netns", "exec", hosts.netns("server"), "nft", "-f", "-"], input=drop, text=True,
                   check=True)
    before = hosts.snapshot()
    assert main(["testbed", "check", str(inventory)]) == 0
    summary = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in summary] == [[role, "ok:"] for role in ROLES], summary
    assert all("bpf siit.bpf.o sha256" in line for line in summary[1:3]), summary
    ids = {}
    with TestbedChain.up(load_inventory(inventory)) as chain:
        for dut in DUTS:
            assert len(mounts(hosts, dut, tmp_path / "run")) == 1, "up mounted its bpffs on the host"
            ids[dut] = loaded(chain, dut)
        result = ChainMeasurer(chain, TesterOptions(threads=1, ports_per_thread=4)).measure(2.0, 2000.0)
        # Known answer: 4000 queries, every 50th dropped by the server host's nftables rule.
        assert (result.sent, result.valid) == (4000, 4000 - 4000 // EVERY), result
        counters = result.dut_stats["counters"]
        first, second = counters["dut1:translator"], counters["dut2:translator"]
        assert (first["translated_4to6"], second["translated_6to4"]) == (4000, 4000), counters
        assert (second["translated_4to6"], first["translated_6to4"]) == (3920, 3920), counters
        dropped = {k: v for k, v in {**first, **second}.items() if k.startswith("drop_") and v}
        assert set(dropped) <= {"drop_multicast"}, dropped  # the host's own MLD reports, nothing of ours
        translators = chain.describe()["translators"]
        sha = chain.preflight["hosts"]["dut1"]["bpf"]["sha256"]
        assert chain.preflight["hosts"]["dut1"]["bpf"]["object"] == str(tmp_path / "on-the-duts/siit.bpf.o")
        for dut in DUTS:
            assert translators[dut]["implementation"] == "bpf"
            assert translators[dut]["execution_model"] == IN_KERNEL_SOFTIRQ
            assert translators[dut]["version"].startswith(f"siit.bpf.o sha256 {sha[:12]}, Linux ")
            assert translators[dut]["own_build"] == str(tmp_path / "on-the-duts/siit.bpf.o")
    assert_nothing_left(hosts, before, tmp_path, ids)




def test_bpf_testbed_down_after_a_killed_campaign(hosts: SshHosts, inventory: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """kill -9 of a campaign's whole process group in mid-trial, with the program loaded and attached on
    both DUT hosts; `testbed down` then removes every tc filter, qdisc, pin and bpffs it journalled."""
    before = hosts.snapshot()
    campaign, _ = write_campaign(tmp_path, "killed-bpf", setup_on_testbed(inventory), duration=30)
    kill_campaign_mid_trial(campaign, tmp_path)
    ids = {}
    for dut in DUTS:
        assert len(mounts(hosts, dut, tmp_path / "run")) == 1
        pin = tmp_path / "run" / hosts.prefix / dut / "bpf" / dut / "siit"
        out = sh("nsenter", "-t", str(hosts.sshd[dut].pid), "-m", "bpftool", "-j", "prog", "show", "pinned",
                 str(pin))
        info = json.loads(out)
        ids[dut] = {"id": info["id"], "map_ids": info.get("map_ids", [])}
        qdiscs = sh("ip", "netns", "exec", hosts.netns(dut), "tc", "filter", "show", "dev", "xlatbench-siit1",
                    "ingress")
        assert "direct-action" in qdiscs, "the killed run left its program attached"
    assert main(["testbed", "down", str(inventory)]) == 0
    report = json.loads(capsys.readouterr().out)
    for dut in DUTS:
        assert report[dut]["failed"] == [], report[dut]
        undone = " ".join(report[dut]["undone"])
        assert "tc filter del dev xlatbench-siit1 ingress" in undone and "umount " in undone
    assert_nothing_left(hosts, before, tmp_path, ids)
