"""The proof on this machine: four namespaces running Debian's sshd stand in for the paper's hosts; the
testbed is checked, brought up with the tayga backend over SSH, measured with xlatperf on the client
host, and taken down, leaving every host as it was (also after the controller is killed mid-trial)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from sshnet import ROLES, SshHosts, fake_irqs, fake_sysfs, irq_affinities, online_states, sh

from xlatbench.analysis.bottleneck import verdict
from xlatbench.analysis.evidence import evidence_from
from xlatbench.cli import main
from xlatbench.data.records import record_from_json
from xlatbench.failures import ComponentFailure
from xlatbench.paths import build_dir
from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.testbed.chain import HostLost, TestbedChain
from xlatbench.setups.testbed.inventory import load_inventory

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def inventory(hosts: SshHosts, tmp_path: Path) -> Path:
    return tayga_inventory(hosts, tmp_path)


def tayga_inventory(hosts: SshHosts, tmp_path: Path) -> Path:
    """The sshnet inventory (tayga on both DUTs) with fake sysfs and IRQ trees for the DUT hosts."""
    build = Path(os.environ.get("XLATBENCH_BUILD") or build_dir())
    for dut in ("dut1", "dut2"):
        fake_sysfs(tmp_path / "sys" / dut, 4)
        fake_irqs(tmp_path / "sys" / dut, tmp_path / "proc" / dut, {"eth1": [40, 41], "eth2": [42]})
    return hosts.inventory(tmp_path / "testbed.toml", build, tmp_path / "sys", tmp_path / "run")


def processes(hosts: SshHosts, role: str) -> list[str]:
    pids = sh("ip", "netns", "pids", hosts.netns(role)).split()
    names = []
    for pid in pids:
        try:
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:  # it ended meanwhile
            continue
    return names


def assert_as_before(hosts: SshHosts, before: dict[str, str], tmp_path: Path) -> None:
    assert hosts.snapshot() == before
    for dut in ("dut1", "dut2"):
        assert online_states(tmp_path / "sys" / dut / "devices" / "system" / "cpu", 4) == ["1", "1", "1"]
        assert irq_affinities(tmp_path / "proc" / dut) == {"40": "0-3", "41": "0-3", "42": "0-3"}
        assert not {"tayga", "knotd", "sh"} & set(processes(hosts, dut))
    assert "knotd" not in processes(hosts, "server")
    assert "xlatperf" not in processes(hosts, "client")
    assert not list((tmp_path / "run").rglob("*"))  # state files, tester results, their directories


@pytest.mark.parametrize("topology", ["464xlat", "mapt"])
def test_check_up_trial_down(hosts: SshHosts, inventory: Path, tmp_path: Path, topology: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """464XLAT, and MAP-T with the CE's napt namespace inside dut1 (a NIC moved into it and back); every host
    has an IPv4 default route of its own (as real hosts do), which the plan neither collides with nor uses."""
    text = inventory.read_text().replace('topology = "464xlat"', f'topology = "{topology}"')
    inventory.write_text(text)
    for role in ROLES:
        sh("ip", "-n", hosts.netns(role), "route", "add", "default", "dev", "mgmt0")
    before = hosts.snapshot()
    assert all("default dev mgmt0" in before[role] for role in ROLES)
    assert main(["testbed", "check", str(inventory)]) == 0
    summary = capsys.readouterr().out.splitlines()  # one line per host: role, kernel, CPUs, what, verdict
    assert [line.split()[:2] for line in summary] == [[role, "ok:"] for role in ROLES], summary
    assert "tester xlatperf" in summary[0] and "(controller: xlatperf" in summary[0]
    assert main(["testbed", "check", "--json", str(inventory)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and set(report["hosts"]) == set(ROLES)
    assert report["hosts"]["dut1"]["interfaces"]["eth2"]["driver"] == "veth"
    assert abs(report["hosts"]["server"]["clock"]["offset_s"]) < 0.1  # one machine, one clock
    inv = load_inventory(inventory)
    with TestbedChain.up(inv) as chain:
        placement = chain.set_dut_cpus([0, 1])
        assert placement["dut1"]["online"] == [0, 1] and placement["dut2"]["offline"] == [2, 3]
        assert "rx-0" in placement["dut1"]["interfaces"]["eth1"]["rps_cpus"]  # veth: one queue
        # the NICs' IRQs (fake trees) spread over the online CPUs, the affinity found kept for down
        assert placement["dut2"]["interfaces"]["eth1"]["irq_affinity"] == {"40": "0", "41": "1"}
        assert placement["dut2"]["irqs"]["before_sweep"]["eth2"] == {"42": "0-3"}
        assert irq_affinities(tmp_path / "proc" / "dut1")["42"] == "0"
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


def test_a_remote_daemon_killed_inside_a_trial_voids_it(hosts: SshHosts, inventory: Path,
                                                        tmp_path: Path) -> None:
    """knotd on the server host or tayga on a DUT host, killed with SIGKILL inside a trial, makes that trial
    void (ComponentFailure naming it), never a figure or DUT loss; down still leaves every host as before.
    The hosts are namespaces of this machine, so the test can kill the pid read over SSH itself."""
    before = hosts.snapshot()
    with TestbedChain.up(load_inventory(inventory)) as chain:
        components = chain.component_pids()
        assert set(components) == {"knotd (server)", "tayga (dut1)", "tayga (dut2)"}, components
        assert chain.gone(components) == []
        name, pid = random.choice(sorted(components.items()))
        assert Path(f"/proc/{pid}/comm").read_text().strip() == name.split()[0]
        killer = threading.Timer(random.uniform(0.5, 1.5), os.kill, (pid, signal.SIGKILL))
        killer.start()
        with pytest.raises(ComponentFailure, match=rf"{re.escape(name)} \(pid {pid}\) died during the trial"):
            ChainMeasurer(chain, TesterOptions(threads=1, ports_per_thread=4)).measure(2.5, 1000.0)
        killer.join()
    assert_as_before(hosts, before, tmp_path)


def ssh_control_dirs() -> set[str]:
    return {str(p) for p in Path(tempfile.gettempdir()).glob("xlatbench-ssh-*")}


def ssh_masters(dirs: set[str]) -> list[str]:
    """Command lines of running ssh masters whose control socket lies in one of `dirs`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(d in text for d in dirs) and text.startswith("ssh"):
            found.append(text)
    return found


def test_preflight_refuses_an_interface_with_addresses(hosts: SshHosts, inventory: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """...and every command (check, a refused up, down) ends its SSH masters and removes their directory."""
    dirs_before = ssh_control_dirs()
    sh("ip", "-n", hosts.netns("dut2"), "address", "add", "198.18.0.1/24", "dev", "eth2")
    sh("ip", "-n", hosts.netns("client"), "link", "set", "eth1", "name", "eth7")
    assert main(["testbed", "check", str(inventory)]) == 1
    err = "".join(capsys.readouterr())
    assert "dut2: interface eth2 carries 198.18.0.1/24" in err
    assert "client: interface eth1 (link client-dut1) is missing" in err
    with pytest.raises(RuntimeError, match="preflight refused"):
        TestbedChain.up(load_inventory(inventory))
    assert main(["testbed", "down", str(inventory)]) == 0
    new = ssh_control_dirs() - dirs_before
    assert not new, new
    masters = [m for m in ssh_masters({"xlatbench-ssh-"}) if not any(d in m for d in dirs_before)]
    assert masters == []


CAMPAIGN = """
[campaign]
name = "{name}"
store = "{store}"
methods = ["rfc8219-binary"]
cores = {cores}

[[search]]
name = "default"
min_rate_qps = 0
max_rate_qps = {max_rate}
error_qps = 1000
duration_s = {duration}
rest_s = 0
repetitions = 1
short_duration_s = 1
short_rest_s = 0
{more_searches}
[tester]
threads = 1
ports_per_thread = 4
timeout_s = 0.25
{tester}
[idle]
runs = 1
duration_s = {idle_s}
{extra}
[[setup]]
name = "{setup_name}"
{setup}
"""

# A search after "default" whose trials last long enough to kill a campaign inside one (its tester then
# still runs on the client host): `write_campaign(..., long_trial_s=30)`.
LONG_SEARCH = """
[[search]]
name = "long"
min_rate_qps = 0
max_rate_qps = {max_rate}
error_qps = 1000
duration_s = {long_trial_s}
rest_s = 0
repetitions = 1
short_duration_s = {long_trial_s}
short_rest_s = 0
"""


RUN_CLI = "import sys; from xlatbench.cli import main; sys.exit(main(sys.argv[1:]))"


def write_campaign(tmp_path: Path, world: str, setup: str, duration: float = 1.0, *,
                   cores: tuple[int, ...] = (1,), max_rate: int = 4000, idle_s: float = 3,
                   setup_name: str = "c464", tester: str = "", extra: str = "",
                   long_trial_s: float | None = None) -> tuple[Path, Path]:
    """The testbed tests' one campaign template: an RFC 8219 binary search of `duration` s trials up to
    `max_rate` queries/s at each of `cores`, one idle run of `idle_s` s; `tester`: more [tester] lines
    (e.g. io = "xdp"); `extra`: more tables (e.g. [server]); `long_trial_s`: a second search of trials that
    long. Returns (campaign file, store)."""
    store, campaign = tmp_path / f"{world}.jsonl", tmp_path / f"{world}.toml"
    more = "" if long_trial_s is None else LONG_SEARCH.format(max_rate=max_rate, long_trial_s=long_trial_s)
    campaign.write_text(CAMPAIGN.format(name=world, store=store, setup=setup, duration=duration,
                                        cores=list(cores), max_rate=max_rate, idle_s=idle_s,
                                        setup_name=setup_name, tester=tester, extra=extra,
                                        more_searches=more))
    return campaign, store


def setup_on_testbed(inventory: Path) -> str:
    return f'kind = "testbed"\ninventory = "{inventory}"\ntopology = "464xlat"'


def kill_campaign_mid_trial(campaign: Path, tmp_path: Path) -> int:
    """Run the campaign in a process group of its own until a trial runs, then SIGKILL the whole group (its
    ssh clients included) a second into that trial; -> the controller's pid."""
    controller = subprocess.Popen([sys.executable, "-c", RUN_CLI, "campaign", "run", "--no-progress",
                                   str(campaign)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # A trial's tester writes its pid file on the client (preflight's `xlatperf --version` does not).
        while not list((tmp_path / "run").rglob("trial-*.pid")):
            assert controller.poll() is None and time.monotonic() < deadline, "no trial started"
            time.sleep(0.2)
        time.sleep(1.0)  # mid-trial
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
    return controller.pid


def test_killed_campaign_then_down(hosts: SshHosts, inventory: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """kill -9 of the campaign (its whole process group, ssh clients included) while a trial runs on the
    client host, then `testbed down`: the tester left running there is ended, every host is as before."""
    before = hosts.snapshot()
    campaign, _ = write_campaign(tmp_path, "killed", setup_on_testbed(inventory), duration=30.0)
    controller = kill_campaign_mid_trial(campaign, tmp_path)
    assert hosts.snapshot() != before
    assert "xlatperf" in processes(hosts, "client"), "the tester runs on without its controller"
    left = list(Path(tempfile.gettempdir()).glob(f"xlatbench-ssh-{controller}-*"))
    assert left, "kill -9 leaves the controller's SSH directory (the case the next command cleans)"
    assert main(["testbed", "down", str(inventory)]) == 0
    assert not any(path.exists() for path in left), "the next command removed the killed one's SSH directory"
    report = json.loads(capsys.readouterr().out)
    assert len(report["dut1"]["undone"]) > 10 and report["dut1"]["failed"] == []
    assert len(report["client"]["stopped_testers"]) == 1
    assert_as_before(hosts, before, tmp_path)


def _keys(record: dict, depth: int = 2) -> set[str]:
    """Dotted key paths of a record down to `depth` levels (the record's shape, not its values). Not
    entered: what describes the world itself (dut, setup), the tester's raw JSON, and hosts (per-host
    samples exist only on a testbed: checked on their own)."""
    keys = set()
    for key, value in record.items():
        keys.add(key)
        if depth > 1 and isinstance(value, dict) and key not in ("dut", "raw", "setup", "hosts"):
            keys |= {f"{key}.{sub}" for sub in _keys(value, depth - 1)}
    return keys


def test_campaign_through_ssh_has_the_emulations_records(hosts: SshHosts, inventory: Path,
                                                         tmp_path: Path) -> None:
    """The same campaign on the SSH testbed (`kind = "testbed"`) and on the namespace emulation: records of
    the same shape, key by key; the testbed's idle capture has per-host samples of both DUTs."""
    before = hosts.snapshot()
    runs = {
        "ssh": setup_on_testbed(inventory),
        "netns": f'kind = "chain"\ntopology = "464xlat"\n'
                 f'options = {{ prefix = "{hosts.prefix}e", backend = "tayga" }}\ncpu_map = {{ 1 = [1] }}',
    }
    records = {}
    overhead = {}
    for world, setup in runs.items():
        campaign, store = write_campaign(tmp_path, world, setup)
        if world == "ssh":  # `campaign plan` probes the hosts for the per-trial overhead, changing nothing
            overhead["probed"] = plan_overhead(campaign, r"probe of the hosts of \S+: SSH round trips dut1 ")
            assert hosts.snapshot() == before
        # In a process of its own, as a user runs it (its progress output outlives pytest's capture).
        done = subprocess.run([sys.executable, "-c", RUN_CLI, "campaign", "run", str(campaign)],
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        records[world] = [json.loads(line) for line in store.read_text().splitlines()]
        if world == "ssh":
            # the probe predicts what the trials then took beyond their duration (the stored trials' own)
            overhead["stored"] = statistics.median(r["trial"]["wall_s"] - r["trial"]["duration_s"]
                                                   for r in records[world] if r["type"] == "trial")
            assert overhead["stored"] / 3 < overhead["probed"] < 3 * overhead["stored"], overhead
            assert "each DUT's CPU figures are its own host's (active cores: dut1 CPU 0, dut2 CPU 0)" \
                in done.stderr, done.stderr[-2000:]
    assert_as_before(hosts, before, tmp_path)  # the campaign took its testbed down
    by_type = {world: {r["type"] for r in stored} for world, stored in records.items()}
    assert by_type["ssh"] == by_type["netns"] >= {"trial", "search", "summary", "idle-run", "idle-mean"}
    # The searches may take different paths (trial outcomes differ): compare each record type's shape.
    shapes: dict[str, dict[str, set[str]]] = {"ssh": {}, "netns": {}}
    for world, stored in records.items():
        for record in stored:
            shapes[world].setdefault(record["type"], set()).update(_keys(record))
    assert shapes["ssh"] == shapes["netns"]
    schema = json.loads((Path(__file__).parents[2] / "data" / "schema" / "store.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for record in records["ssh"]:
        errors = list(validator.iter_errors(record))
        assert not errors, (record["key"], errors[0].message)
    first = next(r for r in records["ssh"] if r["type"] == "trial")
    assert first["dut"]["world"] == "real testbed" and first["dut"]["preflight"]["ok"]
    assert first["dut"]["knot"]["threads"], "knotd's threads and their CPUs, read on the server host"
    assert first["dut_cpus"]["applied"]["dut1"]["online"] == [0]
    assert first["trial"]["sent"] == first["trial"]["rate_qps"] * first["trial"]["duration_s"]
    check_host_idle(records)


def plan_overhead(campaign: Path, source: str) -> float:
    """The per-trial overhead `campaign plan` states for the campaign's one setup, s (its source checked)."""
    done = subprocess.run([sys.executable, "-c", RUN_CLI, "campaign", "plan", str(campaign)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"per-trial overhead of \S+: ([0-9.]+) s \((.*)\)", done.stdout)
    assert found and re.match(source, found.group(2)), done.stdout
    assert re.search(r"of trials \+ ~\d+ (s|min) overhead", done.stdout), done.stdout
    return float(found.group(1))


def check_host_idle(records: dict[str, list[dict]]) -> None:
    """Per-host idle samples of each DUT on the testbed (none in emulation), and the paper's verdict."""
    run = next(r for r in records["ssh"] if r["type"] == "idle-run")
    assert set(run["hosts"]) == {"dut1", "dut2"}
    for samples in run["hosts"].values():
        # Only the samples inside the 3 s trial (t_s counted from its start on the controller's clock).
        assert 2 <= len(samples) <= 4 and {"all", "0"} <= set(samples[0]["cpus"])
        assert all(0.5 <= s["t_s"] <= 3.6 for s in samples), [s["t_s"] for s in samples]
        assert abs(sum(samples[0]["cpus"]["all"].values()) - 100.0) < 0.5
    mean = next(r for r in records["ssh"] if r["type"] == "idle-mean")
    assert set(mean["hosts"]) == {"dut1", "dut2"}
    assert all(r["hosts"] is None for r in records["netns"] if r["type"] in ("idle-run", "idle-mean"))
    (found,) = evidence_from([record_from_json(r) for r in records["ssh"]])  # type: ignore[misc]
    assert found.separate_hosts and found.dut_cpus == {"dut1": (0,), "dut2": (0,)}
    # Both "hosts" read this one machine's CPUs: named only if one was saturated and the other clearly idler.
    result = verdict(found)
    assert result.bottleneck in ("dut1", "dut2", None) and (result.bottleneck or result.reason)
    assert all(0.0 <= v["idle"] <= 100.0 for use in found.dut_cpu_use.values() for v in use.values())


def test_check_refuses_what_the_host_has_and_a_failed_up_keeps_it(hosts: SshHosts, inventory: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects of the hosts' own with the names the MAP-T plan creates: `check` refuses each in one line
    (host, object, fix) and `up` touches nothing; with the check bypassed, an `up` that fails on the
    host's `to_napt` undoes exactly what it made and the host's own namespace and link survive."""
    inventory.write_text(inventory.read_text().replace('topology = "464xlat"', 'topology = "mapt"'))
    napt = f"{hosts.prefix}-napt"
    dut1, dut2, server = (hosts.netns(r) for r in ("dut1", "dut2", "server"))
    sh("ip", "-n", dut1, "link", "add", "to_napt", "type", "veth", "peer", "name", "theirs")
    sh("ip", "-n", dut2, "tuntap", "add", "dev", "xlatbench64", "mode", "tun")
    sh("ip", "-n", dut2, "route", "add", "192.0.2.0/24", "dev", "lo")
    sh("ip", "-n", server, "address", "add", "203.0.113.56/32", "dev", "lo")
    sh("ip", "netns", "add", napt)
    try:
        before = hosts.snapshot()
        assert main(["testbed", "check", str(inventory)]) == 1
        err = "".join(capsys.readouterr())
        for line in (f"dut1: namespace {napt} already exists and the plan creates it: delete it "
                     f"(`ip netns del {napt}`) if nothing needs it, or set napt_netns to another name",
                     "dut1: link to_napt already exists and the plan creates it: delete or rename it "
                     "(`ip link del to_napt`)",
                     "dut2: tun xlatbench64 already exists and the plan creates it",
                     "dut2: route -4 192.0.2.0/24 already exists (192.0.2.0/24 dev lo",
                     "`ip -4 route del 192.0.2.0/24`",
                     "server: address 203.0.113.56/24 already exists (on lo) and the plan creates it: remove "
                     "it (`ip address del 203.0.113.56/24 dev lo`)"):
            assert line in err, err
        with pytest.raises(RuntimeError, match="preflight refused"):
            TestbedChain.up(load_inventory(inventory))
        assert hosts.snapshot() == before
        # The check bypassed: dut1 makes the namespace, then fails on the host's own to_napt.
        sh("ip", "netns", "del", napt)
        sh("ip", "-n", dut2, "link", "del", "xlatbench64")
        sh("ip", "-n", dut2, "route", "del", "192.0.2.0/24", "dev", "lo")
        sh("ip", "-n", server, "address", "del", "203.0.113.56/32", "dev", "lo")
        before = hosts.snapshot()
        import xlatbench.setups.testbed.preflight as preflight

        monkeypatch.setattr(preflight, "collision_problems", lambda *_: [])
        with pytest.raises(RuntimeError, match="ip link add to_napt"):
            TestbedChain.up(load_inventory(inventory))
        assert hosts.snapshot() == before
        assert "theirs" in sh("ip", "-n", dut1, "-br", "link")
    finally:
        sh("ip", "netns", "del", napt, check=False)


def test_a_dut_lost_inside_a_trial_voids_it_and_down_names_it_unreachable(hosts: SshHosts, inventory: Path,
                                                                        tmp_path: Path) -> None:
    """dut2's sshd (and its sessions) killed while a trial runs: the measurer voids the trial (HostLost naming
    dut2, never a figure or DUT loss) and the chain's teardown says per host what it undid and that it could
    not reach dut2; with dut2 back, `testbed down` cleans it. The same loss inside a campaign (one line
    naming dut2, a trial-failed record, the resume refused until `testbed down`, then measuring that trial)
    is test_done_when.py's."""
    before = hosts.snapshot()
    with TestbedChain.up(load_inventory(inventory)) as chain:
        killer = threading.Timer(1.0, hosts.kill_sshd, ("dut2",))
        killer.start()
        with pytest.raises(HostLost, match=r"^dut2 \(root@[^)]*\): .* during the trial: the trial is void"):
            ChainMeasurer(chain, TesterOptions(threads=1, ports_per_thread=4)).measure(2.5, 1000.0)
        killer.join()
        report = chain.down()
        assert set(report["dut2"]) == {"unreachable"} and len(report["dut1"]["undone"]) > 5
        hosts.restart_sshd("dut2")
    assert main(["testbed", "down", str(inventory)]) == 0
    assert_as_before(hosts, before, tmp_path)


def test_down_restores_every_sysctl_and_spares_a_stranger_in_a_stale_pid_file(
        hosts: SshHosts, inventory: Path, tmp_path: Path) -> None:
    """MAP-T (dut1's client-side NIC moves into the napt namespace and back): an unrelated interface's
    forwarding=1 on dut2 and non-default sysctls of the moving NIC come back; a tayga pid file that now
    names an unrelated `sleep` (pid reuse) does not make down kill it; every conf sysctl of every
    interface, address, route, link and rule is as before."""
    inventory.write_text(inventory.read_text().replace('topology = "464xlat"', 'topology = "mapt"'))
    dut1, dut2 = hosts.netns("dut1"), hosts.netns("dut2")
    sh("ip", "-n", dut2, "link", "add", "other", "type", "veth", "peer", "name", "other2")
    for key in ("net.ipv4.conf.other.forwarding=1", "net.ipv6.conf.other.forwarding=1"):
        sh("ip", "netns", "exec", dut2, "sysctl", "-qw", key)
    for key in ("net.ipv4.conf.eth1.rp_filter=2", "net.ipv6.conf.eth1.accept_ra=0",
                "net.ipv6.conf.eth1.hop_limit=33"):
        sh("ip", "netns", "exec", dut1, "sysctl", "-qw", key)
    before = hosts.snapshot()
    assert "net.ipv4.conf.other.forwarding = 1" in before["dut2"]
    assert "net.ipv4.conf.eth1.rp_filter = 2" in before["dut1"]
    stranger = subprocess.Popen(["ip", "netns", "exec", dut1, "sleep", "300"], start_new_session=True)
    try:
        with TestbedChain.up(load_inventory(inventory)) as chain:
            assert "net.ipv4.conf.other.forwarding = 1" in hosts.snapshot()["dut2"]
            pids = chain.component_pids()
            os.kill(pids["tayga (dut1)"], signal.SIGKILL)
            pidfile = next(tmp_path.glob("run/*/dut1/dut1-tayga.pid"))
            pidfile.write_text(f"{stranger.pid}\n")
            report = chain.down()
            assert not report["dut1"]["failed"] and not report["dut2"]["failed"], report
            assert any(line.startswith("ok=0; while read -r f v") for line in report["dut2"]["undone"])
        assert stranger.poll() is None, "down killed a process it did not start"
        assert Path(f"/proc/{stranger.pid}/comm").read_text().strip() == "sleep"
        assert_as_before(hosts, before, tmp_path)
    finally:
        stranger.kill()
        stranger.wait()


def test_xlatbench_trial_on_a_testbed_at_the_default_core_count(hosts: SshHosts, inventory: Path,
                                                                 tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`xlatbench trial --dut testbed --inventory INV` at its default --cores 1: the testbed's own placement
    (hotplug: CPU 0 online on each DUT host) is used and recorded, and the hosts are as before after it."""
    before = hosts.snapshot()
    assert main(["trial", "--dut", "testbed", "--inventory", str(inventory), "--rate", "1000",
                 "--duration", "1", "--threads", "1", "--ports-per-thread", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trial"]["sent"] == 1000 and out["verdict"] == "pass", out["trial"]
    assert out["cores"]["placement"] == "own-hosts"
    applied = out["cores"]["applied"]
    assert applied["dut1"]["online"] == [0] and applied["dut2"]["online"] == [0]
    assert out["dut"]["world"] == "real testbed"
    assert_as_before(hosts, before, tmp_path)
