"""A real testbed's inventory (TOML): which machine plays which role, how to reach it over SSH, the
interface at each link end, the translator backend per DUT, the CPUs that may be taken offline.

```toml
name = "lab"                     # names the state directory on every host
topology = "mapt"                # baseline | 464xlat | mapt
ssh_options = ["-o", "User=root"]  # extra options for every ssh call (optional)

[hosts.client]
ssh = "tester.lab"               # anything OpenSSH accepts: alias, user@host, host with ProxyJump...
interfaces = { client-dut1 = "enp5s0f0" }
[hosts.dut1]
ssh = "dut1.lab"
backend = "jool"                 # a backend of setups.backends (default: the paper's)
offline_cpus = "1-7"             # CPUs hotplug may take offline (never CPU 0)
interfaces = { client-dut1 = "enp5s0f0", dut1-dut2 = "enp5s0f1" }
```

Every error is one line naming the key and the fix (`InventoryError`).
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...cpulist import parse_user_cpu_list
from ..backends import Backend, registry
from ..paper import TOPOLOGIES, WELL_KNOWN_PREFIX, topology
from ..plan import BackendChoice
from ..topology import TRANSLATOR_ROLES, Interface, Nat44, Topology

ROLES = ("client", "dut1", "dut2", "server")
DUTS = ("dut1", "dut2")
LINKS_OF = {
    "client": ("client-dut1",),
    "dut1": ("client-dut1", "dut1-dut2"),
    "dut2": ("dut1-dut2", "dut2-server"),
    "server": ("dut2-server",),
}
# Topologies with both DUTs (client, dut1, dut2, server): the ones the testbed path renders and runs.
TESTBED_TOPOLOGIES = tuple(t for t in TOPOLOGIES if {"dut1", "dut2"} <= {h.name for h in topology(t).hosts})
# A backend's variant option (`variant_option.flag`) is a top-level key too.
VARIANT_KEYS = {option.flag: name for name, option in registry.variant_options().items()}
TOP_KEYS = {"name", "topology", "ssh_options", "hosts", "napt_netns", "nat64_prefix", "rundir",
            "rx_flow_hash", "nat44", *VARIANT_KEYS}
# What preflight does with a test interface that hashes UDP flows on addresses only: refuse with the command
# (check), or set the paper's `sdfn` itself, journalled and undone by down (apply).
RX_FLOW_HASH = ("check", "apply")
# `<backend>_binary`: a DUT's own build of what its backend runs (an executable, a compiled BPF object), for
# the backends that have one (`own_build`).
BINARY_KEYS = {f"{b.name}_binary": b.name for b in registry.every() if b.own_build}
HOST_KEYS = {"ssh", "interfaces", "backend", "offline_cpus", "management", "sysfs_root", "proc_stat",
             "proc_root", "tester", "initial_netns", *BINARY_KEYS}
# An interface name as the kernel takes it that no command can read as an option (a leading '-') or a path
# ('.', '..'): letters, digits and '_.:-'.
IFNAME_RE = re.compile(r"^(?!-)(?!\.\.?$)[A-Za-z0-9_.:-]{1,15}$")
# Every path the controller sends to a host's shell: letters, digits and '._/+-' only, not starting with '-'
# (quoted anyway; this keeps a path from ever meaning anything but itself, also inside a pattern or an undo
# line written by the host).
SAFE_PATH_RE = re.compile(r"^(?!-)[A-Za-z0-9._/+-]{1,4096}$")
SAFE_PATH = "letters, digits and ._/+- only (no spaces or shell characters), not starting with '-'"
# An SSH destination: user@host, an alias, a bracketed IPv6 address; no option, no shell character.
SSH_DEST_RE = re.compile(r"^(?!-)[A-Za-z0-9._@:%\[\]+-]{1,255}$")
# Host keys only some roles use: another role's entry for them is refused (never silently ignored).
ROLE_KEYS = {"tester": ("client",), "proc_stat": DUTS, "proc_root": DUTS, "initial_netns": DUTS,
             **{key: DUTS for key in BINARY_KEYS}}
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class InventoryError(ValueError):
    """A bad inventory; the message is one line naming the file, the key and the fix."""


@dataclass(frozen=True)
class HostEntry:
    """One machine of the testbed.

    ssh: the destination given to ssh. interfaces: link name -> interface name on this machine.
    backend: the translator backend instance (DUTs only; its variant the inventory's).
    offline_cpus: CPUs hotplug may take offline.
    management: the address ssh reaches (optional; checked against the test networks).
    sysfs_root / proc_stat / proc_root: where /sys (CPU hotplug, NICs' IRQ lists), /proc/stat and /proc (IRQ
    affinities, /proc/interrupts) are (tests redirect them to fake trees).
    tester: the xlatperf binary on the client. binary: a DUT's own build of its backend's program (the
    inventory's `<backend>_binary`), or None for the one the backend names. initial_netns: a file naming the
    host's initial network namespace (`ip netns attach NAME 1` makes /run/netns/NAME), where the kernel's
    global settings (conntrack's table and hash size) are written, when the SSH session runs in another
    namespace (the suite's sshd hosts); None: the session's own (a real host's sshd runs in the initial one).
    """

    role: str
    ssh: str
    interfaces: dict[str, str]
    backend: Backend = field(default_factory=lambda: registry.make(registry.TESTBED_DEFAULT))
    offline_cpus: tuple[int, ...] = ()
    management: str | None = None
    sysfs_root: str = "/sys"
    proc_stat: str = "/proc/stat"
    proc_root: str = "/proc"
    tester: str = "xlatperf"
    binary: str | None = None
    initial_netns: str | None = None


@dataclass(frozen=True)
class Inventory:
    path: str
    name: str
    topology_name: str
    hosts: dict[str, HostEntry]
    ssh_options: tuple[str, ...] = ()
    napt_netns: str = "napt"
    nat64_prefix: str = WELL_KNOWN_PREFIX
    variants: dict[str, str] = field(default_factory=dict)  # backend name -> its variant
    rundir_root: str = "/run/xlatbench-testbed"
    extra: dict[str, Any] = field(default_factory=dict)
    rx_flow_hash: str = "check"
    nat44: bool = False  # baseline only: dut1 is a stateful NAT44 gateway (the scalability draft's Figure 1)

    def rundir(self, role: str) -> str:
        """Where a host keeps this testbed's files (state file, configs, pid files); per role, so that
        two roles on one file system (the namespace proof) never share a file."""
        return f"{self.rundir_root}/{self.name}/{role}"

    def statefile(self, role: str) -> str:
        return f"{self.rundir(role)}/undo.sh"

    def topology(self) -> Topology:
        """The paper's topology; its tester sends from the client host's one configured address (the
        testbed puts no further client addresses on a real host: AF_XDP flows stay within its ports)."""
        topo = replace(topology(self.topology_name, self.nat64_prefix), client_sources=1)
        return nat44_gateway(topo) if self.nat44 else topo

    def backends(self) -> BackendChoice:
        """The DUTs' backend instances per translator role: CLAT/CE are dut1's, PLAT/BR dut2's."""
        d1, d2 = self.hosts["dut1"].backend, self.hosts["dut2"].backend
        return BackendChoice.of_roles({"clat": d1, "ce": d1, "mape-ce": d1, "lwb4": d1,
                                       "plat": d2, "br": d2, "mape-br": d2, "lwaftr": d2})


def nat44_gateway(topo: Topology) -> Topology:
    """The baseline with dut1 a stateful NAT44 gateway (the scalability draft's Figure 1, dut2 a router
    behind it): the client's network leaving dut1 toward dut2 gets dut1's own address on that link (iptables
    SNAT, ports kept when free), so the server's replies come back to dut1 without a route of their own."""
    link = next(link for link in topo.links if link.name == "dut1-dut2")
    end = link.a if link.a.host == "dut1" else link.b
    dut1 = topo.host("dut1")
    outside = next(i for i in dut1.items if isinstance(i, Interface) and i.name == end.interface)
    client = topo.host("client")
    inside = next(i for i in client.items if isinstance(i, Interface))
    nat = Nat44(str(ipaddress.ip_interface(inside.addresses[0]).network), end.interface,
                str(ipaddress.ip_interface(outside.addresses[0]).ip))
    hosts = tuple(replace(h, items=(*h.items, nat)) if h.name == "dut1" else h for h in topo.hosts)
    return replace(topo, hosts=hosts, description=topo.description.replace(
        "DUT1 (IPv4 forwarding)", "DUT1 (stateful NAT44: iptables SNAT to its DUT1-DUT2 address)"))


def load_inventory(path: str | Path) -> Inventory:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InventoryError(f"{path}: no such inventory file: give the path of a TOML inventory") from None
    except tomllib.TOMLDecodeError as err:
        raise InventoryError(f"{path}: not valid TOML ({err}): fix the syntax") from None
    return parse_inventory(data, str(path))


def parse_inventory(data: dict[str, Any], where: str = "inventory") -> Inventory:
    def fail(key: str, message: str) -> InventoryError:
        return InventoryError(f"{where}: {key}: {message}")

    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key: use one of {', '.join(sorted(TOP_KEYS))}")
    name = data.get("name", "testbed")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise fail("name", "must be lower-case letters, digits and '-', starting with a letter")
    topo = data.get("topology")
    if topo not in TOPOLOGIES:
        raise fail("topology", f"set it to one of {', '.join(TESTBED_TOPOLOGIES)}")
    if topo not in TESTBED_TOPOLOGIES:
        raise fail("topology", f"{topo} has a single DUT, which the four-host testbed path does not run yet: "
                   f"use one of {', '.join(TESTBED_TOPOLOGIES)}, or measure {topo} in the emulation "
                   f"([[setup]] kind = \"chain\", topology = \"{topo}\")")
    options = _string_list(data.get("ssh_options", []), fail("ssh_options", "must be a list of strings"))
    napt = data.get("napt_netns", "napt")
    if not isinstance(napt, str) or not NAME_RE.match(napt):
        raise fail("napt_netns", "must be a namespace name of lower-case letters, digits and '-'")
    prefix = str(data.get("nat64_prefix", WELL_KNOWN_PREFIX))
    try:
        if ipaddress.IPv6Network(prefix).prefixlen != 96:
            raise ValueError
        prefix = str(ipaddress.IPv6Network(prefix))
    except ValueError:
        raise fail("nat64_prefix", f"{prefix!r} is not an IPv6 /96 prefix such as 64:ff9b::/96") from None
    variants = {}
    for key, backend_name in VARIANT_KEYS.items():
        option = registry.variant_options()[backend_name]
        variants[backend_name] = data.get(key, option.default)
        if variants[backend_name] not in option.choices:
            raise fail(key, f"choose {' or '.join(option.choices)}")
    rundir_root = data.get("rundir", "/run/xlatbench-testbed")
    if not isinstance(rundir_root, str) or not rundir_root.startswith("/") \
            or not SAFE_PATH_RE.match(rundir_root):
        raise fail("rundir", f"must be an absolute path of {SAFE_PATH}")
    rx_flow_hash = data.get("rx_flow_hash", "check")
    if rx_flow_hash not in RX_FLOW_HASH:
        raise fail("rx_flow_hash", "choose check (refuse a NIC that hashes UDP on addresses only) or apply "
                   "(set the paper's sdfn, undone by down)")
    nat44 = data.get("nat44", False)
    if not isinstance(nat44, bool):
        raise fail("nat44", "true (dut1 a stateful NAT44 gateway, topology baseline) or false")
    if nat44 and topo != "baseline":
        raise fail("nat44", f"only topology baseline takes it (dut1 then source-NATs the client's network); "
                            f"{topo} has its own stateful part: remove it")
    hosts = _hosts(data.get("hosts"), variants, fail)
    inventory = Inventory(where, name, topo, hosts, tuple(options), napt, prefix, variants, rundir_root,
                          rx_flow_hash=rx_flow_hash, nat44=nat44)
    _check_whole(inventory, fail)
    return inventory


def _string_list(value: Any, error: InventoryError) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise error
    return value


def _hosts(raw: Any, variants: dict[str, str], fail: Any) -> dict[str, HostEntry]:
    if not isinstance(raw, dict):
        raise fail("hosts", f"missing [hosts.ROLE] tables: give one for each of {', '.join(ROLES)}")
    for role in raw:
        if role not in ROLES:
            raise fail(f"hosts.{role}", f"unknown role: roles are {', '.join(ROLES)} "
                                        "(the MAP-T napt is a namespace on dut1, see napt_netns)")
    for role in ROLES:
        if role not in raw:
            raise fail(f"hosts.{role}", "missing: every testbed needs client, dut1, dut2 and server")
    return {role: _host(role, raw[role], variants, fail) for role in ROLES}


def _host(role: str, raw: Any, variants: dict[str, str], fail: Any) -> HostEntry:
    key = f"hosts.{role}"
    if not isinstance(raw, dict):
        raise fail(key, "must be a table")
    unknown = sorted(set(raw) - HOST_KEYS)
    if unknown:
        raise fail(f"{key}.{unknown[0]}", f"unknown key: use one of {', '.join(sorted(HOST_KEYS))}")
    ssh = raw.get("ssh")
    if not isinstance(ssh, str) or not SSH_DEST_RE.match(ssh):
        raise fail(f"{key}.ssh", "give the SSH destination (user@host or a ~/.ssh/config alias: letters, "
                                 "digits and ._@:%[]+-, not starting with '-')")
    interfaces = _interfaces(role, raw.get("interfaces"), fail)
    backend = raw.get("backend", registry.TESTBED_DEFAULT)
    if backend not in registry.names():
        raise fail(f"{key}.backend", f"choose {' or '.join(registry.names())}")
    if role not in DUTS and "backend" in raw:
        raise fail(f"{key}.backend", "only dut1 and dut2 run a translator: remove it")
    for k, roles in ROLE_KEYS.items():
        if k in raw and role not in roles:
            raise fail(f"{key}.{k}", f"only {' and '.join(roles)} use{'s' if len(roles) == 1 else ''} it, "
                                     f"{role} would ignore it: remove it")
    for k, owner in BINARY_KEYS.items():
        if k in raw and owner != backend:
            raise fail(f"{key}.{k}", f"{role} runs the {backend} backend, which would ignore it: remove it "
                                     f"or set hosts.{role}.backend = \"{owner}\"")
    cpus = _offline_cpus(raw.get("offline_cpus", []), f"{key}.offline_cpus", fail)
    if cpus and role not in DUTS:
        raise fail(f"{key}.offline_cpus", "only DUTs change core counts: remove it")
    management = raw.get("management")
    if management is not None:
        try:
            management = str(ipaddress.ip_address(str(management)))
        except ValueError:
            raise fail(f"{key}.management", f"{management!r} is not an IP address") from None
        if "%" in management:
            raise fail(f"{key}.management", f"{management!r}: give the address without a scope (%...)")
    paths = {k: raw.get(k, d) for k, d in (("sysfs_root", "/sys"), ("proc_stat", "/proc/stat"),
                                           ("proc_root", "/proc"),
                                           ("tester", "xlatperf"), (f"{backend}_binary", None),
                                           ("initial_netns", None))}
    for k, value in paths.items():
        if value is not None and (not isinstance(value, str) or not SAFE_PATH_RE.match(value)):
            raise fail(f"{key}.{k}", f"must be a path of {SAFE_PATH}")
    binary = paths.pop(f"{backend}_binary")
    return HostEntry(role, ssh, interfaces, registry.make(backend, variants.get(backend)), cpus, management,
                     **paths, binary=binary)


def _interfaces(role: str, raw: Any, fail: Any) -> dict[str, str]:
    key = f"hosts.{role}.interfaces"
    if not isinstance(raw, dict):
        raise fail(key, f"missing: give {{ {', '.join(f'{n} = IFNAME' for n in LINKS_OF[role])} }}")
    for link in raw:
        if link not in LINKS_OF[role]:
            raise fail(f"{key}.{link}",
                       f"{role} has no link {link!r}: its links are {', '.join(LINKS_OF[role])}")
    for link in LINKS_OF[role]:
        name = raw.get(link)
        if name is None:
            raise fail(f"{key}.{link}", f"missing: name the interface of {role} on link {link}")
        if not isinstance(name, str) or not IFNAME_RE.match(name):
            raise fail(f"{key}.{link}", f"{name!r} is not an interface name (1-15 letters, digits and _.:-, "
                                        "neither starting with '-' nor '.' or '..')")
    if len(set(raw.values())) != len(raw):
        raise fail(key, "two links on one interface: each link end needs its own interface")
    return dict(raw)


def _offline_cpus(raw: Any, key: str, fail: Any) -> tuple[int, ...]:
    try:
        if isinstance(raw, str):
            cpus = parse_user_cpu_list(raw)
        elif isinstance(raw, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in raw):
            cpus = tuple(raw)
        else:
            raise ValueError
    except ValueError:
        raise fail(key, "give CPU numbers as a list [1, 2] or a string such as \"1-7\"") from None
    if 0 in cpus:
        raise fail(key, "CPU 0 cannot go offline (it keeps the host reachable): remove 0")
    if any(c < 0 for c in cpus):
        raise fail(key, "CPU numbers are not negative")
    return tuple(sorted(set(cpus)))


def _check_whole(inventory: Inventory, fail: Any) -> None:
    topo, choice = inventory.topology(), inventory.backends()
    for host, role in topo.translators().items():  # a DUT's backend must play its roles (the napt is dut1's)
        if TRANSLATOR_ROLES[type(role)] not in choice.renderer(role).roles:
            dut = topo.host(host).parent or host
            why = str(choice.refusal(topo)).split(" (--backend ")[0]
            raise fail(f"hosts.{dut}.backend", f"{why} (hosts.{dut}.backend)")
    seen: dict[str, str] = {}
    for role, host in inventory.hosts.items():
        if host.ssh in seen:
            raise fail(f"hosts.{role}.ssh", f"{host.ssh!r} is also {seen[host.ssh]}: the testbed needs "
                                            "four machines (one per role); give each role its own host")
        seen[host.ssh] = role
    networks = link_networks(inventory.topology())
    for role, host in inventory.hosts.items():
        if host.management is None:
            continue
        address = ipaddress.ip_address(host.management)
        for net in networks:
            if address.version == net.version and address in net:
                raise fail(f"hosts.{role}.management", f"{address} lies in the test network {net}: "
                                                       "manage the host over another network")


def link_networks(topo: Topology) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Every network the topology puts on its test links, plus the translation prefix."""
    nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for host in topo.hosts:
        for iface in host.interfaces:
            nets += [ipaddress.ip_interface(a).network for a in iface.addresses]
    if topo.nat64_prefix:
        nets.append(ipaddress.ip_network(topo.nat64_prefix))
    return nets
