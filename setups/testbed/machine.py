"""The testbed's machines: the inventory's topology with its own interface names (a sub-host such as the
MAP-T `napt` runs as a namespace on its parent), where each host's files live, and the per-host parts
(CPU hotplug, IRQs, idle samplers, the SSH transport) with `each`, which runs work on every host at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..backends import RenderContext
from ..steps import Step
from ..topology import Endpoint, Host, Interface, Link, Nat44, Topology
from .hotplug import Hotplug
from .inventory import DUTS, Inventory
from .irqs import IrqAffinity
from .remote_idle import IdleSampler
from .ssh import SshTransport
from .undo import XdpRelease

ORDER = ("dut1", "dut2", "server", "client")
T = TypeVar("T")
HostStep = Step | XdpRelease  # what plan() gives a host: the topology's steps, Knot, the XDP journal lines


class TestbedError(RuntimeError):
    """The testbed cannot be brought up; the message names the host and what to do."""

    __test__ = False  # not a pytest test class


def machine_of(topology: Topology, host: str) -> str:
    """The inventory role (machine) a topology host runs on: a sub-host runs on its parent."""
    parent = topology.host(host).parent
    return parent or host


def machine_topology(inventory: Inventory) -> Topology:
    """The inventory's topology with its interface names and the napt namespace's name."""
    topo = inventory.topology()
    renames: dict[tuple[str, str], str] = {}
    for link in topo.links:
        if link.internal:
            continue
        for end in (link.a, link.b):
            machine = inventory.hosts[machine_of(topo, end.host)]
            renames[(end.host, end.interface)] = machine.interfaces[link.name]
    hostname = {h.name: h.name for h in topo.hosts} | {"napt": inventory.napt_netns}
    hosts = tuple(_rename_host(h, renames, hostname) for h in topo.hosts)
    links = tuple(
        Link(link.name, *(Endpoint(hostname[e.host], renames.get((e.host, e.interface), e.interface))
                          for e in (link.a, link.b)), internal=link.internal)
        for link in topo.links
    )
    return dataclasses.replace(topo, hosts=hosts, links=links)


def _rename_host(host: Host, renames: dict[tuple[str, str], str], hostname: dict[str, str]) -> Host:
    def rename(name: str) -> str:
        return renames.get((host.name, name), name)

    items = []
    for item in host.items:
        if isinstance(item, Interface):
            item = dataclasses.replace(item, name=rename(item.name))
        elif isinstance(item, Nat44):  # a NAT44 on a host's own link (the Figure 1 gateway) leaves by its NIC
            item = dataclasses.replace(item, out_interface=rename(item.out_interface))
        elif hasattr(item, "ipv4_interface"):
            item = dataclasses.replace(item, ipv4_interface=rename(item.ipv4_interface),
                                       ipv6_interface=rename(item.ipv6_interface))
        items.append(item)
    parent = hostname[host.parent] if host.parent else None
    return Host(hostname[host.name], tuple(items), parent)


def machine_interfaces(inventory: Inventory) -> dict[str, list[str]]:
    return {role: list(host.interfaces.values()) for role, host in inventory.hosts.items()}


def host_context(inventory: Inventory, role: str) -> RenderContext:
    """Where a host's rendering runs: a real host, its files under the inventory's run directory."""
    return RenderContext(world="real", rundir=inventory.rundir(role), prefix="xlatbench")


def each(roles: list[str] | tuple[str, ...], work: Callable[[str], T]) -> dict[str, T]:
    """work(role) for every role at once (one SSH connection each); results in the order of `roles`."""
    with ThreadPoolExecutor(max_workers=len(roles) or 1) as pool:
        futures = {role: pool.submit(work, role) for role in roles}
        return {role: future.result() for role, future in futures.items()}


def hotplugs(inventory: Inventory) -> dict[str, Hotplug]:
    hosts = inventory.hosts
    return {d: Hotplug(d, hosts[d].offline_cpus, hosts[d].sysfs_root, inventory.statefile(d)) for d in DUTS}


def irq_hosts(inventory: Inventory) -> dict[str, IrqAffinity]:
    """Per DUT, the IRQs of its test interfaces (saved before the core sweep, spread after each change)."""
    hosts = inventory.hosts
    return {d: IrqAffinity(d, tuple(hosts[d].interfaces.values()), inventory.statefile(d),
                           hosts[d].sysfs_root, hosts[d].proc_root) for d in DUTS}


def samplers(inventory: Inventory) -> dict[str, IdleSampler]:
    return {d: IdleSampler(d, inventory.rundir(d), inventory.statefile(d), inventory.hosts[d].proc_stat)
            for d in DUTS}


def transport_for(inventory: Inventory) -> SshTransport:
    return SshTransport({r: h.ssh for r, h in inventory.hosts.items()}, inventory.ssh_options)
