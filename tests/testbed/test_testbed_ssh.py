"""The proof on this machine: four namespaces running Debian's sshd stand in for the paper's hosts; the
testbed is checked, brought up with the tayga backend over SSH, measured with xlatperf on the client
host, and taken down, leaving every host as it was (also after the controller is killed mid-trial)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshnet import ROLES, SshHosts, fake_sysfs, online_states, sh

from xlatbench.cli import main
from xlatbench.paths import build_dir
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.inventory import load_inventory
from xlatbench.setups.testbed import TestbedChain

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[SshHosts]:
    net = SshHosts(tmp_path / "hosts")
    net.workdir.mkdir()
    try:
        net.up()
        yield net
    finally:
        net.down()


@pytest.fixture
def inventory(hosts: SshHosts, tmp_path: Path) -> Path:
    build = Path(os.environ.get("XLATBENCH_BUILD") or build_dir())
    for dut in ("dut1", "dut2"):
        fake_sysfs(tmp_path / "sys" / dut, 4)
    return hosts.inventory(tmp_path / "testbed.toml", build, tmp_path / "sys", tmp_path / "run")


def processes(hosts: SshHosts, role: str) -> list[str]:
    pids = sh("ip", "netns", "pids", hosts.netns(role)).split()
    return [Path(f"/proc/{pid}/comm").read_text().strip() for pid in pids if Path(f"/proc/{pid}").exists()]


def assert_as_before(hosts: SshHosts, before: dict[str, str], tmp_path: Path) -> None:
    assert hosts.snapshot() == before
    for dut in ("dut1", "dut2"):
        assert online_states(tmp_path / "sys" / dut / "devices" / "system" / "cpu", 4) == ["1", "1", "1"]
        assert not {"tayga", "knotd", "sh"} & set(processes(hosts, dut))
    assert "knotd" not in processes(hosts, "server")
    assert not list((tmp_path / "run").rglob("*"))  # state files, tester results, their directories


@pytest.mark.parametrize("topology", ["464xlat", "mapt"])
def test_check_up_trial_down(hosts: SshHosts, inventory: Path, tmp_path: Path, topology: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """464XLAT, and MAP-T with the CE's napt namespace inside dut1 (a NIC moved into it and back)."""
    text = inventory.read_text().replace('topology = "464xlat"', f'topology = "{topology}"')
    inventory.write_text(text)
    before = hosts.snapshot()
    assert main(["testbed", "check", str(inventory)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and set(report["hosts"]) == set(ROLES)
    assert report["hosts"]["dut1"]["interfaces"]["eth2"]["driver"] == "veth"
    assert abs(report["hosts"]["server"]["clock"]["offset_s"]) < 0.1  # one machine, one clock
    inv = load_inventory(inventory)
    with TestbedChain.up(inv) as chain:
        placement = chain.set_dut_cpus([0, 1])
        assert placement["dut1"]["online"] == [0, 1] and placement["dut2"]["offline"] == [2, 3]
        assert "rx-0" in placement["dut1"]["interfaces"]["eth1"]["rps_cpus"]  # veth: one queue
        chain.start_idle()
        result = ChainMeasurer(chain, TesterOptions(threads=1, ports_per_thread=4)).measure(2.0, 2000.0)
        idle = chain.collect_idle()
        # Known answers: every query left dut1 towards dut2 and reached Knot.
        assert result.sent == 4000 and result.loss_ratio < 0.01, result
        counters = result.dut_stats["counters"]
        assert counters["dut1:eth2"]["tx_packets"] >= result.sent
        assert counters["server:eth1"]["rx_packets"] >= result.valid
        assert result.dut_stats["cpu_s"]["dut1"] > 0 and result.dut_stats["cpu_s"]["dut2"] > 0
        assert len(idle["dut1"]) >= 2 and "all" in idle["dut1"][0]["cpus"]
        description = chain.describe()
        assert description["translators"]["dut1"]["implementation"] == "tayga"
        assert description["preflight"]["hosts"]["client"]["tester"].startswith("xlatperf")
        log = chain.shell.log_records()
        assert {r["host"] for r in log} == set(ROLES) and all("duration_s" in r for r in log)
    assert_as_before(hosts, before, tmp_path)


def test_preflight_refuses_an_interface_with_addresses(hosts: SshHosts, inventory: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    sh("ip", "-n", hosts.netns("dut2"), "address", "add", "198.18.0.1/24", "dev", "eth2")
    sh("ip", "-n", hosts.netns("client"), "link", "set", "eth1", "name", "eth7")
    assert main(["testbed", "check", str(inventory)]) == 1
    err = capsys.readouterr().err
    assert "dut2: interface eth2 carries 198.18.0.1/24" in err
    assert "client: interface eth1 (link client-dut1) is missing" in err
    with pytest.raises(RuntimeError, match="preflight refused"):
        TestbedChain.up(load_inventory(inventory))


CONTROLLER = """
import sys
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.inventory import load_inventory
from xlatbench.setups.testbed import TestbedChain
chain = TestbedChain.up(load_inventory(sys.argv[1]))
chain.set_dut_cpus([0])
chain.start_idle()
print("up", flush=True)
ChainMeasurer(chain, TesterOptions()).measure(20.0, 1000.0)
"""


def test_killed_controller_then_down(hosts: SshHosts, inventory: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    before = hosts.snapshot()
    controller = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(inventory)], stdout=subprocess.PIPE,
                                  text=True, start_new_session=True)
    try:
        assert controller.stdout is not None
        assert controller.stdout.readline().strip() == "up"
        time.sleep(2.0)  # mid-trial
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
    assert hosts.snapshot() != before
    assert main(["testbed", "down", str(inventory)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dut1"]["undone"] > 10 and report["dut1"]["failed"] == []
    assert_as_before(hosts, before, tmp_path)


CAMPAIGN = """
[campaign]
name = "{name}"
store = "{store}"
methods = ["rfc8219-binary"]
cores = [1]

[search]
min_rate_qps = 0
max_rate_qps = 4000
error_qps = 1000
duration_s = 1
rest_s = 0
repetitions = 1
short_duration_s = 1
short_rest_s = 0

[tester]
threads = 1
ports_per_thread = 4
timeout_s = 0.25

[idle]
runs = 0

[[setup]]
name = "c464"
kind = "chain"
topology = "464xlat"
{setup}
"""


RUN_CLI = "import sys; from xlatbench.cli import main; sys.exit(main(sys.argv[1:]))"


def _keys(record: dict, depth: int = 2) -> set[str]:
    """Dotted key paths of a record down to `depth` levels (the record's shape, not its values)."""
    keys = set()
    for key, value in record.items():
        keys.add(key)
        if depth > 1 and isinstance(value, dict) and key not in ("dut", "raw", "setup"):
            keys |= {f"{key}.{sub}" for sub in _keys(value, depth - 1)}
    return keys


def test_campaign_through_ssh_has_the_emulations_records(hosts: SshHosts, inventory: Path,
                                                         tmp_path: Path) -> None:
    """The same campaign through the SSH testbed and through the namespace emulation: the same records."""
    runs = {
        "ssh": 'factory = "xlatbench.setups.testbed:testbed_chain"\n'
               f'options = {{ inventory = "{inventory}" }}\ncpu_map = {{ 1 = [0] }}',
        "netns": f'options = {{ prefix = "{hosts.prefix}e", backend = "tayga" }}\ncpu_map = {{ 1 = [1] }}',
    }
    records = {}
    for world, setup in runs.items():
        store = tmp_path / f"{world}.jsonl"
        campaign = tmp_path / f"{world}.toml"
        campaign.write_text(CAMPAIGN.format(name=world, store=store, setup=setup))
        # In a process of its own, as a user runs it (its progress output outlives pytest's capture).
        done = subprocess.run([sys.executable, "-c", RUN_CLI, "campaign", "run", str(campaign)],
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        records[world] = [json.loads(line) for line in store.read_text().splitlines()]
    ssh_trials = [r for r in records["ssh"] if r["type"] == "trial"]
    netns_trials = [r for r in records["netns"] if r["type"] == "trial"]
    assert ssh_trials and netns_trials
    # The searches may take different paths (trial outcomes differ): compare each record type's shape.
    shapes: dict[str, dict[str, set[str]]] = {"ssh": {}, "netns": {}}
    for world, stored in records.items():
        for record in stored:
            shapes[world].setdefault(record["type"], set()).update(_keys(record))
    assert shapes["ssh"] == shapes["netns"]
    first = ssh_trials[0]
    assert first["dut"]["world"] == "real testbed" and first["dut"]["preflight"]["ok"]
    assert first["dut_cpus"]["applied"]["dut1"]["online"] == [0]
    assert first["trial"]["sent"] == first["trial"]["rate_qps"] * first["trial"]["duration_s"]
