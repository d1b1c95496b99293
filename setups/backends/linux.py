"""Plain Linux networking with the paper's iproute2 / sysctl / iptables lines: interfaces, static routes,
packet forwarding (the baseline DUTs) and the stateful NAT44 (netfilter's conntrack) of the MAP-T CE's
`napt` namespace and of the single `nat44` gateway, with its optional nftables cap on new connections."""

from __future__ import annotations

import platform
import subprocess

from ..steps import Cmd, Step
from ..topology import Forwarding, Interface, Item, Nat44, Route

# A PLAT's IPv6 clients get addresses from this pool before the NAT44 (our choice: shared address
# space of RFC 6598, never on the wire); every translator backend's PLAT uses it with `plat_snat`.
PLAT_DYNAMIC_POOL = "100.64.0.0/24"


def render_item(item: Item) -> list[Step]:
    """Steps for one non-translator item, spelled as in the paper."""
    if isinstance(item, Interface):
        steps: list[Step] = [Cmd(("ip", "link", "set", item.name, "up"))]
        steps += [Cmd(("ip", "address", "add", address, "dev", item.name)) for address in item.addresses]
        return steps
    if isinstance(item, Route):
        source = ("src", item.source) if item.source else ()
        return [Cmd(("ip", "route", "add", item.destination, "via", item.via, *source))]
    if isinstance(item, Forwarding):
        steps = []
        if item.ipv4:
            steps.append(Cmd(("sysctl", "-w", "net.ipv4.conf.all.forwarding=1")))
        if item.ipv6:
            steps.append(Cmd(("sysctl", "-w", "net.ipv6.conf.all.forwarding=1")))
        return steps
    if isinstance(item, Nat44):
        return [*_nat44_cap(item), _nat44_rule(item)]
    raise TypeError(f"linux backend cannot render {type(item).__name__}")


def _nat44_rule(item: Nat44) -> Cmd:
    """The paper's iptables SNAT (ports into `ports`), or NETMAP onto a prefix (one address per source)."""
    if item.netmap:
        target: tuple[str, ...] = ("NETMAP", "--to", item.to_address)
    else:
        ports = f":{item.ports[0]}-{item.ports[1]}" if item.ports is not None else ""
        target = ("SNAT", "--to-source", item.to_address + ports)
    return Cmd(("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", item.source, "-o", item.out_interface,
                "-p", item.protocol, "-j", *target))


# The nftables table holding a NAT44's cap on new connections.
NAT44_CAP_TABLE = "xlatbench_nat44_cap"


def _nat44_cap(item: Nat44) -> list[Step]:
    """A cap on the NAT44's new connections (a known answer for the establishment rate): new flows of
    `source` forwarded beyond `new_per_s` per second (token bucket, burst Nat44.cap_burst) are dropped before
    the NAT sees them, so they make no connection."""
    if item.new_per_s is None:
        return []
    return [
        Cmd(("nft", "add", "table", "ip", NAT44_CAP_TABLE)),
        Cmd(("nft", "add", "chain", "ip", NAT44_CAP_TABLE, "forward",
             "{ type filter hook forward priority filter; }")),
        Cmd(("nft", "add", "rule", "ip", NAT44_CAP_TABLE, "forward", "ip", "saddr", item.source,
             "ct", "state", "new", "limit", "rate", "over", f"{item.new_per_s}/second", "burst",
             str(item.cap_burst), "packets", "counter", "drop")),
    ]


def nat44_description(item: Nat44) -> dict[str, object]:
    """What a record says of a NAT44 the kernel does: the rule's kind, source, pool and cap."""
    return {"implementation": "linux", "nat": "iptables NETMAP" if item.netmap else "iptables SNAT",
            "source": item.source, "pool": item.to_address, "ports": item.ports,
            "new_connections_per_s_cap": item.new_per_s, "cap_burst_packets": item.cap_burst,
            "nat44": _iptables_version()}


def plat_snat(table: str, out_interface: str, source: str, to_address: str,
              netmap: str | None = None) -> list[Step]:
    """The PLAT's stateful NAT44 in the kernel (nftables): `source` leaving `out_interface` gets
    `to_address`, ports kept when free (what `jool pool4 add ADDR --udp 0-65535` puts on the wire); with
    `netmap` (a prefix as long as `source`) each address of `source` gets its own of `netmap` instead, the
    host part kept (nftables' prefix NAT), ports kept when free."""
    target = ("snat", "to", to_address) if netmap is None else \
        ("snat", "ip", "prefix", "to", "ip", "saddr", "map", f"{{ {source} : {netmap} }}")
    return [
        Cmd(("nft", "add", "table", "ip", table)),
        Cmd(("nft", "add", "chain", "ip", table, "postrouting",
             "{ type nat hook postrouting priority srcnat; }")),
        Cmd(("nft", "add", "rule", "ip", table, "postrouting", "oifname", out_interface,
             "ip", "saddr", source, "counter", *target)),
    ]


def plat_nat44_text(source: str, role_pool4: str, netmap: str | None) -> str:
    """How the PLAT's NAT44 (plat_snat) maps its dynamic pool, for describe()."""
    if netmap is None:
        return f"nftables SNAT {source} -> {role_pool4} (kernel)"
    return f"nftables prefix SNAT {source} -> {netmap}, one address per client, ports kept (kernel)"


def describe() -> dict[str, object]:
    """Kernel release and the netfilter front end: in-kernel forwarding and NAT44 are the kernel's."""
    return {"implementation": "linux", "version": platform.release(), "nat44": _iptables_version()}


def _iptables_version() -> str:
    try:
        out = subprocess.run(["iptables", "--version"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        return "iptables not installed"
    return out.strip()
