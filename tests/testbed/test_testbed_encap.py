"""MAP-E and lw4o6 on the sshd testbed hosts, as far as this machine allows without the software (issue 34):
VPP's MAP plugin as the BR/lwAFTR and the kernel's ip6tnl as the CE/lwB4. These hosts have no VPP, and this
kernel has no ip6tnl: `testbed check` refuses each DUT in one line, a real refusal, and `up` touches nothing.
With the backends' refusal bypassed (as a host whose software broke between check and up), `up` runs each
host's plan over SSH and stops partway at the first step that needs the missing software (dut1 after making
the napt namespace, moving its NIC and bringing up links; dut2 after writing its wrapper and bringing its
NICs up for VPP with the kernel's IPv6 off on them); the rollback then leaves every host as it was
(addresses, routes, links, rules, sysctls, files). What runs is the dry run's plan: each failing step is the
one the rendering names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sshnet import SshHosts
from test_testbed_ssh import assert_as_before, tayga_inventory

from xlatbench.cli import main
from xlatbench.setups.testbed import preflight
from xlatbench.setups.testbed.bringup import plan
from xlatbench.setups.testbed.chain import TestbedChain
from xlatbench.setups.testbed.inventory import load_inventory
from xlatbench.setups.testbed.machine import transport_for
from xlatbench.setups.testbed.undo import note_created_dirs

pytestmark = [pytest.mark.root, pytest.mark.slow]

VPP_MISSING = ("dut2: VPP not found (no vppctl), which the vpp backend runs the BR/lwAFTR with: install VPP "
               "(FD.io's packages vpp and vpp-plugin-core) and start it, or use backend = \"bpf\"")
IP6TNL_MISSING = ("dut1: the kernel has no ip6tnl (IPv4-in-IPv6 tunnel, CONFIG_IPV6_TUNNEL: module "
                  "ip6_tunnel neither loaded, built in nor installed), which the ip6tnl backend's CE/lwB4 "
                  "needs: boot a kernel with it (Debian's has the module), or use backend = \"bpf\"")


def encap_inventory(hosts: SshHosts, tmp_path: Path, topology: str) -> Path:
    """The sshnet inventory with `topology`, the kernel's ip6tnl on dut1 and VPP on dut2."""
    path = tayga_inventory(hosts, tmp_path)
    text = re.sub(r'tayga_binary = "[^"]*"\n', "", path.read_text())
    text = text.replace('topology = "464xlat"', f'topology = "{topology}"')
    head, dut2 = text.split("[hosts.dut2]")
    path.write_text(head.replace('backend = "tayga"', 'backend = "ip6tnl"') + "[hosts.dut2]"
                    + dut2.replace('backend = "tayga"', 'backend = "vpp"', 1))
    return path


@pytest.fixture
def machine_lacks_both() -> None:
    if Path("/sys/module/ip6_tunnel").exists() or Path("/usr/bin/vppctl").exists():
        pytest.skip("this machine has ip6tnl or VPP: the refusals proven here need a host without them")


@pytest.mark.parametrize("topology", ["mape", "lw4o6"])
def test_check_refuses_each_dut_in_one_line_and_a_bypassed_up_is_undone(
        hosts: SshHosts, tmp_path: Path, topology: str, machine_lacks_both: None,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = encap_inventory(hosts, tmp_path, topology)
    before = hosts.snapshot()
    assert main(["testbed", "check", str(inventory)]) == 1
    err = "".join(capsys.readouterr())
    problems = [line.removeprefix("problem: ") for line in err.splitlines() if line.startswith("problem: ")]
    assert problems == [IP6TNL_MISSING, VPP_MISSING], err
    with pytest.raises(RuntimeError, match="preflight refused"):
        TestbedChain.up(load_inventory(inventory))
    assert_as_before(hosts, before, tmp_path)

    # Bypassed: every host runs its plan until the first step that needs the software.
    loaded = load_inventory(inventory)
    steps = {role: [s.shell() for s in host_steps] for role, host_steps in plan(loaded).items()}
    tunnel = next(n for n, line in enumerate(steps["dut1"], 1) if " type ip6tnl " in line)
    vpp = next(n for n, line in enumerate(steps["dut2"], 1)
               if line.endswith("create host-interface name eth1"))
    assert tunnel > 10 and vpp == 4  # dut1: napt namespace, veth, NIC moved, links up, routes, sysctls before
    monkeypatch.setattr(preflight, "_backend_problems", lambda *_: [])
    with pytest.raises(RuntimeError) as failed:
        TestbedChain.up(loaded)
    message = str(failed.value)
    assert message.startswith("dut1: ") and f"step {tunnel} failed: ip link add " in message, message
    assert "Unknown device type" in message or "ip6tnl" in message
    assert_as_before(hosts, before, tmp_path)


def test_dut2_stops_at_vppctl_and_its_journal_undoes_it(hosts: SshHosts, tmp_path: Path,
                                                      machine_lacks_both: None) -> None:
    """dut2's plan alone, as `up` applies it: it writes its wrapper, brings eth1 up for VPP's af_packet with
    the kernel's IPv6 off there, then the wrapper finds no vppctl; the state file holds exactly the reversals
    of what succeeded, and `down` runs them without a failure."""
    loaded = load_inventory(encap_inventory(hosts, tmp_path, "mape"))
    before = hosts.snapshot()
    chain = TestbedChain(loaded, transport_for(loaded), {})
    try:
        chain.shell.capture("dut2", note_created_dirs(loaded.rundir("dut2")))
        with pytest.raises(RuntimeError, match="step 4 failed: sh [^ ]*/vppctl-checked create host-interface "
                                               "name eth1"):
            chain.apply("dut2", plan(loaded)["dut2"])
        state = Path(loaded.statefile("dut2")).read_text().splitlines()
        assert state[1:] == [f"rm -f {loaded.rundir('dut2')}/vppctl-checked", "ip link set eth1 down",
                             "sysctl -qw net.ipv6.conf.eth1.disable_ipv6=0"], state
        report = chain.down()
        assert report["dut2"]["failed"] == [] and len(report["dut2"]["undone"]) == 4
    finally:
        chain.shell.close()
    assert_as_before(hosts, before, tmp_path)
