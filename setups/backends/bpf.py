"""bpf: a stateless SIIT (RFC 7915) in the kernel, as a tc-BPF classifier (setups/backends/bpf/siit.bpf.c).

It plays every translator role the way tayga does, with the kernel in place of tayga's TUN and user-space
loop: the role's routes point to `<prefix>-siit0`, one end of a veth pair; the program on the ingress
(clsact, direct action) of the other end `<prefix>-siit1` translates whatever arrives, and the kernel routes
the result on. Both ends carry the same MAC address and `siit0` does no ARP/ND, so every packet routed to it
reaches `siit1` addressed to it. Addresses map by EAM entries first, then by the RFC 6052 /96 prefix (the
paper's 64:ff9b::/96 with TEST-NET addresses is fine: no well-known-prefix check). The PLAT adds a dynamic
pool (an LRU table in the program) and the kernel's nftables SNAT to its public address, as tayga's PLAT does.
An IPv4 UDP datagram without a checksum gets one computed when it becomes IPv6 (RFC 7915 section 4.5), so
it can carry the replies of Knot's XDP mode, which have none (counter `udp_zero_checksum_computed`).

The object is built by CMake (build/bpf/siit.bpf.o). `bpftool prog loadall` loads it and pins the program and
its maps under a bpffs mounted at `<rundir>/bpf` (one directory per host), `bpftool map update` writes the
configuration, `tc filter ... bpf da pinned` attaches it. The bpffs is mounted outside the namespaces
(`machine_steps`): `ip netns exec` mounts its own /sys, which hides /sys/fs/bpf. In emulation `down` unmounts
it with the run directory and the tc filters go with the namespaces' interfaces. On a testbed host the object
is a file of that host (the inventory's `bpf_binary`, else the controller's build path), which preflight
looks for beside bpftool and the kernel's bpffs; every step has its own undo line in the host's journal
(`undo`): the tc filter and the clsact qdisc deleted, the pins removed, the bpffs unmounted. The translated
IPv4 packets enter the host on the inner end while their sources route to the outer one, so a testbed host's
strict reverse-path filter would drop them: the inner end gets rp_filter 0, and preflight refuses a host
whose `all.rp_filter` is 1 (strict), which overrides it.
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
from pathlib import Path

from ...paths import build_dir
from ..steps import Cmd, Step
from ..topology import Clat, Host, MapBrRole, MapCeRole, Plat, Translator
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


class BpfBackend(BackendBase):
    name = "bpf"
    roles = frozenset({"clat", "plat", "ce", "br", "mape-ce", "mape-br", "lwb4", "lwaftr"})
    execution_model = EXECUTION_MODEL
    own_build = "the compiled program object (build/bpf/siit.bpf.o of the same commit)"
    # siit.bpf.c computes the checksum of IPv4 UDP without one (to 1536 bytes; longer: dropped).
    accepts_zero_udp_checksum = True

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
        """The host's own object in `bpftool prog loadall OBJECT PINS ...`."""
        return (*argv[:3], binary, *argv[4:]) if argv[:3] == ("bpftool", "prog", "loadall") else argv

    def pins(self, host: str, ctx: RenderContext) -> str:
        """Directory of this host's pinned program (`siit`) and maps (`maps/siit_*`)."""
        return f"{bpffs(ctx)}/{host}"

    def counters_script(self, host: str, ctx: RenderContext) -> str:
        """siit_stats of `host`'s program: what it translated and what it dropped, per reason."""
        stats = f"{self.pins(host, ctx)}/maps/siit_stats"
        return shlex.join(("bpftool", "-j", "map", "dump", "pinned", stats))

    def parse_counters(self, text: str) -> dict[str, int]:
        try:
            return parse_stats(text)
        except (ValueError, TypeError, KeyError, AttributeError):
            return {}

    def run_time(self, host: str, ctx: RenderContext) -> tuple[int, int] | None:
        """`run_time_ns` and `run_cnt` of the pinned program (bpftool prog show)."""
        argv = ["bpftool", "-j", "prog", "show", "pinned", f"{self.pins(host, ctx)}/siit"]
        try:
            info = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
            return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))
        except (OSError, subprocess.CalledProcessError, ValueError, AttributeError):
            return None

    def machine_steps(self, ctx: RenderContext) -> list[Step]:
        """The bpffs for the pins, mounted once per machine outside any namespace."""
        where = bpffs(ctx)
        return [Cmd(("mkdir", "-p", where)), Cmd(("mount", "-t", "bpf", "bpf", where))]

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]:
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
        if not object_path().is_file():
            return f"bpf translator not built at {object_path()}: run tools/install-deps, then make build"
        for tool in ("bpftool", "tc"):
            if shutil.which(tool) is None:
                return f"{tool} not found: run tools/install-deps (Debian packages bpftool, iproute2)"
        return None

    def describe(self, role: Translator) -> dict[str, object]:
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


def bpf_version() -> str:
    """The object's sha256 prefix and the kernel that runs it."""
    try:
        digest = hashlib.sha256(object_path().read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        digest = "unbuilt"
    return f"siit.bpf.o sha256 {digest}, Linux {platform.release()}"


def undo_of(argv: Argv) -> str | None | bool:
    """The line reversing one of this backend's steps on a testbed host, None when the step needs none (it
    goes with an object another line removes), False when the step is not one of this backend's own."""
    q = shlex.quote
    if argv[:4] == ("mount", "-t", "bpf", "bpf") and len(argv) == 5:
        return f"umount {q(argv[4])}"
    if argv[:3] == ("bpftool", "prog", "loadall") and len(argv) > 4:
        return f"rm -rf {q(argv[4])}"  # unpins the program and its maps (pinmaps lies inside)
    if argv[:3] == ("bpftool", "map", "update"):
        return None  # the maps go with their pins
    if argv[:3] == ("tc", "qdisc", "add") and argv[-1] == "clsact" and len(argv) == 6:
        return f"tc qdisc del dev {q(argv[4])} clsact"
    if argv[:3] == ("tc", "filter", "add") and argv[5:7] == ("ingress", "bpf"):
        return f"tc filter del dev {q(argv[4])} ingress"
    if argv[:3] == ("ip", "link", "set") and argv[4:] == ("arp", "off", "addrgenmode", "none"):
        return None  # the device's own settings go with the device (its `ip link del`)
    return False


def parse_stats(text: str) -> dict[str, int]:
    """The program's counters (summed over CPUs) from `bpftool -j map dump` of its `siit_stats` map."""
    totals = dict.fromkeys(STATS, 0)
    for entry in json.loads(text):
        index = entry.get("key", 0)
        if isinstance(index, list):
            index = int.from_bytes(bytes(int(b, 16) for b in index), "little")
        values = entry.get("values", [])
        total = sum(int(v["value"]) if not isinstance(v["value"], list)
                    else int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in values)
        if 0 <= index < len(STATS):
            totals[STATS[index]] = total
    return totals


def read_stats(pins: str, netns: str | None = None) -> dict[str, int]:
    """The program's counters from its pinned `siit_stats` map, read on this machine."""
    argv = ["bpftool", "-j", "map", "dump", "pinned", f"{pins}/maps/siit_stats"]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    return parse_stats(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
