"""Known-answer faults injected with nftables on the topology's inner link (this kernel has no netem):
DUT1-DUT2, or for a single-DUT topology the DUT's server-side link.

Queries are the UDP datagrams to port 53 that DUT1 forwards onto the link; replies are those from port 53
that DUT2 forwards onto it. Where the link carries IPv4 in IPv6 (MAP-E, lw4o6) the rule matches the UDP
port of the inner IPv4 datagram (`meta l4proto 4`, then the inner header at @th). Each fault lives in a
table `<prefix>_fault` of the DUT's namespace, with a counter, so a test can compare what the tester saw
with what the rule did.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from dataclasses import dataclass

from ..topology import LwAftrRole, LwB4Role, MapeBrRole, MapeCeRole, Topology
from .emulator import Emulation

# The inner UDP ports of IPv4 in IPv6 (next header 4): the transport header nftables sees is the inner
# IPv4 header (20 bytes, no options), the UDP source port 160 bits on, the destination port 176.
TUNNELLED_DPORT_53 = "meta l4proto 4 @th,176,16 53"
TUNNELLED_SPORT_53 = "meta l4proto 4 @th,160,16 53"


def dns_match(topology: Topology, family: str, reply: bool = False) -> str:
    """The nftables match of DNS queries (replies) on `topology`'s inner link of `family`."""
    tunnelled = family == "ip6" and any(
        isinstance(role, MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole)
        for role in topology.translators().values())
    if tunnelled:
        return TUNNELLED_SPORT_53 if reply else TUNNELLED_DPORT_53
    return "udp sport 53" if reply else "udp dport 53"


@dataclass(frozen=True)
class Fault:
    """kind: "random-loss" (drop each query with probability permyriad/10000), "nth-loss" (drop query
    0, n, 2n, ...: exactly one in n), "dup-replies" (duplicate reply 0, n, 2n, ... toward DUT1),
    "rate-cap" (drop the queries beyond n per second: a token bucket of RATE_CAP_BURST_S x n packets,
    full at the start)."""

    kind: str
    n: int

    def __post_init__(self) -> None:
        if self.kind not in ("random-loss", "nth-loss", "dup-replies", "rate-cap"):
            raise ValueError(f"unknown fault {self.kind!r}")
        if self.n < 1 or (self.kind == "random-loss" and self.n > 10000):
            raise ValueError(f"fault parameter {self.n} out of range")


# The rate cap's bucket: what passes after a sender stall the tester still accepts (its --max-lag, 20 ms).
RATE_CAP_BURST_S = 0.02


def rate_cap_burst(per_second: int) -> int:
    """The rate cap's bucket (packets) for a cap of `per_second` packets per second."""
    return max(1, round(per_second * RATE_CAP_BURST_S))


def _table(emulation: Emulation) -> str:
    return f"{emulation.prefix}_fault"


def inject(emulation: Emulation, fault: Fault) -> dict[str, str]:
    """Install `fault`; returns where (namespace) and the rule text."""
    link = emulation.topology.link(emulation.topology.inner_link)
    dut1, dut2 = link.a, link.b
    peer = emulation.topology.host(dut1.host)
    dut1_address = next(a for i in peer.interfaces if i.name == dut1.interface for a in i.addresses)
    address = ipaddress.ip_interface(dut1_address).ip
    family = "ip" if address.version == 4 else "ip6"
    if fault.kind == "dup-replies":
        if dut2.host == "server":
            raise ValueError(
                f"dup-replies needs a DUT forwarding replies onto {link.name}; in {emulation.topology.name} "
                "the server sends them: use random-loss or nth-loss"
            )
        host, oif = dut2.host, dut2.interface
        match = dns_match(emulation.topology, family, reply=True)
        action = f'numgen inc mod {fault.n} == 0 counter dup to {address} device "{oif}"'
    else:
        host, oif = dut1.host, dut1.interface
        match = dns_match(emulation.topology, family)
        test = (
            f"numgen random mod 10000 < {fault.n}"
            if fault.kind == "random-loss"
            else f"limit rate over {fault.n}/second burst {rate_cap_burst(fault.n)} packets"
            if fault.kind == "rate-cap"
            else f"numgen inc mod {fault.n} == 0"
        )
        action = f"{test} counter drop"
    rule = f'oifname "{oif}" {match} {action}'
    script = (
        f"table {family} {_table(emulation)} {{\n"
        f"  chain forward_faults {{\n    type filter hook forward priority 0; policy accept;\n"
        f"    {rule}\n  }}\n}}\n"
    )
    netns = emulation.netns_of[host]
    done = subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"],
        input=script,
        text=True,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{netns}: nft refused the fault rule: {done.stderr.strip()}")
    return {"netns": netns, "family": family, "rule": rule}


def clear(emulation: Emulation) -> None:
    """Remove every fault table (idempotent)."""
    for host in ("dut1", "dut2"):
        netns = emulation.netns_of.get(host)
        if netns:
            for family in ("ip", "ip6"):
                subprocess.run(
                    ["ip", "netns", "exec", netns, "nft", "delete", "table", family, _table(emulation)],
                    capture_output=True,
                    check=False,
                )


def fault_counters(emulation: Emulation) -> dict[str, int]:
    """Packets each fault rule acted on, by namespace."""
    counts = {}
    for host in ("dut1", "dut2"):
        netns = emulation.netns_of.get(host)
        if netns is None:
            continue
        for family in ("ip", "ip6"):
            done = subprocess.run(
                ["ip", "netns", "exec", netns, "nft", "-j", "list", "table", family, _table(emulation)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                continue
            for entry in json.loads(done.stdout)["nftables"]:
                for expr in entry.get("rule", {}).get("expr", []):
                    if "counter" in expr:
                        counts[netns] = counts.get(netns, 0) + expr["counter"]["packets"]
    return counts
