"""ip6tnl: the Linux kernel's IPv4-in-IPv6 tunnel (RFC 2473, `ip6_tunnel`) as the MAP-E CE (RFC 7597) and the
lw4o6 B4 (RFC 7596), for real hosts.

The CE's NAPT44 into its port set is the napt namespace's (the topology's Nat44 item, rendered by Linux as
for the MAP-T CE); this backend adds what makes the CE host a tunnel end: an `ip6tnl` device in mode ipip6
from the CE's MAP address (MAP-E: end-user prefix, 16 zero bits, IPv4 address, PSID; the lwB4: its bound
IPv6 address) to the BR's (lwAFTR's) address, without the RFC 2473 encapsulation-limit option (`encaplimit
none`: the BR expects next header 4 right after the IPv6 header) and with hop limit 64; the MAP (lwB4)
address on the device, so that the encapsulated replies to it are the host's own and the kernel decapsulates
them; the IPv4 the tester sends to routed into the device (a real host keeps its own IPv4 default route: the
testbed narrows `default` to the server's network, as for the other CEs).

`ip link add ... type ip6tnl` (rtnetlink) rather than `ip -6 tunnel add`: the latter needs the fallback
device `ip6tnl0`, which a kernel may create in the initial namespace only; rtnetlink also loads an
installed module itself. Render only here: this machine's kernel has no ip6tnl (docs/testbed.md), and
preflight refuses such a host in one line. Every step's reversal is the generic one (`ip link del` of the
device, which takes its address and routes; `ip address del`, `ip route del`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..steps import Cmd, Step
from ..topology import Host, LwB4Role, MapeCeRole, Translator
from . import IN_KERNEL_SOFTIRQ, BackendBase, RenderContext, declared

HOP_LIMIT = 64  # ENCAP conventions: outer hop limit 64


def tunnel_name(ctx: RenderContext, role: Translator) -> str:
    """The tunnel device (at most 15 characters, as the kernel takes them)."""
    name = f"{ctx.prefix}-{'mape' if isinstance(role, MapeCeRole) else 'lwb4'}"
    if len(name) > 15:
        raise ValueError(f"tunnel name {name!r} is longer than the kernel's 15 characters: use a shorter "
                         "prefix")
    return name


def tunnel_ends(role: MapeCeRole | LwB4Role) -> tuple[str, str]:
    """(local, remote) of the tunnel: the CE's MAP address (the lwB4's address) and the BR's (lwAFTR's)."""
    if isinstance(role, MapeCeRole):
        return role.ce.map_address, role.br_address
    return role.binding.b4_address, role.aftr_address


class Ip6tnlBackend(BackendBase):
    name = "ip6tnl"
    roles = frozenset({"mape-ce", "lwb4"})
    execution_model = IN_KERNEL_SOFTIRQ
    accepts_zero_udp_checksum = True  # the inner IPv4 datagram is carried as it is

    def version(self) -> str:
        return "the host's kernel (ip6_tunnel)"

    def describe(self, role: Translator) -> dict[str, object]:
        return {"implementation": "ip6tnl", **declared(self), "module": "ip6_tunnel",
                "version": self.version()}

    def unavailable(self) -> str | None:
        if os.path.isdir("/sys/module/ip6_tunnel") or os.path.exists("/sys/class/net/ip6tnl0"):
            return "the ip6tnl backend renders for real hosts only (the emulation runs its CEs in BPF)"
        return ("this kernel has no ip6tnl (CONFIG_IPV6_TUNNEL): use `xlatbench setup render ... --backend "
                "mape-ce=ip6tnl` for a real host, or the bpf backend here")

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]:
        if not isinstance(role, MapeCeRole | LwB4Role):
            raise TypeError(f"the ip6tnl backend serves {', '.join(sorted(self.roles))}, "
                            f"not {type(role).__name__}")
        device = tunnel_name(ctx, role)
        local, remote = tunnel_ends(role)
        return [
            Cmd(("ip", "link", "add", device, "type", "ip6tnl", "mode", "ipip6", "local", local, "remote",
                 remote, "encaplimit", "none", "hoplimit", str(HOP_LIMIT), "dev", role.ipv6_interface)),
            Cmd(("ip", "link", "set", device, "up")),
            Cmd(("ip", "address", "add", f"{local}/128", "dev", device)),
            Cmd(("ip", "route", "add", "default", "dev", device)),
        ]

    def preflight_facts(self, binary: str | None = None) -> list[str]:
        """Whether the kernel has ip6_tunnel: loaded (or built in: it has parameters, so /sys/module shows
        it), listed as built in, or installed as a module rtnetlink can load."""
        return [
            'echo "ip6tnl=$(if [ -d /sys/module/ip6_tunnel ] || [ -e /sys/class/net/ip6tnl0 ]; then '
            "echo loaded; elif grep -qs '/ip6_tunnel[.]ko' \"/lib/modules/$(uname -r)/modules.builtin\"; "
            "then echo builtin; "
            'elif modprobe -n -q ip6_tunnel 2>/dev/null; then echo installed; else echo absent; fi)"',
        ]

    def preflight_report(self, facts: Mapping[str, str]) -> object | None:
        return {"ip6_tunnel": facts.get("ip6tnl", "absent")}

    def preflight_summary(self, report: object | None) -> str:
        found = report.get("ip6_tunnel") if isinstance(report, dict) else None
        return f"ip6tnl {found}" if found and found != "absent" else ""

    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]:
        if facts.get("ip6tnl", "absent") in ("loaded", "builtin", "installed"):
            return []
        return [f"{role}: the kernel has no ip6tnl (IPv4-in-IPv6 tunnel, CONFIG_IPV6_TUNNEL: module "
                "ip6_tunnel neither loaded, built in nor installed), which the ip6tnl backend's CE/lwB4 "
                "needs: boot a kernel with it (Debian's has the module), or use backend = \"bpf\""]
