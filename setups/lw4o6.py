"""lw4o6 (RFC 7596) binding arithmetic: the one place that computes which IPv4 address, PSID (port set)
and lwB4 IPv6 address each subscriber has, for the lwB4's configuration, the lwAFTR's binding table and the
tester that plays lwB4s.

Subscriber number i (0-based): IPv4 address = the pool's address number i >> psid_len, PSID = i & (2^psid_len
- 1), its ports RFC 7597 section 5.1's port set of that PSID (setups/mapt.port_set), its lwB4 IPv6 address
the B4 prefix with interface ID i + 1. Unlike MAP, nothing of this is derivable from the IPv6 address
alone: the lwAFTR keeps the table (per subscriber one entry).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

from .mapt import port_set, psid_of_port

LWAFTR_ADDRESS = "2001:db8:6::1"  # the lwAFTR's IPv6 tunnel end point (as the MAP-E BR's)
B4_PREFIX = "2001:db8:b4::/64"
POOL = "192.0.2.0/24"
# Our choice: the pool for more subscribers than 192.0.2.0/24 x 2^psid_len holds (RFC 6598 shared space).
LARGE_POOL = "100.64.0.0/10"


@dataclass(frozen=True)
class Lw4o6Rule:
    """How subscribers are numbered: IPv4 pool, PSID length and offset (bits), the lwB4s' IPv6 prefix."""

    ipv4_pool: str = POOL
    psid_len: int = 5
    psid_offset: int = 0
    b4_prefix: str = B4_PREFIX

    def __post_init__(self) -> None:
        if not 0 <= self.psid_len <= 16 or not 0 <= self.psid_offset <= 16 - self.psid_len:
            raise ValueError(f"PSID length {self.psid_len} with offset {self.psid_offset} does not fit a "
                             "16-bit port (RFC 7597 5.1)")
        ipaddress.IPv4Network(self.ipv4_pool)
        if ipaddress.IPv6Network(self.b4_prefix).prefixlen > 96:
            raise ValueError(f"lwB4 prefix {self.b4_prefix} longer than /96")

    def capacity(self) -> int:
        """Subscribers the rule holds: pool addresses x port sets (and interface IDs of the B4 prefix)."""
        pool = ipaddress.IPv4Network(self.ipv4_pool).num_addresses << self.psid_len
        ids = ipaddress.IPv6Network(self.b4_prefix).num_addresses - 1
        return min(pool, ids)


@dataclass(frozen=True)
class Binding:
    """One subscriber's binding: (IPv4 address, PSID) <-> lwB4 IPv6 address, with its port set."""

    index: int
    ipv4_address: str
    psid: int
    psid_len: int
    port_ranges: tuple[tuple[int, int], ...]
    b4_address: str

    @property
    def port_count(self) -> int:
        return sum(last - first + 1 for first, last in self.port_ranges)


def rule_for(subscribers: int, psid_len: int = 5) -> Lw4o6Rule:
    """The default rule (192.0.2.0/24), or the larger pool when `subscribers` do not fit it."""
    rule = Lw4o6Rule(psid_len=psid_len)
    if subscribers > rule.capacity():
        rule = Lw4o6Rule(ipv4_pool=LARGE_POOL, psid_len=psid_len)
    check_count(rule, subscribers)
    return rule


def check_count(rule: Lw4o6Rule, subscribers: int) -> None:
    """ValueError in one line when `subscribers` do not fit the rule's pool and port sets."""
    if not 1 <= subscribers <= rule.capacity():
        raise ValueError(f"{subscribers} lw4o6 subscribers do not fit pool {rule.ipv4_pool} with "
                         f"{rule.psid_len}-bit PSIDs: it holds {rule.capacity()}; ask for 1 to "
                         f"{rule.capacity()}")


def binding(rule: Lw4o6Rule, index: int) -> Binding:
    """Subscriber number `index`'s binding."""
    if not 0 <= index < rule.capacity():
        raise ValueError(f"subscriber {index} is outside pool {rule.ipv4_pool} "
                         f"({rule.capacity()} subscribers)")
    pool = ipaddress.IPv4Network(rule.ipv4_pool)
    psid = index & ((1 << rule.psid_len) - 1)
    b4 = ipaddress.IPv6Network(rule.b4_prefix).network_address + index + 1
    return Binding(
        index=index,
        ipv4_address=str(pool.network_address + (index >> rule.psid_len)),
        psid=psid,
        psid_len=rule.psid_len,
        port_ranges=port_set(psid, rule.psid_len, rule.psid_offset),
        b4_address=str(b4),
    )


def bindings(rule: Lw4o6Rule, count: int) -> Iterator[Binding]:
    """Subscribers 0 .. count - 1 (generated, not held: a table of millions is written as it goes)."""
    check_count(rule, count)
    for index in range(count):
        yield binding(rule, index)


def binding_of(rule: Lw4o6Rule, ipv4: str, port: int, subscribers: int) -> Binding | None:
    """The binding of subscribers 0 .. subscribers - 1 that holds (IPv4 address, port), or None (what a
    lwAFTR's table answers for the inner source / destination and port of a packet)."""
    pool = ipaddress.IPv4Network(rule.ipv4_pool)
    address = ipaddress.IPv4Address(ipv4)
    psid = psid_of_port(port, rule.psid_len, rule.psid_offset)
    if address not in pool or psid is None:
        return None
    index = ((int(address) - int(pool.network_address)) << rule.psid_len) | psid
    return binding(rule, index) if index < subscribers else None
