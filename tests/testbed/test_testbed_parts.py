"""The testbed's parts without SSH: hotplug on a fake sysfs tree, the idle sampler on a fake /proc/stat,
the undo rules, and the dry-run of the paper's MAP-T testbed."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import threading
import time
import tomllib
from pathlib import Path

import pytest
from sshnet import fake_irqs, fake_sysfs, irq_affinities, online_states

from xlatbench.setups.steps import Cmd, Daemon, WriteFile, cmd
from xlatbench.setups.testbed.bringup import plan
from xlatbench.setups.testbed.cli import dry_run
from xlatbench.setups.testbed.hotplug import Hotplug, HotplugError
from xlatbench.setups.testbed.inventory import load_inventory
from xlatbench.setups.testbed.irqs import IrqAffinity, IrqError, SavedIrqs
from xlatbench.setups.testbed.knot import knot_xdp_refusal
from xlatbench.setups.testbed.machine import TestbedError
from xlatbench.setups.testbed.preflight import xdp_problems, xdp_report
from xlatbench.setups.testbed.remote_idle import IdleSampler
from xlatbench.setups.testbed.ssh import CONTROL_PREFIX, LocalShell, sweep_control_dirs
from xlatbench.setups.testbed.undo import (
    UndoError,
    XdpRelease,
    detach_xdp_line,
    down_script,
    record_script,
    undo_line,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "paper-mapt.toml"


def test_hotplug_core_counts_and_undo(tmp_path: Path) -> None:
    base = fake_sysfs(tmp_path / "sys", 4)
    statefile = str(tmp_path / "state" / "undo.sh")
    hotplug = Hotplug("dut1", (1, 2, 3), str(tmp_path / "sys"), statefile)
    shell = LocalShell()
    applied = hotplug.apply(shell, [0, 1])
    assert applied["offline"] == [2, 3]
    assert applied["online"] == [0, 1]
    assert online_states(base, 4) == ["1", "0", "0"]
    assert hotplug.apply(shell, [0, 1, 2, 3])["online"] == [0, 1, 2, 3]
    hotplug.apply(shell, [0])
    assert online_states(base, 4) == ["0", "0", "0"]
    # A controller killed here leaves the state file: `down` brings every CPU back and deletes it.
    shell.capture("dut1", down_script(statefile))
    assert online_states(base, 4) == ["1", "1", "1"]
    assert not Path(statefile).exists()


@pytest.mark.parametrize(("allowed", "keep", "message"), [
    ((1, 2, 3), [1, 2, 3], "CPU 0 cannot go offline"),
    ((2, 3), [0], "CPU 1 would go offline but is not in hosts.dut1.offline_cpus"),
    ((1, 2, 3), [0, 7], "CPU 7 does not exist"),
])
def test_hotplug_refuses(tmp_path: Path, allowed: tuple[int, ...], keep: list[int], message: str) -> None:
    base = fake_sysfs(tmp_path / "sys", 4)
    hotplug = Hotplug("dut1", allowed, str(tmp_path / "sys"), str(tmp_path / "undo.sh"))
    with pytest.raises(HotplugError, match=message):
        hotplug.apply(LocalShell(), keep)
    assert online_states(base, 4) == ["1", "1", "1"]  # nothing changed


def test_hotplug_reads_back_what_the_host_really_has_online(tmp_path: Path) -> None:
    """CPU 3 is present, outside offline_cpus and already offline: 4 cores would really be 3, refused."""
    base = fake_sysfs(tmp_path / "sys", 4)
    (base / "cpu3" / "online").write_text("0\n")
    hotplug = Hotplug("dut1", (1, 2), str(tmp_path / "sys"), str(tmp_path / "undo.sh"))
    with pytest.raises(HotplugError, match=r"dut1: asked for CPUs \[0, 1, 2, 3\] online, the host reads back "
                                           r"\[0, 1, 2\]: CPU \[3\] stayed offline; bring the CPUs outside"):
        hotplug.apply(LocalShell(), [0, 1, 2, 3])
    (base / "cpu3" / "online").write_text("1\n")  # the host's CPU 3 back, as the message says
    assert hotplug.apply(LocalShell(), [0, 1, 2, 3])["online"] == [0, 1, 2, 3]


def test_nic_irqs_saved_spread_after_each_core_change_and_restored_by_down(tmp_path: Path) -> None:
    """Known answers on fake trees: eth1 has IRQs 40-41 (msi_irqs), eth2 IRQ 50 (found by name in
    /proc/interrupts), all on 0-3; IRQ 60 is a kernel-managed queue (its affinity file refuses writes)."""
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    base = fake_sysfs(sysfs, 4)
    fake_irqs(sysfs, proc, {"eth1": [40, 41]})
    fake_irqs(tmp_path / "elsewhere", proc, {"other": [50]})
    (proc / "irq" / "60").mkdir()
    (proc / "irq" / "60" / "smp_affinity_list").symlink_to("/proc/sys/kernel/ostype")  # read-only
    (proc / "interrupts").write_text("           CPU0       CPU1\n 50:  1  2  PCI-MSI 1-edge  eth2\n"
                                     " 60:  1  2  PCI-MSI 2-edge  eth2-TxRx-0\n"
                                     " 70:  1  2  PCI-MSI 3-edge  eth22\n")
    statefile = str(tmp_path / "state" / "undo.sh")
    shell = LocalShell()
    irqs = IrqAffinity("dut1", ("eth1", "eth2"), statefile, str(sysfs), str(proc))
    hotplug = Hotplug("dut1", (1, 2, 3), str(sysfs), statefile)
    saved = irqs.save(shell)
    assert saved.saved == {"eth1": {40: "0-3", 41: "0-3"}, "eth2": {50: "0-3", 60: "Linux"}}
    assert saved.fixed == [60]
    online = hotplug.apply(shell, [0, 1])["online"]
    record = irqs.spread(shell, saved, online)
    assert record["affinity"] == {"eth1": {"40": "0", "41": "1"}, "eth2": {"50": "0", "60": "Linux"}}
    assert record["before_sweep"]["eth1"] == {"40": "0-3", "41": "0-3"} and record["kernel_managed"] == [60]
    for n in (40, 41, 50):  # what offlining does to a non-managed IRQ: it ends on CPU 0
        (proc / "irq" / str(n) / "smp_affinity_list").write_text("0\n")
    online = hotplug.apply(shell, [0, 1, 2])["online"]
    assert irqs.spread(shell, saved, online)["affinity"]["eth1"] == {"40": "0", "41": "1"}
    assert irq_affinities(proc)["50"] == "2"
    shell.capture("dut1", down_script(statefile))  # CPUs back online first, then each IRQ as found
    assert online_states(base, 4) == ["1", "1", "1"]
    restored = {k: v for k, v in irq_affinities(proc).items() if k != "60"}
    assert restored == {"40": "0-3", "41": "0-3", "50": "0-3"}
    assert not Path(statefile).exists()
    # An IRQ that does not take its CPU (irqbalance moved it, the kernel refused) is refused, not recorded.
    stuck = IrqAffinity("dut1", ("eth1",), statefile, str(sysfs), str(proc))
    (proc / "irq" / "41" / "smp_affinity_list").unlink()
    (proc / "irq" / "41" / "smp_affinity_list").symlink_to("/proc/sys/kernel/ostype")
    with pytest.raises(IrqError, match="dut1: IRQ 41 was set to CPU 1 but reads back Linux"):
        stuck.spread(shell, SavedIrqs({"eth1": {40: "0-3", 41: "0-3"}}), [0, 1])


def fake_virtio_nic(sysfs: Path, iface: str, pci: str, virtio: str, vectors: list[int]) -> None:
    """A virtio NIC as sysfs shows it: class/net/IF is the virtioN device's net/IF, whose `device` is the
    virtioN device; the MSI-X vectors (`msi_irqs`) belong to its PCI parent, not to it."""
    parent = sysfs / "devices" / "pci0000:00" / pci
    (parent / virtio / "net" / iface).mkdir(parents=True)
    (parent / virtio / "net" / iface / "device").symlink_to(f"../../../{virtio}")
    (parent / "msi_irqs").mkdir()
    for n in vectors:
        (parent / "msi_irqs" / str(n)).write_text("msix\n")
    (sysfs / "class" / "net").mkdir(parents=True, exist_ok=True)
    (sysfs / "class" / "net" / iface).symlink_to(f"../../devices/pci0000:00/{pci}/{virtio}/net/{iface}")


def test_virtio_nic_irqs_are_its_queues_named_in_proc_interrupts(tmp_path: Path) -> None:
    """Known answer on a fake tree: eth0 is virtio2 under PCI 0000:00:03.0, whose vectors are 37 (config),
    38 (virtio2-input.0), 39 (virtio2-output.0), 40/41 (the second queue pair); virtio20's queue (42) and
    another device's (43) are not eth0's. eth1 (msi_irqs of its own) is found as before."""
    sysfs, proc = tmp_path / "sys", tmp_path / "proc"
    fake_sysfs(sysfs, 4)
    fake_irqs(sysfs, proc, {"eth1": [50]})
    fake_virtio_nic(sysfs, "eth0", "0000:00:03.0", "virtio2", [37, 38, 39, 40, 41])
    names = {37: "virtio2-config", 38: "virtio2-input.0", 39: "virtio2-output.0", 40: "virtio2-input.1",
             41: "virtio2-output.1", 42: "virtio20-input.0", 43: "virtio1-req.0"}
    lines = ["           CPU0       CPU1"]
    for n, name in names.items():
        lines.append(f" {n}:  0  35664  PCI-MSIX-0000:00:03.0   {n - 37}-edge      {name}")
        (proc / "irq" / str(n)).mkdir(parents=True)
        (proc / "irq" / str(n) / "smp_affinity_list").write_text("0-3\n")
    (proc / "interrupts").write_text("\n".join(lines) + "\n")
    statefile = str(tmp_path / "state" / "undo.sh")
    shell = LocalShell()
    irqs = IrqAffinity("dut1", ("eth0", "eth1"), statefile, str(sysfs), str(proc))
    saved = irqs.save(shell)
    assert saved.saved == {"eth0": {38: "0-3", 39: "0-3", 40: "0-3", 41: "0-3"}, "eth1": {50: "0-3"}}
    record = irqs.spread(shell, saved, [0, 1])
    assert record["affinity"] == {"eth0": {"38": "0", "39": "1", "40": "0", "41": "1"}, "eth1": {"50": "0"}}
    shell.capture("dut1", down_script(statefile))
    assert set(irq_affinities(proc).values()) == {"0-3"}  # the queues as found; the others never touched


def _ticking_stat(path: Path, stop: threading.Event) -> None:
    """A /proc/stat whose cpu0 spends 3 of 4 ticks in user time and 1 idle, cpu1 4 of 4 idle."""
    ticks = 0
    while not stop.is_set():
        ticks += 1
        text = (f"cpu  {3 * ticks} 0 0 {5 * ticks} 0 0 0 0 0 0\n"
                f"cpu0 {3 * ticks} 0 0 {ticks} 0 0 0 0 0 0\n"
                f"cpu1 0 0 0 {4 * ticks} 0 0 0 0 0 0\nintr 0\n")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        time.sleep(0.05)


def test_idle_sampler_known_answer(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stop = threading.Event()
    writer = threading.Thread(target=_ticking_stat, args=(stat, stop), daemon=True)
    writer.start()
    time.sleep(0.2)
    sampler = IdleSampler("dut1", str(tmp_path / "run"), str(tmp_path / "undo.sh"), str(stat), interval_s=0.5)
    shell = LocalShell()
    try:
        sampler.start(shell)
        time.sleep(2.2)
        samples = sampler.collect(shell, clock_offset_s=0.25)
    finally:
        stop.set()
        writer.join()
    assert len(samples) >= 3
    for sample in samples:
        assert sample["cpus"]["0"]["usr"] == 75.0 and sample["cpus"]["0"]["idle"] == 25.0
        assert sample["cpus"]["1"]["idle"] == 100.0
        assert sample["cpus"]["all"]["idle"] == 62.5
        assert sample["t_controller"] == round(sample["t_host"] - 0.25, 3)
    assert not Path(sampler.pidfile).exists() and not Path(sampler.data).exists()


def test_each_idle_capture_measures_the_clock_offsets_again(tmp_path: Path) -> None:
    """Known answer: after a preflight that found every clock in step, dut1's clock runs 5 s ahead and dut2's
    2 s behind (a fake `date` on each host's PATH): start_idle measures the offsets again, and the samples
    it collects land on the controller's clock."""
    import shutil

    from xlatbench.setups.testbed.chain import TestbedChain
    from xlatbench.setups.testbed.inventory import ROLES, parse_inventory

    real_date = shutil.which("date")
    for role, skew in {"dut1": 5.0, "dut2": -2.0, "client": 0.0}.items():
        fake = tmp_path / "bin" / role / "date"
        fake.parent.mkdir(parents=True)
        fake.write_text(f"#!/bin/sh\nawk -v t=\"$({real_date} +%s.%N)\" 'BEGIN {{ printf \"%.6f\\n\", "
                        f"t + {skew} }}'\n")
        fake.chmod(0o755)

    class SkewedShell(LocalShell):
        """Each host's shell finds its own `date` first."""

        def prefix(self, host: str) -> str:
            return f"export PATH={tmp_path}/bin/{host}:$PATH; "

        def argv(self, host: str, script: str) -> list[str]:
            return ["sh", "-c", self.prefix(host) + script]

        def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None):  # type: ignore[no-untyped-def]
            return super().capture(host, self.prefix(host) + script, check, stdin)

    data = tomllib.loads(EXAMPLE.read_text())
    data["rundir"] = str(tmp_path / "run")
    inv = parse_inventory(data, "lab.toml")
    shell = SkewedShell()
    chain = TestbedChain(inv, shell, {"hosts": {r: {"clock": {"offset_s": 0.0}} for r in ROLES}})  # type: ignore[arg-type]
    try:
        chain.start_idle()
        time.sleep(2.3)
        idle = chain.collect_idle()
    finally:
        for role in ("dut1", "dut2"):
            shell.capture(role, down_script(inv.statefile(role)))
    clocks = {r: chain.preflight["hosts"][r]["clock"] for r in ("dut1", "dut2", "client")}
    assert abs(clocks["dut1"]["offset_s"] - 5.0) < 0.05 and abs(clocks["dut2"]["offset_s"] + 2.0) < 0.05
    assert abs(clocks["client"]["offset_s"]) < 0.05
    assert all(c["measured"] == "at the last idle capture" for c in clocks.values())
    now = time.time()
    for dut, skew in (("dut1", 5.0), ("dut2", -2.0)):
        assert len(idle[dut]) >= 1
        for sample in idle[dut]:
            assert abs(sample["t_host"] - sample["t_controller"] - skew) < 0.06
            assert -4.0 < sample["t_controller"] - now <= 0.1


def test_undo_rules() -> None:
    assert undo_line(cmd("ip address add 10.0.0.1/24 dev eth1")) == "ip address del 10.0.0.1/24 dev eth1"
    assert undo_line(cmd("ip -6 route add 64:ff9b::/96 via 2001:db8:6::1")) == \
        "ip -6 route del 64:ff9b::/96 via 2001:db8:6::1"
    assert undo_line(cmd("jool_mapt instance add 'CE 11b' --netfilter --dmr 64:ff9b::/96")) == \
        "jool_mapt instance remove 'CE 11b'"
    assert undo_line(cmd("iptables -t nat -A POSTROUTING -s 192.168.0.0/24 -j SNAT --to-source 1.2.3.4")) == \
        "iptables -t nat -D POSTROUTING -s 192.168.0.0/24 -j SNAT --to-source 1.2.3.4"
    assert undo_line(cmd("ip netns exec napt sysctl -w net.ipv4.conf.all.forwarding=1")) is None
    assert "sysctl -n net.ipv4.conf.all.forwarding" in str(
        record_script(cmd("sysctl -w net.ipv4.conf.all.forwarding=1"), "/tmp/s"))
    with pytest.raises(UndoError, match="no undo known for `tc qdisc add dev eth1 root tbf`"):
        undo_line(Cmd(("tc", "qdisc", "add", "dev", "eth1", "root", "tbf")))


def test_sysctl_previous_value_is_restored(tmp_path: Path) -> None:
    """The recorded line carries the value read before the change (here a fake `sysctl` on PATH)."""
    value = tmp_path / "value"
    value.write_text("0")
    fake = tmp_path / "bin" / "sysctl"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = -n ]; then cat {value}; "
                    f"else echo \"${{2#*=}}\" > {value}; fi\n")
    fake.chmod(0o755)
    env_path = f"PATH={fake.parent}:$PATH"
    statefile = str(tmp_path / "undo.sh")
    record = record_script(cmd("sysctl -w net.ipv4.conf.all.forwarding=1"), statefile)
    shell = LocalShell()
    shell.capture("h", f"export {env_path}; {record} && sysctl -w net.ipv4.conf.all.forwarding=1")
    assert value.read_text().strip() == "1"
    shell.capture("h", f"export {env_path}; {down_script(statefile)}")
    assert value.read_text().strip() == "0"


@pytest.mark.parametrize("topology", ["464xlat", "mapt"])
def test_the_plan_leaves_a_hosts_ipv4_default_route_alone(topology: str) -> None:
    """tayga's CLAT/CE rule in emulation sends all IPv4 into its tun (`default dev TUN`); on a testbed, whose
    hosts have a default route of their own, only the server's test network goes there."""
    from xlatbench.setups.testbed.bringup import plan
    from xlatbench.setups.testbed.inventory import parse_inventory
    from xlatbench.setups.testbed.preflight import planned_objects

    data = tomllib.loads(EXAMPLE.read_text())
    data["topology"] = topology
    for dut in ("dut1", "dut2"):
        data["hosts"][dut]["backend"] = "tayga"
    steps = plan(parse_inventory(data, "lab.toml"))
    lines = {role: [s.shell() for s in host_steps] for role, host_steps in steps.items()}
    assert "ip route add 203.0.113.0/24 dev xlatbench64" in lines["dut1"]
    assert not [line for role in lines for line in lines[role] if line.startswith("ip route add default")]
    assert ("route", "-4 default") not in {o[:2] for role in steps for o in planned_objects(steps[role])}


def test_dry_run_prints_the_papers_mapt_ce() -> None:
    out = io.StringIO()
    dry_run(load_inventory(EXAMPLE), out)
    text = out.getvalue()
    dut1 = text.split("### host dut1")[1].split("### host dut2")[0]
    for line in (
        "ip netns add napt",
        "ip netns exec napt iptables -t nat -A POSTROUTING -s 192.168.0.0/24 -o to_global -p udp -j SNAT "
        "--to-source 192.0.2.8:55296-57343",
        "modprobe jool_mapt",
        "jool_mapt instance add 'CE 11b' --netfilter --dmr 64:ff9b::/96",
        "jool_mapt -i 'CE 11b' global update end-user-ipv6-prefix 2001:db8:ce:11b::/64",
        "jool_mapt -i 'CE 11b' global update bmr 2001:db8:ce::/51 192.0.2.0/24 13 0",
        "jool_mapt -i 'CE 11b' global update map-t-type CE",
        "echo 0 > /sys/devices/system/cpu/cpu7/online",
        "grep '\"'\"'^cpu'\"'\"' /proc/stat",
        "jool_mapt instance remove 'CE 11b'",
        "ip netns del napt",
    ):
        assert line in dut1, line
    assert "knotd -c /run/xlatbench-testbed/paper/server/knot/knot.conf" in text
    trial = text.split("## each trial")[1].split("## teardown")[0]
    assert "toward 203.0.113.56, UDP sockets from 192.168.0.4" in trial
    assert "exec /opt/xlatbench/build/dnsperf/xlatperf OPTIONS... /run/xlatbench-testbed/paper/client/" \
        "trial-ID.json" in trial
    assert "jool_mapt -i BR fmrt add 2001:db8:ce::/51 192.0.2.0/24 13 0" in text


def _facts(**extra: str) -> dict[str, str]:
    facts = {"knotd": "knotd 3.2.6", "kdig": "/usr/bin/kdig", "tester": "xlatperf 0.1.0",
             "jool_tools": "4.1.9.0", "cpus_present": "0-7"}
    for module in ("jool_siit", "jool", "jool_mapt"):
        facts[f"loaded_{module}"] = facts[f"installed_{module}"] = "absent"
    return facts | extra


@pytest.mark.parametrize(("extra", "problem"), [
    ({}, "dut1: MAP-T needs Jool >= 4.2 (jool_mapt), this host has no jool_mapt module (jool tools: 4.1.9"),
    ({"installed_jool_mapt": "4.1.9"}, "this host has 4.1.9: install Jool 4.2"),
    ({"loaded_jool_mapt": "4.2.0-rc2", "jool_tools": "4.2.0.0"}, None),
])
def test_preflight_says_mapt_needs_jool_42(extra: dict[str, str], problem: str | None) -> None:
    from xlatbench.setups.testbed.preflight import host_problems

    inv = load_inventory(EXAMPLE)
    problems, _ = host_problems(inv, "dut1", _facts(**extra), {
        "enp5s0f0": {"present": True, "unexpected_addresses": [], "offloads": {}},
        "enp5s0f1": {"present": True, "unexpected_addresses": [], "offloads": {}}})
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_preflight_refuses_another_tester_version() -> None:
    from xlatbench.setups.testbed.preflight import host_problems, local_tester_version

    local = local_tester_version()
    assert local is not None and local.startswith("xlatperf ")
    inv = load_inventory(EXAMPLE)
    iface = {"enp5s0f0": {"present": True, "unexpected_addresses": [], "offloads": {}}}
    assert host_problems(inv, "client", _facts(tester=local), iface)[0] == []
    problems, _ = host_problems(inv, "client", _facts(tester="xlatperf 0.0.1"), iface)
    assert len(problems) == 1 and f"is 'xlatperf 0.0.1', the controller's is {local!r}" in problems[0]
    problems, _ = host_problems(inv, "client", _facts(tester="absent"), iface)
    assert "tester /opt/xlatbench/build/dnsperf/xlatperf not found" in problems[0]


def test_an_undo_line_enters_the_state_file_only_after_its_step_succeeded(tmp_path: Path) -> None:
    """A step that fails (its object was there already) leaves no undo line, so a rollback cannot delete
    what the host had; a step cut off before its commit (kill -9) leaves a pending line that down runs."""
    from xlatbench.setups.testbed.undo import guarded, pending, pending_file

    statefile = str(tmp_path / "state" / "undo.sh")
    shell = LocalShell()
    blocker = tmp_path / "a-file"
    blocker.write_text("the host's own\n")
    failing = Cmd(("mkdir", "-p", f"{blocker}/sub"))
    assert shell.capture("h", guarded(shlex.join(failing.argv), failing, statefile), check=False).returncode
    assert not Path(statefile).exists() and not Path(pending_file(statefile)).exists()
    made = tmp_path / "made"
    step = Cmd(("mkdir", "-p", str(made)))
    shell.capture("h", guarded(shlex.join(step.argv), step, statefile))
    assert Path(statefile).read_text() == f"rm -rf {made}\n" and not Path(pending_file(statefile)).exists()
    # Killed between the step and its commit: only the pending file knows; `pending` and `down` see it.
    cut = tmp_path / "cut"
    record = record_script(Cmd(("mkdir", "-p", str(cut))), statefile)
    shell.capture("h", f"{record} && mkdir -p {cut}")
    assert f"rm -rf {cut}" in shell.capture("h", pending(statefile)).stdout
    shell.capture("h", down_script(statefile))
    assert not made.exists() and not cut.exists() and blocker.read_text() == "the host's own\n"
    assert not Path(statefile).exists() and not Path(pending_file(statefile)).exists()


def test_preflight_predicts_what_up_needs() -> None:
    """kdig missing on the server, a sysfs_root pointing nowhere, Jool tools missing or of another version
    than the module: each refused in one line before `up` (which would wait 34 s, or fail later)."""
    from xlatbench.setups.testbed.preflight import host_problems

    inv = load_inventory(EXAMPLE)
    iface = {"present": True, "unexpected_addresses": [], "offloads": {}}
    problems, _ = host_problems(inv, "server", _facts(kdig="absent"), {"enp5s0f0": iface})
    assert problems == ["server: kdig not found (up waits for Knot to answer with it): apt-get install "
                        "knot-dnsutils"]
    duts = {"enp5s0f0": iface, "enp5s0f1": iface}
    mapt = _facts(loaded_jool_mapt="4.2.0", cpus_present="")
    problems, _ = host_problems(inv, "dut1", mapt, duts)
    assert "dut1: Jool tools 4.1.9.0 and module 4.2.0 differ" in problems[0]
    assert problems[1].startswith("dut1: no CPU list at /sys/devices/system/cpu/present")
    problems, _ = host_problems(inv, "dut1", _facts(loaded_jool_mapt="4.2.0", jool_tools="4.2.0.0",
                                                    cpus_present="0-7"), duts)
    assert problems == []
    problems, _ = host_problems(inv, "dut1", _facts(loaded_jool_mapt="4.2.0", jool_tools="absent",
                                                    cpus_present="0-7"), duts)
    assert problems[0].startswith("dut1: Jool's user-space tools (jool, jool_siit) not found")


def test_a_bad_ssh_option_is_blamed_on_ssh_options_not_on_a_host() -> None:
    from xlatbench.setups.testbed.preflight import check, summary_lines
    from xlatbench.setups.transports import StepError

    class Refusing:
        def capture(self, host: str, script: str, check: bool = True, stdin: str | None = None) -> None:
            raise StepError(f"{host}: ssh {host}.lab failed (exit 255): command-line: line 0: Bad "
                            "configuration option: bogus")

    inv = load_inventory(EXAMPLE)
    result = check(inv, Refusing(), {role: [] for role in inv.hosts})  # type: ignore[arg-type]
    assert not result["ok"]
    assert result["problems"] == [f"every host: ssh failed (command-line: line 0: Bad configuration option: "
                                  f"bogus): the same for all four, so check ssh_options in {EXAMPLE}"]
    assert summary_lines(result)[0].startswith("client  UNREACHABLE: not reached over SSH")


def test_rx_flow_hash_refused_or_applied_and_undone(tmp_path: Path) -> None:
    """A NIC hashing UDP on addresses only: refused with the paper's command (rx_flow_hash = "check"), or
    set to sdfn and put back by down (apply); a fake `ethtool` on PATH holds the NIC's settings."""
    from xlatbench.setups.testbed.inventory import parse_inventory
    from xlatbench.setups.testbed.preflight import hash_letters, rx_hash_problems, rx_hash_script

    out = ("IP SA;IP DA;L4 bytes 0 & 1 [TCP/UDP src port];L4 bytes 2 & 3 [TCP/UDP dst port];")
    assert hash_letters(out) == "sdfn" and hash_letters("IP SA;IP DA;") == "sd" and hash_letters("") is None
    data = tomllib.loads(EXAMPLE.read_text())
    inv = parse_inventory(data, "lab.toml")
    facts = {"if_enp5s0f0_rxhash_udp4": "IP SA;IP DA;", "if_enp5s0f0_rxhash_udp6": out,
             "if_enp5s0f1_rxhash_udp4": "", "if_enp5s0f1_rxhash_udp6": ""}
    problems, found = rx_hash_problems(inv, "dut1", facts)
    assert problems == ["dut1: enp5s0f0 hashes udp4 on 'sd' (no ports: one queue per address pair): run "
                        "`ethtool -N enp5s0f0 rx-flow-hash udp4 sdfn` as the paper did, or set rx_flow_hash "
                        "= \"apply\" in lab.toml"]
    assert found["enp5s0f1"] == {"udp4": None, "udp6": None}  # a veth says nothing: nothing to do
    applying = parse_inventory({**data, "rx_flow_hash": "apply"}, "lab.toml")
    assert rx_hash_problems(applying, "dut1", facts)[0] == []
    nic = tmp_path / "nic"
    nic.mkdir()
    (nic / "enp5s0f0-udp4").write_text("sd")
    fake = tmp_path / "bin" / "ethtool"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\n[ "$1" = -N ] && printf %s "$5" > {nic}/"$2"-"$4"\n')
    fake.chmod(0o755)
    statefile = str(tmp_path / "state" / "undo.sh")
    shell = LocalShell()
    path = f"export PATH={fake.parent}:$PATH; "
    shell.capture("dut1", path + "set -e\n" + rx_hash_script(found, statefile))
    assert (nic / "enp5s0f0-udp4").read_text() == "sdfn" and not (nic / "enp5s0f0-udp6").exists()
    assert Path(statefile).read_text() == "ethtool -N enp5s0f0 rx-flow-hash udp4 sd\n"
    shell.capture("dut1", path + down_script(statefile))
    assert (nic / "enp5s0f0-udp4").read_text() == "sd"


def test_a_killed_commands_ssh_directory_is_removed_by_the_next_one(tmp_path: Path) -> None:
    """kill -9 leaves a command's master-socket directory; the next transport removes those whose command no
    longer runs, and nothing else."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = tmp_path / f"{CONTROL_PREFIX}{gone.pid}-abc"
    alive = tmp_path / f"{CONTROL_PREFIX}{os.getpid()}-def"
    unknown = tmp_path / f"{CONTROL_PREFIX}oldstyle"
    for path in (dead, alive, unknown):
        path.mkdir()
    (dead / "0123abcd").write_text("")  # a master's socket path
    assert sweep_control_dirs(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and unknown.exists()


def bpf_example(tmp_path: Path) -> Path:
    """The paper's MAP-T inventory with the bpf backend on both DUTs (its BR computes Knot XDP's checksum)."""
    path = tmp_path / "bpf.toml"
    path.write_text(EXAMPLE.read_text().replace('backend = "jool"', 'backend = "bpf"'))
    return path


def test_xdp_users_are_journalled_before_they_start(tmp_path: Path) -> None:
    """tester io xdp: the client's plan ends with the journal step of the tester's reply filter; server io
    xdp: knot.conf listens in XDP mode on the server's test NIC and the journal step of Knot's program comes
    just before knotd. Their undo lines detach that program by name, nothing else."""
    inventory = load_inventory(bpf_example(tmp_path))
    steps = plan(inventory, tester_io="xdp", server_io="xdp")
    release = steps["client"][-1]
    assert release == XdpRelease("enp5s0f0", "xlb_reply_filt", "the tester (--io xdp)")
    server = steps["server"]
    knotd = next(i for i, s in enumerate(server) if isinstance(s, Daemon))
    assert server[knotd - 1] == XdpRelease("enp5s0f0", "xdp_redirect_dn", "knotd in XDP mode")
    conf = next(s.text for s in server if isinstance(s, WriteFile) and s.path.endswith("knot.conf"))
    assert "xdp:\n    listen: [ enp5s0f0@53 ]" in conf and "listen: [ 203.0.113.56@53 ]" in conf
    assert undo_line(release) == detach_xdp_line("enp5s0f0", "xlb_reply_filt")
    assert record_script(release, "/s/undo.sh") is not None
    plain = plan(inventory)
    assert not any(isinstance(s, XdpRelease) for role in plain.values() for s in role)
    assert "xdp:" not in next(s.text for s in plain["server"] if isinstance(s, WriteFile)
                              and s.path.endswith("knot.conf"))


def test_knot_xdp_is_refused_where_a_testbed_translator_drops_zero_checksums(tmp_path: Path) -> None:
    with pytest.raises(TestbedError, match=r"jool drops such a datagram .* \(dut2 is the br\): .* "
                                           r"hosts\.dut2\.backend = \"bpf\""):
        plan(load_inventory(EXAMPLE), server_io="xdp")
    assert knot_xdp_refusal(load_inventory(bpf_example(tmp_path))) is None


def test_xdp_detach_line_removes_only_its_program(tmp_path: Path) -> None:
    """The undo line against a fake `ip`: it detaches a program of its name (both modes tried) and leaves
    another program alone."""
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls"
    attached = tmp_path / "attached"
    (fake / "ip").write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n"
                             f"case \"$*\" in *' off'*) rm -f {attached};; "
                             f"*-j*) cat {attached} 2>/dev/null || echo '[{{}}]';; esac\n")
    (fake / "ip").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    line = detach_xdp_line("eth1", "xlb_reply_filt")
    ours = '[{"ifname":"eth1","xdp":{"mode":1,"prog":{"id":7,"name":"xlb_reply_filt"}}}]'
    (tmp_path / "attached").write_text(ours)
    assert subprocess.run(["sh", "-c", line], env=env, check=False).returncode == 0
    assert "link set dev eth1 xdpgeneric off" in calls.read_text()
    calls.unlink()
    (tmp_path / "attached").write_text(ours.replace("xlb_reply_filt", "xdp_pass"))
    assert subprocess.run(["sh", "-c", line], env=env, check=False).returncode == 0
    assert " off" not in calls.read_text()  # someone else's program stays


@pytest.mark.parametrize(("facts", "problem", "warning"), [
    ({"xdp_uid": "0", "xdp_kernel": "CONFIG_XDP_SOCKETS=y;"}, None, None),
    ({"xdp_uid": "1000", "xdp_kernel": "CONFIG_XDP_SOCKETS=y;"}, "client: the tester (--io xdp) need root",
     None),
    ({"xdp_uid": "0", "xdp_kernel": "# CONFIG_XDP_SOCKETS is not set;"}, "the kernel has no AF_XDP sockets",
     None),
    ({"xdp_uid": "0", "xdp_kernel": ""}, None, "could not read whether the kernel has AF_XDP"),
    ({"xdp_uid": "0", "xdp_kernel": "kallsyms:xsk_create;",
      "xdp_link_eth1": '[{"ifname":"eth1","xdp":{"mode":2,"prog":{"id":9,"name":"xdp_pass"}}}]'},
     "client: eth1 already carries an XDP program (xdp_pass (id 9, generic) on eth1), and the tester", None),
])
def test_preflight_checks_an_xdp_host(facts: dict[str, str], problem: str | None,
                                     warning: str | None) -> None:
    uses = [XdpRelease("eth1", "xlb_reply_filt", "the tester (--io xdp)")]
    report = xdp_report(uses, facts, {"eth1": {"present": True, "driver": "veth"}})
    assert report is not None and report["interfaces"]["eth1"]["expected_mode"] == "native"
    problems, warnings = xdp_problems("client", report)
    assert len(problems) == (1 if problem else 0) and (not problem or problem in problems[0]), problems
    assert len(warnings) == (1 if warning else 0) and (not warning or warning in warnings[0]), warnings
    generic = xdp_report(uses, facts, {"eth1": {"present": True, "driver": "r8169"}})
    assert generic is not None and generic["interfaces"]["eth1"]["expected_mode"] == "generic"
    assert any("generic (skb) mode" in w for w in xdp_problems("client", generic)[1])


FAKE_TESTER = """#!{python}
import json, sys
args = sys.argv[1:]
with open(args[args.index("--json") + 1], "w") as out:
    json.dump({{"argv": args}}, out)
"""


def test_the_testers_argv_reaches_the_client_quoted_once_and_its_json_comes_back(tmp_path: Path) -> None:
    """remote_run as TestbedChain.client_argv runs it, with a shell standing in for ssh: the measurement's
    argv (an AF_XDP place, a value with spaces, quotes and a command substitution) arrives at the client's
    tester word for word but for argv[0] and the JSON file, which is the client's and is copied back."""
    import json
    import sys

    from xlatbench.procs import TESTER_JSON_PREFIX
    from xlatbench.scripts.xlatperf import TesterOptions, xlatperf_argv
    from xlatbench.setups.chain import place_tester
    from xlatbench.setups.paper import topology

    tester = tmp_path / "client-xlatperf"
    tester.write_text(FAKE_TESTER.format(python=sys.executable))
    tester.chmod(0o755)
    trap = tmp_path / "substituted"
    options = TesterOptions(io="xdp", ports_per_thread=4, extra_args=("--domain", f"a b'c\"$(touch {trap})"))
    local_json = tmp_path / f"{TESTER_JSON_PREFIX}{os.getpid()}-t.json"
    place = place_tester(topology("464xlat"), "xdp", 4, 20000)
    argv = xlatperf_argv("/local/xlatperf", "203.0.113.56", 1000, 2, options, local_json, place)
    ssh = ["sh", "-c", 'shift; exec sh -c "$1"', "ssh"]  # `ssh HOST -- SCRIPT` runs SCRIPT in a shell
    done = subprocess.run([sys.executable, "-m", "xlatbench.setups.testbed.remote_run", json.dumps(ssh),
                           str(tester), str(tmp_path / "client"), "--", *argv],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(local_json.read_text())["argv"]
    at = argv.index(str(local_json))
    assert got[at - 1].startswith(str(tmp_path / "client" / "trial-")) and got[at - 1].endswith(".json")
    assert got[:at - 1] + got[at:] == argv[1:at] + argv[at + 1:]
    assert "--xdp-interface" in got and "192.168.0.4,20000-20003" in got
    assert not trap.exists(), "a value of the argv was run by a shell"
    assert list((tmp_path / "client").iterdir()) == [], "the client's trial files are left behind"
