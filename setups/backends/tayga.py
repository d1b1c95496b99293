"""tayga (user-space stateless NAT64 over a TUN device) in every translator role of the testbeds.

CLAT, CE and BR are SIIT with explicit address mappings (EAM); the PLAT is tayga's dynamic pool followed
by a stateful NAT44 (nftables SNAT) to the PLAT's public address, which puts on the wire what Jool's
`pool4 add ADDR --udp 0-65535` does. tayga maps whole addresses: it does not check MAP-T port sets, and
a BR serves only the CEs listed in the topology (one per IPv4 address).

tayga 0.9.2 refuses private and TEST-NET IPv4 addresses behind the well-known prefix 64:ff9b::/96
(RFC 6052 3.1), exactly the paper's addresses, and now and then (about one UDP datagram in 65536) writes a
zero UDP checksum after a 4->6 translation, which IPv6 forbids and the next translator drops. The "patched"
variant is Debian's tayga rebuilt by tools/build-tayga with tools/patches/tayga-*.patch (`wkpf-strict no`;
a computed zero UDP checksum sent as 0xffff); the "stock" variant is Debian's binary, usable only with a
network-specific prefix (e.g. 2001:db8:64::/96) and with that rare loss.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ...paths import build_dir
from ..paper import is_well_known
from ..steps import Cmd, Daemon, Step, WriteFile
from ..topology import Clat, Host, MapBrRole, MapCeRole, Plat, Translator
from . import (
    USER_SPACE_SINGLE_THREAD,
    BackendBase,
    Process,
    RenderContext,
    VariantOption,
    declared,
    linux,
    whole_address_ces,
)
from .linux import PLAT_DYNAMIC_POOL

# The TUN device: a name of the suite's own (Debian's tayga service uses "nat64"; a DUT may have one).
TUN = "xlatbench64"
# tayga's own addresses (sources of the ICMP errors it sends); outside every prefix of the testbeds.
# 192.0.0.0/29 is the IPv4 service continuity prefix of RFC 7335.
LOCAL_ADDRESSES = {"dut1": ("192.0.0.1", "2001:db8:ff::1"), "dut2": ("192.0.0.2", "2001:db8:ff::2")}
STOCK_BINARY = "/usr/sbin/tayga"
VARIANTS = ("patched", "stock")
STOCK_PREFIX = "2001:db8:64::/96"  # a network-specific prefix: stock tayga refuses the paper's addresses
VARIANT_OPTION = VariantOption(
    flag="tayga",
    choices=VARIANTS,
    default="patched",
    help="patched: Debian's tayga rebuilt with `wkpf-strict no`, keeps the paper's 64:ff9b::/96; "
    "stock: Debian's binary, needs a network-specific prefix",
    default_prefix={"stock": STOCK_PREFIX},
)


def patched_binary() -> Path:
    """Where tools/build-tayga puts the patched tayga."""
    return build_dir() / "tayga" / "tayga"


class TaygaBackend(BackendBase):
    name = "tayga"
    roles = frozenset({"clat", "plat", "ce", "br"})
    execution_model = USER_SPACE_SINGLE_THREAD
    # Its queue to user space: drops here (tx_dropped) mean tayga did not keep up.
    queue_device = TUN
    variant_option = VARIANT_OPTION
    own_build = "the tayga executable (tools/build-tayga builds the patched one)"
    # tayga 0.9.2 drops an IPv4 UDP datagram with checksum 0 on its way to IPv6 (seen: a PLAT passed none of
    # Knot's XDP-mode replies); neither variant's patches change that.
    accepts_zero_udp_checksum = False

    def __init__(self, variant: str = "patched") -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown tayga variant {variant!r}: choose patched or stock")
        self.variant = variant

    @property
    def binary(self) -> str:
        return str(patched_binary()) if self.variant == "patched" else STOCK_BINARY

    def files(self, host: str, ctx: RenderContext) -> dict[str, str]:
        base = f"{ctx.rundir}/{host}-tayga"
        return {"conf": f"{base}.conf", "data": f"{base}.d", "pid": f"{base}.pid", "log": f"{base}.log"}

    def version(self) -> str:
        return tayga_version(self.variant)

    def processes(self, host: str, ctx: RenderContext) -> list[Process]:
        """The daemon; it is up once it runs (it opens its TUN at start)."""
        files = self.files(host, ctx)
        return [Process(f"tayga ({host})", files["pid"], "tayga", log=files["log"])]

    def devices(self, ctx: RenderContext) -> tuple[str, ...]:
        return (TUN,)

    def created_device(self, argv: tuple[str, ...]) -> str | None:
        return TUN if len(argv) >= 3 and argv[-1] == "--mktun" else None

    def owns_undo(self, argv: tuple[str, ...]) -> bool:
        return len(argv) >= 3 and argv[-1] == "--mktun" and "tayga" in argv[0]

    def undo(self, argv: tuple[str, ...]) -> str | None:
        """`--mktun` made the TUN device: deleting it undoes it."""
        return f"ip link del {TUN}" if self.owns_undo(argv) else None

    def with_binary(self, argv: tuple[str, ...], binary: str) -> tuple[str, ...]:
        return (binary, *argv[1:]) if argv and Path(argv[0]).name == "tayga" else argv

    def preflight_facts(self, binary: str | None = None) -> list[str]:
        lines = ['echo "tayga=$(dpkg-query -W -f \'${Version}\' tayga 2>/dev/null || echo absent)"']
        if binary:
            q = shlex.quote(binary)
            lines.append(f'echo "tayga_binary=$([ -x {q} ] && echo present || echo absent)"')
        return lines

    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]:
        if binary and facts.get("tayga_binary") != "present":
            return [f"{role}: tayga binary {binary} (hosts.{role}.tayga_binary) missing or not executable: "
                    "run tools/build-tayga there, or fix the key"]
        if not binary and facts.get("tayga", "absent") == "absent":
            return [f"{role}: tayga not installed: apt-get install tayga, or set hosts.{role}.tayga_binary"]
        return []

    def preflight_report(self, facts: Mapping[str, str]) -> object | None:
        return facts.get("tayga")

    def preflight_summary(self, report: object | None) -> str:
        return f"tayga {report}" if report not in (None, "absent") else ""

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]:
        files = self.files(host.name, ctx)
        v4_local, v6_local = LOCAL_ADDRESSES.get(host.name, LOCAL_ADDRESSES["dut1"])
        prefix = role.pool6 if isinstance(role, Clat | Plat) else role.dmr
        if self.variant == "stock" and is_well_known(prefix):
            raise ValueError(
                "stock tayga 0.9.2 drops the paper's TEST-NET/private addresses inside "
                "64:ff9b::/96: use --tayga patched (built by tools/install-deps) or a "
                "network-specific prefix such as --nat64-prefix 2001:db8:64::/96"
            )
        conf = [f"tun-device {TUN}", f"ipv4-addr {v4_local}", f"ipv6-addr {v6_local}", f"prefix {prefix}"]
        if self.variant == "patched":
            conf.append("wkpf-strict no")
        extra, routes, nat = self._role_lines(role, prefix, files, ctx)
        conf += extra
        steps: list[Step] = [WriteFile(files["conf"], "\n".join(conf) + "\n")]
        if isinstance(role, Plat):
            steps.append(Cmd(("mkdir", "-p", files["data"])))
        steps += [
            Cmd((self.binary, "--config", files["conf"], "--mktun")),
            Cmd(("ip", "link", "set", TUN, "up")),
        ]
        steps += [Cmd(r) for r in routes]
        steps += nat
        steps.append(
            Daemon((self.binary, "--config", files["conf"], "--nodetach"), files["pid"], files["log"])
        )
        return steps

    def _role_lines(self, role: Translator, prefix: str, files: dict[str, str],
                    ctx: RenderContext) -> tuple[list[str], list[tuple[str, ...]], list[Step]]:
        """The role's own tayga.conf lines, routes and NAT steps."""
        conf_extra: list[str] = []
        routes: list[tuple[str, ...]] = []
        nat: list[Step] = []
        if isinstance(role, Clat):
            conf_extra += [f"map {v4} {v6}" for v4, v6 in role.eam]
            routes += [("ip", "route", "add", "default", "dev", TUN)]
            routes += [("ip", "-6", "route", "add", f"{v6}/128", "dev", TUN) for _, v6 in role.eam]
        elif isinstance(role, Plat):
            conf_extra += [f"dynamic-pool {PLAT_DYNAMIC_POOL}", f"data-dir {files['data']}"]
            routes += [
                ("ip", "-6", "route", "add", prefix, "dev", TUN),
                ("ip", "route", "add", PLAT_DYNAMIC_POOL, "dev", TUN),
            ]
            nat = self._plat_nat(role, ctx)
        elif isinstance(role, MapCeRole):
            ce = role.ce
            conf_extra.append(f"map {ce.ipv4_address} {ce.map_address}")
            routes += [
                ("ip", "route", "add", "default", "dev", TUN),
                ("ip", "-6", "route", "add", f"{ce.map_address}/128", "dev", TUN),
            ]
        elif isinstance(role, MapBrRole):
            ces = whole_address_ces(role, self.name)
            conf_extra += [f"map {ce.ipv4_address} {ce.map_address}" for ce in ces]
            routes += [("ip", "-6", "route", "add", prefix, "dev", TUN)]
            routes += [("ip", "route", "add", fmr.ipv4_prefix, "dev", TUN) for fmr in role.fmrs]
        else:
            raise TypeError(f"tayga backend cannot render {type(role).__name__}")
        return conf_extra, routes, nat

    @staticmethod
    def _plat_nat(role: Plat, ctx: RenderContext) -> list[Step]:
        return linux.plat_snat(f"{ctx.prefix}_plat", role.ipv4_interface, PLAT_DYNAMIC_POOL, role.pool4,
                               role.pool4_netmap)

    def unavailable(self) -> str | None:
        path = Path(self.binary)
        if not path.is_file():
            if self.variant == "patched":
                return (
                    f"patched tayga not built at {path}: run tools/install-deps (it calls "
                    "tools/build-tayga), or use --tayga stock with --nat64-prefix 2001:db8:64::/96"
                )
            return f"tayga not installed at {path}: apt-get install tayga"
        return None

    def describe(self, role: Translator) -> dict[str, object]:
        info: dict[str, object] = {
            "implementation": "tayga",
            **declared(self),
            "variant": self.variant,
            "binary": self.binary,
            "version": tayga_version(self.variant),
            "prefix": role.pool6 if isinstance(role, Clat | Plat) else role.dmr,
        }
        if self.variant == "patched":
            info["patches"] = "tools/patches/tayga-*.patch: wkpf-strict no; zero UDP checksum sent as 0xffff"
        else:
            info["limitations_stock"] = "zero UDP checksum after 4->6 in about 1 of 65536 datagrams (dropped)"
        if isinstance(role, Plat):
            info["nat44"] = linux.plat_nat44_text(PLAT_DYNAMIC_POOL, role.pool4, role.pool4_netmap)
        if isinstance(role, MapCeRole | MapBrRole):
            info["limitations"] = "EAM per CE address; MAP-T port sets are not checked by tayga"
        if isinstance(role, MapBrRole):
            info["ces_served"] = (
                f"{len(role.served_ces())} CE(s), one EAM each: tayga maps whole addresses, so each CE needs "
                "its own IPv4 address (Jool's BR applies the rule to any CE of the BMR)"
            )
        path = Path(self.binary)
        if path.is_file():
            info["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        return info


def tayga_version(variant: str) -> str:
    """Debian package version of the source (patched) or of the installed binary (stock)."""
    if variant == "patched":
        stamp = patched_binary().with_name("VERSION")
        try:
            return stamp.read_text().strip()
        except FileNotFoundError:
            return "unknown (build/tayga/VERSION missing)"
    if shutil.which("dpkg-query") is None:
        return "unknown"
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "tayga"], capture_output=True, text=True, check=False
    )
    return f"{out.stdout.strip()} (Debian)" if out.returncode == 0 else "unknown"
