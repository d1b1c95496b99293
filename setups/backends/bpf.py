"""bpf: a stateless SIIT (RFC 7915) in the kernel, as a tc-BPF classifier (setups/backends/bpf/siit.bpf.c),
and the IPv4-in-IPv6 tunnel ends of MAP-E and lw4o6 (setups/backends/bpf/encap.bpf.c): CE, BR, lwB4, lwAFTR
and the emulation's own tunnel ends (TunnelEnd) of the single-DUT topologies.

It plays every translator role the way tayga does, with the kernel in place of tayga's TUN and user-space
loop: the role's routes point to `<prefix>-siit0`, one end of a veth pair; the program on the ingress
(clsact, direct action) of the other end `<prefix>-siit1` translates whatever arrives, and the kernel routes
the result on. Both ends carry the same MAC address and `siit0` does no ARP/ND, so every packet routed to it
reaches `siit1` addressed to it. Addresses map by EAM entries first, then by the RFC 6052 /96 prefix (the
paper's 64:ff9b::/96 with TEST-NET addresses is fine: no well-known-prefix check). The PLAT adds a dynamic
pool (an LRU table in the program) and the kernel's nftables SNAT to its public address, as tayga's PLAT does.
An IPv4 UDP datagram without a checksum gets one computed when it becomes IPv6 (RFC 7915 section 4.5), so
it can carry the replies of Knot's XDP mode, which have none (counter `udp_zero_checksum_computed`).

The tunnel ends load, attach and route the same way (the pair, `encap` pinned beside its maps): a packet
routed into the pair is encapsulated (IPv4) or decapsulated (IPv6, next header 4). A CE or lwB4 keeps its
one binding (IPv4, PSID) -> its MAP / lwB4 address in the program's binding table, a MAP-E BR applies its
rule arithmetically, a lwAFTR's binding table is a hash map created for the run's size (`bpftool map create`,
reused by the program at load; filled with `bpftool batch`), which a run refuses beforehand when it would
not fit the memory this machine has. Drops are counted per reason in `encap_stats` (ENCAP_STATS).
Test-only faults (`BpfBackend(fault=...)`): a BR that drops packets from odd ports as outside the port set,
and one that encapsulates replies to odd ports to the next CE.

The objects are built by CMake (build/bpf/siit.bpf.o, build/bpf/encap.bpf.o). `bpftool prog loadall` loads one
and pins the program and its maps under a bpffs mounted at `<rundir>/bpf` (one directory per host), `bpftool
map update` writes the configuration, `tc filter ... bpf da pinned` attaches it. The bpffs is mounted outside
the namespaces (`machine_steps`): `ip netns exec` mounts its own /sys, which hides /sys/fs/bpf. In emulation
`down` unmounts it with the run directory and the tc filters go with the namespaces' interfaces. On a testbed
host the object is a file of that host (the inventory's `bpf_binary`, else the controller's build path), which
preflight looks for beside bpftool and the kernel's bpffs; every step has its own undo line in the host's
journal (`undo`): the tc filter and the clsact qdisc deleted, the pins removed, the bpffs unmounted. The
translated IPv4 packets enter the host on the inner end while their sources route to the outer one, so a
testbed host's strict reverse-path filter would drop them: the inner end gets rp_filter 0, and preflight
refuses a host whose `all.rp_filter` is 1 (strict), which overrides it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import platform
import shlex
import shutil
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...paths import build_dir
from ..lw4o6 import Binding
from ..mapt import Bmr
from ..steps import Cmd, Step, WriteFile
from ..topology import (
    Clat,
    Host,
    LwAftrRole,
    LwB4Role,
    MapBrRole,
    MapCeRole,
    MapeBrRole,
    MapeCeRole,
    Plat,
    Translator,
    TunnelEnd,
)
from . import IN_KERNEL_SOFTIRQ, BackendBase, RenderContext, declared, linux, whole_address_ces

Argv = tuple[str, ...]

# Counter names, in the order of `enum stat` in siit.bpf.c.
STATS = (
    "translated_4to6",
    "translated_6to4",
    "drop_fragment",
    "drop_ipv4_options",
    "drop_ipv6_extension_header",
    "drop_protocol",
    "drop_icmp_type",
    "drop_udp_zero_checksum",
    "drop_unmapped_source",
    "drop_unmapped_destination",
    "drop_pool_collision",
    "drop_malformed",
    "drop_helper_error",
    "drop_not_ip",
    "drop_multicast",
    "udp_zero_checksum_computed",  # translated too: a part of translated_4to6
)
CFG_PREFIX, CFG_POOL = 1, 2
# Counter names of the tunnel ends, in the order of `enum stat` in encap.bpf.c.
ENCAP_STATS = (
    "encapsulated",
    "decapsulated",
    "drop_fragment",
    "drop_protocol",
    "drop_malformed",
    "drop_not_tunnel",
    "drop_unknown_peer",
    "drop_outside_rule",
    "drop_no_binding",  # the port is outside every bound port set (CE, lwB4, lwAFTR)
    "drop_source_mismatch",  # BR / lwAFTR: outer source not the CE's address for inner source and port
    "drop_destination_mismatch",
    "drop_helper_error",
    "drop_not_ip",
    "drop_multicast",
    "fault_port_dropped",
    "fault_wrong_ce",  # encapsulated too: a part of `encapsulated`
)
F_BR_SIDE, F_RULE = 1, 2
# Test-only faults of a BR / lwAFTR (the known-answer tests): name -> flag of encap.bpf.c.
FAULTS = {"odd-port-drop": 4, "wrong-ce": 8}
# Kernel memory of one binding of the lwAFTR's hash map (BPF_F_NO_PREALLOC): the element (an htab_elem
# header of about 48 bytes, the 8-byte key, the 16-byte value, rounded by the allocator to 96) plus its
# bucket (16 bytes, buckets rounded up to a power of two): 128 bytes is our upper estimate.
BINDING_BYTES = 128
# A binding table may take at most this share of the memory available (MemAvailable) when a run starts.
BINDING_MEMORY_SHARE = 0.5
# Bindings written one `bpftool map update` each up to this many; above, one `bpftool batch` file.
BINDINGS_INLINE = 16
# Both ends of the translator's veth pair (locally administered unicast address).
SIIT_MAC = "02:00:5e:51:17:01"
EXECUTION_MODEL = IN_KERNEL_SOFTIRQ


def object_path() -> Path:
    """Where CMake puts the compiled program."""
    return build_dir() / "bpf" / "siit.bpf.o"


def bpffs(ctx: RenderContext) -> str:
    """The bpffs holding every pinned program and map of this run."""
    return f"{ctx.rundir}/bpf"


def hex_bytes(data: bytes) -> tuple[str, ...]:
    """bpftool's spelling of a key or value: `hex` then one two-digit word per byte."""
    return ("hex", *(f"{b:02x}" for b in data))


def v4(address: str) -> bytes:
    return ipaddress.IPv4Address(address).packed


def v6(address: str) -> bytes:
    return ipaddress.IPv6Address(address).packed


def config_value(prefix: str | None, pool: str | None) -> bytes:
    """`struct config` of siit.bpf.c: prefix6[16], pool4 (network order), pool_size, flags (host order)."""
    flags = 0
    prefix_bytes = bytes(16)
    if prefix is not None:
        net = ipaddress.IPv6Network(prefix)
        if net.prefixlen != 96:
            raise ValueError(f"the bpf translator maps only /96 prefixes (RFC 6052), got {prefix}")
        prefix_bytes = net.network_address.packed
        flags |= CFG_PREFIX
    pool_bytes, pool_size = bytes(4), 0
    if pool is not None:
        net4 = ipaddress.IPv4Network(pool)
        pool_bytes, pool_size = net4.network_address.packed, net4.num_addresses
        flags |= CFG_POOL
    return prefix_bytes + pool_bytes + struct.pack("=II", pool_size, flags)


def encap_object_path() -> Path:
    """Where CMake puts the compiled tunnel ends."""
    return build_dir() / "bpf" / "encap.bpf.o"


TunnelRole = MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole | TunnelEnd


@dataclass(frozen=True)
class TunnelPlan:
    """What a tunnel end's program is given: its side (BR or CE), its own and its peer's tunnel addresses,
    the MAP rule it applies (BR: arithmetically) or its bindings (IPv4, PSID, IPv6), the PSID length and
    offset, and the IPv4 and IPv6 prefixes the host routes into it."""

    br_side: bool
    local6: str | None
    peer6: str | None
    bmr: Bmr | None
    psid_len: int
    psid_offset: int
    bindings: tuple[Binding, ...] | tuple[tuple[str, int, str], ...]
    binding_count: int
    ipv4_routes: tuple[str, ...]
    ipv6_routes: tuple[str, ...]


def tunnel_plan(role: TunnelRole) -> TunnelPlan:
    """The tunnel end a role (or the emulation's own TunnelEnd) is."""
    if isinstance(role, MapeCeRole):
        ce = role.ce
        return TunnelPlan(False, None, role.br_address, None, ce.psid_len, role.bmr.psid_offset,
                          ((ce.ipv4_address, ce.psid, ce.map_address),), 1, ("default",),
                          (f"{ce.map_address}/128",))
    if isinstance(role, LwB4Role):
        b = role.binding
        return TunnelPlan(False, None, role.aftr_address, None, role.rule.psid_len, role.rule.psid_offset,
                          (b,), 1, ("default",), (f"{b.b4_address}/128",))
    if isinstance(role, MapeBrRole):
        if len(role.fmrs) != 1:
            raise ValueError(f"the bpf MAP-E BR applies one rule, got {len(role.fmrs)}")
        fmr = role.fmrs[0]
        return TunnelPlan(True, role.br_address, None, fmr, fmr.psid_len(), fmr.psid_offset, (), 0,
                          (fmr.ipv4_prefix,), (f"{role.br_address}/128",))
    if isinstance(role, LwAftrRole):
        return TunnelPlan(True, role.aftr_address, None, None, role.rule.psid_len, role.rule.psid_offset,
                          tuple(role.bindings()), role.subscribers, (role.rule.ipv4_pool,),
                          (f"{role.aftr_address}/128",))
    if isinstance(role, TunnelEnd):
        br = role.side == "br"
        local, peer = (role.tunnel_end, None) if br else (None, role.tunnel_end)
        if role.bmr is not None:
            return TunnelPlan(br, local, peer, role.bmr, role.bmr.psid_len(), role.bmr.psid_offset, (), 0,
                              (role.bmr.ipv4_prefix,) if br else ("default",),
                              (f"{role.tunnel_end}/128",) if br else (role.bmr.ipv6_prefix,))
        assert role.rule is not None
        from ..lw4o6 import bindings
        return TunnelPlan(br, local, peer, None, role.rule.psid_len, role.rule.psid_offset,
                          tuple(bindings(role.rule, role.subscribers)), role.subscribers,
                          (role.rule.ipv4_pool,) if br else ("default",),
                          (f"{role.tunnel_end}/128",) if br else (role.rule.b4_prefix,))
    raise TypeError(f"bpf backend has no tunnel end for {type(role).__name__}")


def encap_config_value(plan: TunnelPlan, fault: str | None = None) -> bytes:
    """`struct config` of encap.bpf.c: local6[16], peer6[16], rule6[16], rule4 (network order), then
    rule4_len, rule6_len, ea_len, psid_len, psid_offset, flags (host order)."""
    flags = (F_BR_SIDE if plan.br_side else 0) | (F_RULE if plan.bmr is not None else 0)
    if fault is not None:
        flags |= FAULTS[fault]
    rule6, rule4, len4, len6, ea_len = bytes(16), bytes(4), 0, 0, 0
    if plan.bmr is not None:
        net6, net4 = ipaddress.IPv6Network(plan.bmr.ipv6_prefix), ipaddress.IPv4Network(plan.bmr.ipv4_prefix)
        rule6, rule4, len6, len4 = net6.network_address.packed, net4.network_address.packed, net6.prefixlen, \
            net4.prefixlen
        ea_len = plan.bmr.ea_bits_len
    local = v6(plan.local6) if plan.local6 else bytes(16)
    peer = v6(plan.peer6) if plan.peer6 else bytes(16)
    return local + peer + rule6 + rule4 + struct.pack("=IIIIII", len4, len6, ea_len, plan.psid_len,
                                                      plan.psid_offset, flags)


def binding_entry(ipv4: str, psid: int, ipv6: str) -> tuple[bytes, bytes]:
    """(key, value) of encap_bindings: IPv4 (network order) + PSID (host order), the IPv6 address."""
    return v4(ipv4) + struct.pack("=I", psid), v6(ipv6)


def binding_memory_refusal(count: int, available: int | None = None) -> str | None:
    """Why a binding table of `count` entries does not fit this machine's memory (one line), or None."""
    if available is None:
        available = mem_available()
    need = count * BINDING_BYTES
    if available is not None and need > available * BINDING_MEMORY_SHARE:
        return (f"a lwAFTR binding table of {count} entries needs about {need / 2**20:.0f} MiB of kernel "
                f"memory ({BINDING_BYTES} bytes each), more than {BINDING_MEMORY_SHARE:.0%} of the "
                f"{available / 2**20:.0f} MiB available here: ask for at most "
                f"{int(available * BINDING_MEMORY_SHARE // BINDING_BYTES)} subscribers")
    return None


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None when unreadable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class BpfBackend(BackendBase):
    name = "bpf"
    roles = frozenset({"clat", "plat", "ce", "br", "mape-ce", "mape-br", "lwb4", "lwaftr"})
    execution_model = EXECUTION_MODEL
    own_build = "the compiled program object (build/bpf/siit.bpf.o of the same commit)"
    # siit.bpf.c computes the checksum of IPv4 UDP without one (to 1536 bytes; longer: dropped).
    accepts_zero_udp_checksum = True

    def __init__(self, fault: str | None = None) -> None:
        """fault: a test-only BR / lwAFTR fault of FAULTS (known-answer tests), None for a correct one."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown bpf fault {fault!r}: choose {' or '.join(FAULTS)}")
        self.fault = fault

    def refusal(self, role: Translator) -> str | None:
        """Why this machine cannot hold `role` (a lwAFTR binding table beyond its memory), or None."""
        if isinstance(role, LwAftrRole):
            return binding_memory_refusal(role.subscribers)
        return None

    def devices(self, ctx: RenderContext) -> tuple[str, str]:
        """The veth pair: routes point to the first, the program sits on the second's ingress."""
        return f"{ctx.prefix}-siit0", f"{ctx.prefix}-siit1"

    def version(self) -> str:
        return bpf_version()

    def preflight_facts(self, binary: str | None = None) -> list[str]:
        """bpftool and tc, the kernel's bpffs, the object the host will load (its path, sha256) and the
        strict/loose reverse-path filter setting."""
        obj = shlex.quote(binary or str(object_path()))
        return ['echo "bpftool=$(command -v bpftool || echo absent)"',
                'echo "bpf_tc=$(command -v tc || echo absent)"',
                'echo "bpf_fs=$(grep -qw bpf /proc/filesystems && echo present || echo absent)"',
                f"echo bpf_object_path={obj}",  # the quoted path as one word: never inside double quotes
                f'echo "bpf_object=$( ([ -f {obj} ] && sha256sum {obj} | cut -c1-64) || echo absent)"',
                'echo "bpf_rp_filter=$(cat /proc/sys/net/ipv4/conf/all/rp_filter 2>/dev/null)"']

    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]:
        problems = []
        if facts.get("bpftool", "absent") == "absent":
            problems.append(f"{role}: bpftool not found (it loads the translator): apt-get install bpftool")
        if facts.get("bpf_tc", "absent") == "absent":
            problems.append(f"{role}: tc not found (it attaches the translator): apt-get install iproute2")
        if facts.get("bpf_fs", "absent") == "absent":
            problems.append(f"{role}: the kernel has no bpf file system (CONFIG_BPF_SYSCALL): boot a kernel "
                            "with BPF, or choose another backend for this host")
        if facts.get("bpf_object", "absent") == "absent":
            where = facts.get("bpf_object_path") or binary or str(object_path())
            problems.append(f"{role}: bpf translator object {where} not found on the host: copy "
                            f"build/bpf/siit.bpf.o there (`make build` of this commit) and set "
                            f"hosts.{role}.bpf_binary to its path")
        if facts.get("bpf_rp_filter", "").strip() == "1":
            problems.append(f"{role}: net.ipv4.conf.all.rp_filter is 1 (strict), which drops the bpf "
                            "translator's IPv4 output: run `sysctl -w net.ipv4.conf.all.rp_filter=2` "
                            "(loose) there")
        return problems

    def preflight_report(self, facts: Mapping[str, str]) -> object | None:
        found = facts.get("bpf_object", "absent")
        return {"bpftool": facts.get("bpftool"), "object": facts.get("bpf_object_path"),
                "sha256": None if found == "absent" else found}

    def preflight_summary(self, report: object | None) -> str:
        sha = report.get("sha256") if isinstance(report, dict) else None
        return f"bpf siit.bpf.o sha256 {sha[:12]}" if sha else ""

    def testbed_version(self, host_report: Mapping[str, object]) -> object | None:
        """The label `bpf_version` gives, of the object and the kernel the host's preflight found."""
        report = host_report.get(self.name)
        sha = report.get("sha256") if isinstance(report, dict) else None
        if not sha:
            return None
        return f"siit.bpf.o sha256 {str(sha)[:12]}, Linux {host_report.get('kernel')}"

    def owns_undo(self, argv: Argv) -> bool:
        return undo_of(argv) is not False

    def undo(self, argv: Argv) -> str | None:
        found = undo_of(argv)
        return found if isinstance(found, str) else None

    def with_binary(self, argv: Argv, binary: str) -> Argv:
        """The host's own object in `bpftool prog loadall OBJECT PINS ...`: `binary` (the host's siit.bpf.o)
        for the SIIT, the encap.bpf.o beside it for a tunnel end."""
        if argv[:3] != ("bpftool", "prog", "loadall"):
            return argv
        if Path(argv[3]).name == encap_object_path().name:
            binary = str(Path(binary).parent / encap_object_path().name)
        return (*argv[:3], binary, *argv[4:])

    def pins(self, host: str, ctx: RenderContext) -> str:
        """Directory of this host's pinned program (`siit`) and maps (`maps/siit_*`)."""
        return f"{bpffs(ctx)}/{host}"

    def counters_script(self, host: str, ctx: RenderContext) -> str:
        """siit_stats of `host`'s program: what it translated and what it dropped, per reason; for a
        tunnel end its encap_stats, after the word `encap`."""
        maps = f"{self.pins(host, ctx)}/maps"
        siit = shlex.join(("bpftool", "-j", "map", "dump", "pinned", f"{maps}/siit_stats"))
        encap = shlex.join(("bpftool", "-j", "map", "dump", "pinned", f"{maps}/encap_stats"))
        return f"if [ -e {shlex.quote(maps + '/encap_stats')} ]; then echo encap; {encap}; else {siit}; fi"

    def parse_counters(self, text: str) -> dict[str, int]:
        try:
            if text.startswith("encap"):
                return parse_stats(text[len("encap"):], ENCAP_STATS)
            return parse_stats(text)
        except (ValueError, TypeError, KeyError, AttributeError):
            return {}

    def run_time(self, host: str, ctx: RenderContext) -> tuple[int, int] | None:
        """`run_time_ns` and `run_cnt` of the pinned program (bpftool prog show)."""
        pins = self.pins(host, ctx)
        program = "encap" if Path(f"{pins}/encap").exists() else "siit"
        argv = ["bpftool", "-j", "prog", "show", "pinned", f"{pins}/{program}"]
        try:
            info = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
            return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))
        except (OSError, subprocess.CalledProcessError, ValueError, AttributeError):
            return None

    def machine_steps(self, ctx: RenderContext) -> list[Step]:
        """The bpffs for the pins, mounted once per machine outside any namespace."""
        where = bpffs(ctx)
        return [Cmd(("mkdir", "-p", where)), Cmd(("mount", "-t", "bpf", "bpf", where))]

    def render(self, role: Translator | TunnelEnd, host: Host, ctx: RenderContext) -> list[Step]:
        if isinstance(role, MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole | TunnelEnd):
            return self.render_tunnel(role, host, ctx)
        outer, inner = self.devices(ctx)
        pins = self.pins(host.name, ctx)
        prefix = role.pool6 if isinstance(role, Clat | Plat) else role.dmr
        eam, routes = self._role_lines(role, prefix, outer)
        pool = linux.PLAT_DYNAMIC_POOL if isinstance(role, Plat) else None
        steps: list[Step] = [] if ctx.world == "netns" else self.machine_steps(ctx)
        steps += [
            Cmd(("ip", "link", "add", outer, "address", SIIT_MAC, "type", "veth",
                 "peer", "name", inner, "address", SIIT_MAC)),
            # No ARP/ND and no IPv6 link-local address (no router solicitations); what multicast the
            # host still sends there (MLD reports of a router's groups) is counted as drop_multicast.
            Cmd(("ip", "link", "set", outer, "arp", "off", "addrgenmode", "none")),
            Cmd(("ip", "link", "set", outer, "up")),
            Cmd(("ip", "link", "set", inner, "up")),
            Cmd(("bpftool", "prog", "loadall", str(object_path()), pins, "type", "classifier",
                 "pinmaps", f"{pins}/maps")),
            self._update(pins, "siit_config", bytes(4), config_value(prefix, pool)),
        ]
        for address4, address6 in eam:
            steps.append(self._update(pins, "siit_eam4", v4(address4), v6(address6)))
            steps.append(self._update(pins, "siit_eam6", v6(address6), v4(address4)))
        if ctx.world != "netns":  # a testbed host's own rp_filter (emulation sets 0 in every namespace)
            steps.append(Cmd(("sysctl", "-w", f"net.ipv4.conf.{inner}.rp_filter=0")))
        steps += [
            Cmd(("tc", "qdisc", "add", "dev", inner, "clsact")),
            Cmd(("tc", "filter", "add", "dev", inner, "ingress", "bpf", "direct-action",
                 "object-pinned", f"{pins}/siit")),
        ]
        steps += [Cmd(r) for r in routes]
        if isinstance(role, Plat):
            steps += linux.plat_snat(f"{ctx.prefix}_plat", role.ipv4_interface, linux.PLAT_DYNAMIC_POOL,
                                     role.pool4, role.pool4_netmap)
        return steps

    def render_tunnel(self, role: TunnelRole, host: Host, ctx: RenderContext) -> list[Step]:
        """A tunnel end: the veth pair, the program with its configuration (and binding table), the routes
        into it. Faults apply to a BR / lwAFTR only (never to the emulation's own tunnel ends)."""
        outer, inner = self.devices(ctx)
        pins = self.pins(host.name, ctx)
        plan = tunnel_plan(role)
        fault = self.fault if isinstance(role, MapeBrRole | LwAftrRole) else None
        table = f"{pins}-bindings"  # bpffs refuses names with a dot
        steps: list[Step] = [] if ctx.world == "netns" else self.machine_steps(ctx)
        steps += [
            Cmd(("ip", "link", "add", outer, "address", SIIT_MAC, "type", "veth",
                 "peer", "name", inner, "address", SIIT_MAC)),
            Cmd(("ip", "link", "set", outer, "arp", "off", "addrgenmode", "none")),
            # What the host itself sends into the tunnel (Knot's replies, kdig) gets its checksum now: a
            # partial one would travel encapsulated to a receiver that checks it.
            Cmd(("ethtool", "-K", outer, "tx", "off")),
            Cmd(("ip", "link", "set", outer, "up")),
            Cmd(("ip", "link", "set", inner, "up")),
            Cmd(("bpftool", "map", "create", table, "type", "hash", "key", "8", "value", "16",
                 "entries", str(max(plan.binding_count, 1)), "name", "encap_bindings", "flags", "1")),
            Cmd(("bpftool", "prog", "loadall", str(encap_object_path()), pins, "type", "classifier",
                 "map", "name", "encap_bindings", "pinned", table, "pinmaps", f"{pins}/maps")),
            self._update(pins, "encap_config", bytes(4), encap_config_value(plan, fault)),
        ]
        entries = [binding_entry(b.ipv4_address, b.psid, b.b4_address) if isinstance(b, Binding)
                   else binding_entry(*b) for b in plan.bindings]
        if len(entries) <= BINDINGS_INLINE:
            steps += [Cmd(("bpftool", "map", "update", "pinned", table, "key", *hex_bytes(k),
                           "value", *hex_bytes(v))) for k, v in entries]
        else:
            batch = f"{ctx.rundir}/{host.name}-bindings.batch"
            lines = [" ".join(("map", "update", "pinned", table, "key", *hex_bytes(k),
                               "value", *hex_bytes(v))) for k, v in entries]
            steps += [WriteFile(batch, "\n".join(lines) + "\n"), Cmd(("bpftool", "batch", "file", batch))]
        if ctx.world != "netns":
            steps.append(Cmd(("sysctl", "-w", f"net.ipv4.conf.{inner}.rp_filter=0")))
        steps += [
            Cmd(("tc", "qdisc", "add", "dev", inner, "clsact")),
            Cmd(("tc", "filter", "add", "dev", inner, "ingress", "bpf", "direct-action",
                 "object-pinned", f"{pins}/encap")),
        ]
        steps += [Cmd(("ip", "route", "add", prefix, "dev", outer)) for prefix in plan.ipv4_routes]
        steps += [Cmd(("ip", "-6", "route", "add", prefix, "dev", outer)) for prefix in plan.ipv6_routes]
        return steps

    @staticmethod
    def _update(pins: str, table: str, key: bytes, value: bytes) -> Cmd:
        return Cmd(("bpftool", "map", "update", "pinned", f"{pins}/maps/{table}",
                    "key", *hex_bytes(key), "value", *hex_bytes(value)))

    @staticmethod
    def _role_lines(role: Translator, prefix: str,
                    dev: str) -> tuple[list[tuple[str, str]], list[tuple[str, ...]]]:
        """The role's EAM entries (IPv4, IPv6) and the routes that lead into the translator."""
        if isinstance(role, Clat):
            routes = [("ip", "route", "add", "default", "dev", dev)]
            routes += [("ip", "-6", "route", "add", f"{a6}/128", "dev", dev) for _, a6 in role.eam]
            return list(role.eam), routes
        if isinstance(role, Plat):
            return [], [
                ("ip", "-6", "route", "add", prefix, "dev", dev),
                ("ip", "route", "add", linux.PLAT_DYNAMIC_POOL, "dev", dev),
            ]
        if isinstance(role, MapCeRole):
            ce = role.ce
            return [(ce.ipv4_address, ce.map_address)], [
                ("ip", "route", "add", "default", "dev", dev),
                ("ip", "-6", "route", "add", f"{ce.map_address}/128", "dev", dev),
            ]
        if isinstance(role, MapBrRole):
            ces = whole_address_ces(role, "bpf")
            routes = [("ip", "-6", "route", "add", prefix, "dev", dev)]
            routes += [("ip", "route", "add", fmr.ipv4_prefix, "dev", dev) for fmr in role.fmrs]
            return [(ce.ipv4_address, ce.map_address) for ce in ces], routes
        raise TypeError(f"bpf backend cannot render {type(role).__name__}")

    def unavailable(self) -> str | None:
        for path in (object_path(), encap_object_path()):
            if not path.is_file():
                return f"bpf translator not built at {path}: run tools/install-deps, then make build"
        for tool in ("bpftool", "tc"):
            if shutil.which(tool) is None:
                return f"{tool} not found: run tools/install-deps (Debian packages bpftool, iproute2)"
        return None

    def describe(self, role: Translator) -> dict[str, object]:
        if isinstance(role, MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole):
            return self._describe_tunnel(role)
        info: dict[str, object] = {
            "implementation": "bpf",
            **declared(self),
            "version": bpf_version(),
            "object": str(object_path()),
            "source": "setups/backends/bpf/siit.bpf.c",
            "prefix": role.pool6 if isinstance(role, Clat | Plat) else role.dmr,
            "hook": "tc clsact ingress (cls_bpf direct-action) of the inner end of a veth pair",
        }
        if isinstance(role, Plat):
            info["nat44"] = linux.plat_nat44_text(linux.PLAT_DYNAMIC_POOL, role.pool4, role.pool4_netmap)
            info["pool"] = f"{linux.PLAT_DYNAMIC_POOL}: an address per IPv6 client, picked by a hash (LRU)"
        if isinstance(role, MapCeRole | MapBrRole):
            info["limitations"] = "EAM per CE address; MAP-T port sets are not checked by the translator"
        return info


    def _describe_tunnel(self, role: MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole) -> dict[str, object]:
        plan = tunnel_plan(role)
        info: dict[str, object] = {
            "implementation": "bpf",
            **declared(self),
            "version": encap_version(),
            "object": str(encap_object_path()),
            "source": "setups/backends/bpf/encap.bpf.c",
            "hook": "tc clsact ingress (cls_bpf direct-action) of the inner end of a veth pair",
            "tunnel": "IPv4 in IPv6 (next header 4), hop limit 64",
            "side": "BR" if plan.br_side else "CE",
            "tunnel_end": plan.local6 or plan.peer6,
        }
        if plan.bmr is not None:
            info["rule"] = " ".join(plan.bmr.rule_fields())
            info["port_set_check"] = "outer source = MAP address of (inner source, PSID of its port)"
        else:
            info["bindings"] = plan.binding_count
            info["port_set_check"] = "outer address = binding of (inner IPv4, PSID of its port)"
        if self.fault is not None and plan.br_side:
            info["fault"] = self.fault
        return info


def bpf_version() -> str:
    """The object's sha256 prefix and the kernel that runs it."""
    try:
        digest = hashlib.sha256(object_path().read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        digest = "unbuilt"
    return f"siit.bpf.o sha256 {digest}, Linux {platform.release()}"


def encap_version() -> str:
    """The tunnel ends' object's sha256 prefix and the kernel that runs it."""
    try:
        digest = hashlib.sha256(encap_object_path().read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        digest = "unbuilt"
    return f"encap.bpf.o sha256 {digest}, Linux {platform.release()}"


def undo_of(argv: Argv) -> str | None | bool:
    """The line reversing one of this backend's steps on a testbed host, None when the step needs none (it
    goes with an object another line removes), False when the step is not one of this backend's own."""
    q = shlex.quote
    if argv[:4] == ("mount", "-t", "bpf", "bpf") and len(argv) == 5:
        return f"umount {q(argv[4])}"
    if argv[:3] == ("bpftool", "prog", "loadall") and len(argv) > 4:
        return f"rm -rf {q(argv[4])}"  # unpins the program and its maps (pinmaps lies inside)
    if argv[:3] == ("bpftool", "map", "update") or argv[:2] == ("bpftool", "batch"):
        return None  # the maps go with their pins
    if argv[:3] == ("bpftool", "map", "create") and len(argv) > 3:
        return f"rm -f {q(argv[3])}"  # a binding table pinned beside the program's directory
    if argv[:2] == ("ethtool", "-K") and argv[3:] == ("tx", "off"):
        return None  # the device's own settings go with the device
    if argv[:3] == ("tc", "qdisc", "add") and argv[-1] == "clsact" and len(argv) == 6:
        return f"tc qdisc del dev {q(argv[4])} clsact"
    if argv[:3] == ("tc", "filter", "add") and argv[5:7] == ("ingress", "bpf"):
        return f"tc filter del dev {q(argv[4])} ingress"
    if argv[:3] == ("ip", "link", "set") and argv[4:] == ("arp", "off", "addrgenmode", "none"):
        return None  # the device's own settings go with the device (its `ip link del`)
    return False


def parse_stats(text: str, names: tuple[str, ...] = STATS) -> dict[str, int]:
    """The program's counters (summed over CPUs) from `bpftool -j map dump` of its `siit_stats` map (or
    `encap_stats`, with names=ENCAP_STATS)."""
    totals = dict.fromkeys(names, 0)
    for entry in json.loads(text):
        index = entry.get("key", 0)
        if isinstance(index, list):
            index = int.from_bytes(bytes(int(b, 16) for b in index), "little")
        values = entry.get("values", [])
        total = sum(int(v["value"]) if not isinstance(v["value"], list)
                    else int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in values)
        if 0 <= index < len(names):
            totals[names[index]] = total
    return totals


def read_stats(pins: str, netns: str | None = None) -> dict[str, int]:
    """The program's counters from its pinned `siit_stats` map (a tunnel end's `encap_stats`), read on
    this machine."""
    encap = Path(f"{pins}/maps/encap_stats").exists()
    stats = "encap_stats" if encap else "siit_stats"
    argv = ["bpftool", "-j", "map", "dump", "pinned", f"{pins}/maps/{stats}"]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return parse_stats(out, ENCAP_STATS if encap else STATS)
