"""Each topology in namespaces: up -> check passes -> a 10 s trial at 2 000 queries/s has loss 0 -> down
leaves nothing. Needs root."""

from __future__ import annotations

import os
import subprocess

import pytest

from xlatbench.cpulist import cpu_mask
from xlatbench.setups.backends.tayga import TUN
from xlatbench.setups.emulation import leftovers, rootsysctl
from xlatbench.setups.emulation.check import check
from xlatbench.setups.emulation.cleanup import down, existing_namespaces
from xlatbench.setups.emulation.cpusets import online_cpus
from xlatbench.setups.emulation.names import CPUSET_ROOT

pytestmark = [pytest.mark.root, pytest.mark.slow]

RATE_QPS = 2000
DURATION_S = 3  # 6 000 queries, none lost


@pytest.mark.parametrize("topology", ["baseline", "464xlat", "mapt"])
def test_up_check_trial_down(topology, chain_factory, trial, prefix):
    rmem_before = rootsysctl.read("net.core.rmem_default")
    backlog_before = rootsysctl.read("net.core.netdev_max_backlog")
    chain = chain_factory(topology)
    assert int(rootsysctl.read("net.core.netdev_max_backlog")) >= chain.emulation.config.backlog_packets
    info = chain.describe()
    assert info["topology"] == topology and info["phase"] == "up"
    assert len(existing_namespaces(prefix)) == len(chain.emulation.topology.hosts)
    if topology != "baseline":
        for role in info["translators"].values():
            assert role["implementation"] == "tayga" and role["variant"] == "patched"
            assert role["prefix"] == "64:ff9b::/96"

    verdict = check(chain.emulation)
    assert verdict["ok"], verdict["failures"]

    result = trial(chain, RATE_QPS, DURATION_S, threads=1, ports_per_thread=10)
    totals = result["totals"]
    assert result["verdict"]["status"] == "ok", result["verdict"]
    assert totals["sent"] == RATE_QPS * DURATION_S
    assert totals["valid"] == totals["sent"], f"{topology}: lost {totals['sent'] - totals['valid']} queries"

    removed = down(prefix)
    assert set(removed["namespaces"]) == {f"{prefix}-{h.name}" for h in chain.emulation.topology.hosts}
    assert leftovers(prefix) == []
    assert not list(CPUSET_ROOT.glob(f"{prefix}-*"))
    if not rootsysctl.pending_restore():  # no other chain holds the root sysctls
        assert rootsysctl.read("net.core.rmem_default") == rmem_before
        assert rootsysctl.read("net.core.netdev_max_backlog") == backlog_before


def test_down_is_idempotent(prefix):
    first = down(prefix)
    second = down(prefix)
    assert second["namespaces"] == [] and second["processes"] == []
    assert first["namespaces"] == []
    assert leftovers(prefix) == []


def test_dut_cpus_are_applied_and_recorded(chain_factory, prefix):
    chain = chain_factory("464xlat")
    cpu = online_cpus()[-1]
    applied = chain.set_dut_cpus([cpu])
    for dut in ("dut1", "dut2"):
        cpuset = applied[dut]["cpuset"]
        assert cpuset["cpus"] == str(cpu)
        for pid in cpuset["pids"]:
            assert str(pid) in (CPUSET_ROOT / f"{prefix}-{dut}" / "cgroup.procs").read_text().split()
            assert os.sched_getaffinity(pid) == {cpu}, "the kernel confines the translator"
        assert set(applied[dut]["rps_cpus"].values()) == {cpu_mask([cpu])}
        seen = subprocess.run(
            ["ip", "netns", "exec", f"{prefix}-{dut}", "cat", "/sys/class/net/enp5s0f0/queues/rx-0/rps_cpus"],
            capture_output=True,
            text=True,
        )
        assert int(seen.stdout.strip().replace(",", ""), 16) == 1 << cpu
    assert chain.describe()["placement"] == applied
    with pytest.raises(ValueError, match="subset of the online CPUs"):
        chain.set_dut_cpus([cpu + 64])
    times = chain.dut_cpu_times()
    assert set(times) == {"dut1", "dut2"} and all(t >= 0 for t in times.values())
    counters = chain.counters()
    assert f"dut1:{TUN}" in counters and "server:udp" in counters, "the TUN device has the suite's name"


def test_test_system_receives_on_its_own_cpus(chain_factory, prefix):
    """The client's interfaces steer the replies' receive softirq to the tester's CPUs and the server's to
    Knot's (RPS), so that the test system's receive work is not charged to the DUT CPU that sent them."""
    tester_cpu, knot_cpu = online_cpus()[0], online_cpus()[-1]
    chain = chain_factory("baseline", client_cpus=(tester_cpu,), knot_cpus=(knot_cpu,))
    steered = chain.describe()["test_system_rps"]
    assert steered == {"client:enp5s0f0": cpu_mask([tester_cpu]), "server:enp5s0f0": cpu_mask([knot_cpu])}
    rps = "/sys/class/net/enp5s0f0/queues/rx-0/rps_cpus"
    for host, cpu in (("client", tester_cpu), ("server", knot_cpu)):
        seen = subprocess.run(["ip", "netns", "exec", f"{prefix}-{host}", "cat", rps],
                              capture_output=True, text=True, check=True)
        assert int(seen.stdout.strip().replace(",", ""), 16) == 1 << cpu


def test_mapt_carries_the_papers_1600_flows(chain_factory, trial):
    """16 threads x 100 ports: 1600 distinct flows, NAT44'd by napt into the CE's 2048-port set."""
    chain = chain_factory("mapt")
    assert chain.max_flows == 2048
    result = trial(chain, RATE_QPS, 5, threads=16, ports_per_thread=100)
    totals = result["totals"]
    assert totals["sent"] == RATE_QPS * 5
    assert totals["valid"] == totals["sent"]
    snat = [v for k, v in chain.counters().items() if k.startswith("napt:nft:ip/nat/POSTROUTING")]
    # NAT rules see only the first packet of each flow; conntrack translates the rest.
    assert snat and snat[0]["packets"] >= 1600


def test_stock_tayga_runs_with_a_network_specific_prefix(chain_factory):
    chain = chain_factory("464xlat", variants={"tayga": "stock"})
    info = chain.describe()
    assert info["nat64_prefix"] == "2001:db8:64::/96" and info["paper_prefix"] is False
    assert any("replaces the paper's 64:ff9b::/96" in note for note in info["notes"])
    for role in info["translators"].values():
        assert role["variant"] == "stock" and role["binary"] == "/usr/sbin/tayga"
    verdict = check(chain.emulation)
    assert verdict["ok"], verdict["failures"]
    assert verdict["links"]["dut1-dut2"]["expected"].startswith("2001:db8:2::4 -> 2001:db8:64::cb00:7138")
