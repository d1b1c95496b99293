"""The root-sysctl lease: the first holder records the originals, the last live holder restores them."""

from __future__ import annotations

import os

import pytest

from xlatbench.setups.emulation import rootsysctl


@pytest.fixture
def machine(monkeypatch):
    values = {"net.core.rmem_max": "212992"}
    namespaces: set[str] = set()
    monkeypatch.setattr(rootsysctl, "read", lambda key: values[key])
    monkeypatch.setattr(rootsysctl, "write", lambda key, value: values.__setitem__(key, value))
    monkeypatch.setattr(rootsysctl, "_existing_netns", lambda: set(namespaces))
    return values, namespaces


def test_last_holder_restores(machine, tmp_path):
    values, namespaces = machine
    namespaces.update({"a-client", "b-client"})
    report = rootsysctl.acquire("a", {"net.core.rmem_max": 4194304}, ["a-client"], root=tmp_path)
    assert report["net.core.rmem_max"] == {"original": "212992", "now": "4194304"}
    rootsysctl.acquire("b", {"net.core.rmem_max": 1048576}, ["b-client"], root=tmp_path)
    assert values["net.core.rmem_max"] == "4194304", "a smaller wish never shrinks what another holder set"
    assert rootsysctl.release("a", root=tmp_path) == {}
    assert values["net.core.rmem_max"] == "4194304", "b still holds it"
    assert rootsysctl.release("b", root=tmp_path) == {"net.core.rmem_max": "212992"}
    assert values["net.core.rmem_max"] == "212992"
    assert rootsysctl.pending_restore(root=tmp_path) == {}


def test_lease_of_a_killed_chain_does_not_hold(machine, tmp_path):
    values, namespaces = machine
    namespaces.add("a-client")
    rootsysctl.acquire("a", {"net.core.rmem_max": 4194304}, ["a-client"], root=tmp_path)
    namespaces.add("b-client")
    rootsysctl.acquire("b", {"net.core.rmem_max": 4194304}, ["b-client"], root=tmp_path)
    namespaces.discard("a-client")  # chain a was killed and its namespaces removed by hand
    assert rootsysctl.release("b", root=tmp_path) == {"net.core.rmem_max": "212992"}
    assert not rootsysctl.held_by("a", root=tmp_path)


def test_originals_survive_a_holder_that_died(machine, tmp_path):
    values, namespaces = machine
    namespaces.add("a-client")
    rootsysctl.acquire("a", {"net.core.rmem_max": 4194304}, ["a-client"], root=tmp_path)
    namespaces.clear()  # a died; a new chain comes up before anyone ran down
    namespaces.add("c-client")
    rootsysctl.acquire("c", {"net.core.rmem_max": 4194304}, ["c-client"], root=tmp_path)
    rootsysctl.release("c", root=tmp_path)
    assert values["net.core.rmem_max"] == "212992", "the true original, not a's raised value"


def test_lease_of_a_killed_process_without_namespaces_does_not_hold(machine, tmp_path):
    import subprocess

    values, _ = machine
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that has ended: the loopback self-test holder after kill -9
    rootsysctl.acquire("loopback-dead", {"net.core.rmem_max": 4194304}, [], root=tmp_path, pid=gone.pid)
    rootsysctl.acquire("loopback-live", {"net.core.rmem_max": 4194304}, [], root=tmp_path, pid=os.getpid())
    assert rootsysctl.release("loopback-live", root=tmp_path) == {"net.core.rmem_max": "212992"}
    assert values["net.core.rmem_max"] == "212992"
    assert not rootsysctl.held_by("loopback-dead", root=tmp_path)


def test_an_exact_setting_lowers_too_and_the_last_holder_restores_it(machine, tmp_path):
    """A known table capacity (nf_conntrack_max = K) may be below the machine's value: `exact` sets it; the
    true original still comes back, whatever the holders set in between."""
    values, namespaces = machine
    values["net.netfilter.nf_conntrack_max"] = "262144"
    namespaces.add("a-client")
    rootsysctl.acquire("a", {"net.netfilter.nf_conntrack_max": 2_000_000}, ["a-client"], root=tmp_path)
    report = rootsysctl.acquire("a", {"net.netfilter.nf_conntrack_max": 1000}, ["a-client"], root=tmp_path,
                                exact=True)
    assert report["net.netfilter.nf_conntrack_max"] == {"original": "262144", "now": "1000"}
    rootsysctl.acquire("a", {"net.netfilter.nf_conntrack_max": 500}, ["a-client"], root=tmp_path)
    assert values["net.netfilter.nf_conntrack_max"] == "1000", "without exact a smaller wish changes nothing"
    assert rootsysctl.release("a", root=tmp_path) == {"net.netfilter.nf_conntrack_max": "262144"}
    assert values["net.netfilter.nf_conntrack_max"] == "262144"
