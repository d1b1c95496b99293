"""MAP-T address and port arithmetic (RFC 7597 sections 5 and 5.2, used by MAP-T per RFC 7599).

Everything a CE's configuration derives from its Basic Mapping Rule (BMR) and its end-user IPv6 prefix:
the embedded-address (EA) bits, the IPv4 address (rule IPv4 prefix + IPv4 suffix), the port-set
identifier (PSID), the port set, and the MAP IPv6 address the CE uses as the source of its traffic.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class Bmr:
    """A MAP rule: rule IPv6 prefix, rule IPv4 prefix, EA-bits length (bits), PSID offset `a` (bits).

    PSID offset 0 means the first port set includes the system ports 0-1023 (the paper's choice).
    """

    ipv6_prefix: str
    ipv4_prefix: str
    ea_bits_len: int
    psid_offset: int = 0

    def __post_init__(self) -> None:
        v6 = ipaddress.IPv6Network(self.ipv6_prefix)
        v4 = ipaddress.IPv4Network(self.ipv4_prefix)
        if not 0 <= self.ea_bits_len <= 48:
            raise ValueError(f"EA-bits length {self.ea_bits_len} outside 0..48 (RFC 7597 5.2)")
        if v6.prefixlen + self.ea_bits_len > 64:
            raise ValueError(f"rule IPv6 prefix /{v6.prefixlen} + {self.ea_bits_len} EA bits exceeds /64")
        if self.psid_len(v4) < 0:
            raise ValueError(
                f"{self.ea_bits_len} EA bits cannot hold the {32 - v4.prefixlen}-bit IPv4 suffix "
                "of a full IPv4 address (prefix delegation is not supported here)"
            )
        if not 0 <= self.psid_offset <= 16 - self.psid_len(v4):
            raise ValueError(
                f"PSID offset {self.psid_offset} leaves no room for a "
                f"{self.psid_len(v4)}-bit PSID in a 16-bit port"
            )

    def psid_len(self, v4: ipaddress.IPv4Network | None = None) -> int:
        """PSID length k (bits): EA bits left after the IPv4 suffix."""
        v4 = v4 or ipaddress.IPv4Network(self.ipv4_prefix)
        return self.ea_bits_len - (32 - v4.prefixlen)

    def rule_fields(self) -> list[str]:
        """The rule's four fields as RFC 7597 lists them (and jool_mapt takes them): IPv6 prefix, IPv4
        prefix, EA-bits length, PSID offset."""
        return [self.ipv6_prefix, self.ipv4_prefix, str(self.ea_bits_len), str(self.psid_offset)]


@dataclass(frozen=True)
class MapCe:
    """What a BMR assigns to one CE (derived, never configured by hand)."""

    end_user_prefix: str
    ea_bits: int  # the EA-bits value
    ea_bits_len: int  # bits
    ipv4_suffix: int
    ipv4_address: str
    psid: int
    psid_len: int  # bits
    port_ranges: tuple[tuple[int, int], ...]  # inclusive (first, last) port ranges
    map_address: str  # RFC 7597 5.2 MAP IPv6 address (interface ID 0 : IPv4 : PSID)

    @property
    def port_count(self) -> int:
        """Number of ports in the CE's port set."""
        return sum(last - first + 1 for first, last in self.port_ranges)

    def ea_bits_binary(self) -> str:
        """The EA bits as the paper writes them: IPv4 suffix bits | PSID bits."""
        suffix_len = self.ea_bits_len - self.psid_len
        return f"{self.ipv4_suffix:0{suffix_len}b}|{self.psid:0{self.psid_len}b}"


def map_ce(bmr: Bmr, end_user_prefix: str) -> MapCe:
    """Apply `bmr` to a CE's end-user IPv6 prefix (which must lie inside the rule IPv6 prefix)."""
    rule6 = ipaddress.IPv6Network(bmr.ipv6_prefix)
    rule4 = ipaddress.IPv4Network(bmr.ipv4_prefix)
    eup = ipaddress.IPv6Network(end_user_prefix)
    if not eup.subnet_of(rule6):
        raise ValueError(f"end-user prefix {eup} is not inside the rule IPv6 prefix {rule6}")
    if eup.prefixlen < rule6.prefixlen + bmr.ea_bits_len:
        raise ValueError(
            f"end-user prefix {eup} is shorter than rule prefix + EA bits "
            f"(/{rule6.prefixlen + bmr.ea_bits_len})"
        )
    eup_value = int(eup.network_address)
    ea_bits = (eup_value >> (128 - rule6.prefixlen - bmr.ea_bits_len)) & ((1 << bmr.ea_bits_len) - 1)
    k = bmr.psid_len(rule4)
    suffix = ea_bits >> k
    psid = ea_bits & ((1 << k) - 1)
    ipv4 = ipaddress.IPv4Address(int(rule4.network_address) | suffix)
    return MapCe(
        end_user_prefix=str(eup),
        ea_bits=ea_bits,
        ea_bits_len=bmr.ea_bits_len,
        ipv4_suffix=suffix,
        ipv4_address=str(ipv4),
        psid=psid,
        psid_len=k,
        port_ranges=port_set(psid, k, bmr.psid_offset),
        map_address=str(map_address(eup, ipv4, psid)),
    )


def port_set(psid: int, psid_len: int, psid_offset: int) -> tuple[tuple[int, int], ...]:
    """The ports of a PSID (RFC 7597 5.1): for each A, A*2^(16-a) + PSID*2^m + j, j < 2^m.

    With offset a > 0, A runs 1..2^a-1 (A = 0 would hold the system ports); with a = 0, A is 0 only.
    """
    m = 16 - psid_offset - psid_len
    if psid_offset == 0:
        first_a, last_a = 0, 0
    else:
        first_a, last_a = 1, (1 << psid_offset) - 1
    ranges = []
    for a_value in range(first_a, last_a + 1):
        start = (a_value << (16 - psid_offset)) | (psid << m)
        ranges.append((start, start + (1 << m) - 1))
    return tuple(ranges)


def map_address(eup: ipaddress.IPv6Network, ipv4: ipaddress.IPv4Address, psid: int) -> ipaddress.IPv6Address:
    """End-user prefix, subnet ID 0, interface ID = 16 zero bits | IPv4 address | 16-bit PSID."""
    interface_id = (int(ipv4) << 16) | psid
    return ipaddress.IPv6Address(int(eup.network_address) | interface_id)


def flows_fit(ce: MapCe, threads: int, ports_per_thread: int) -> str:
    """Check that a tester's distinct flows fit the CE's port set; return a sentence saying so.

    The tester's own source ports may lie anywhere: the CE's NAT44 maps each distinct flow
    (client address, source port) to one port of the set, so what must fit is the number of flows.
    Raises ValueError when they do not fit.
    """
    if threads < 1 or ports_per_thread < 1:
        raise ValueError(f"threads ({threads}) and ports per thread ({ports_per_thread}) must be >= 1")
    flows = threads * ports_per_thread
    ports = ce.port_count
    if flows > ports:
        raise ValueError(
            f"{threads} threads x {ports_per_thread} ports = {flows} flows do not fit the "
            f"{ports}-port set of CE {ce.ipv4_address} PSID {ce.psid}: use fewer ports per thread"
        )
    return (
        f"{threads} threads x {ports_per_thread} ports = {flows} distinct flows fit the {ports}-port set "
        f"of CE {ce.ipv4_address} PSID {ce.psid} ({_ranges_text(ce.port_ranges)})"
    )


def tester_port_ranges(ces: tuple[MapCe, ...] | list[MapCe]) -> list[tuple[tuple[int, int], ...]]:
    """The port ranges a tester playing `ces` sends from, per CE: the first range of a single CE
    (consecutive ports from its start, `--bind --first-port`), every range of each CE when it plays
    several (`--source`)."""
    if len(ces) == 1:
        return [ces[0].port_ranges[:1]]
    return [ce.port_ranges for ce in ces]


def tester_max_sockets(ces: tuple[MapCe, ...] | list[MapCe]) -> int:
    """Sockets a tester playing `ces` can open: it deals them round-robin over the CEs (socket g on CE
    g mod N), so each CE takes at most ceil(sockets / N) and the smallest CE's port count bounds all."""
    sizes = [sum(last - first + 1 for first, last in ranges) for ranges in tester_port_ranges(ces)]
    return len(sizes) * min(sizes) if sizes else 0


def _ranges_text(ranges: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"{first}-{last}" for first, last in ranges)


def derive_ces(bmr: Bmr, first_end_user_prefix: str, count: int) -> list[MapCe]:
    """`count` CEs of the rule, the first at `first_end_user_prefix`, each with its own IPv4 address.

    CE i keeps the first CE's PSID and takes the next IPv4 suffix (wrapping inside the rule IPv4 prefix),
    so its EA bits are the first CE's + i * 2^k; its end-user prefix (same length as the first's) carries
    those EA bits after the rule IPv6 prefix. One IPv4 address per CE is what a translator that maps whole
    addresses (tayga, one EAM per CE) needs; it limits `count` to the rule's 2^(32 - IPv4 prefix length)
    addresses, while a BR that applies the rule itself (Jool) could serve every EA-bits value.
    """
    first = map_ce(bmr, first_end_user_prefix)
    rule6 = ipaddress.IPv6Network(bmr.ipv6_prefix)
    suffix_len = first.ea_bits_len - first.psid_len
    if not 1 <= count <= 1 << suffix_len:
        raise ValueError(
            f"{count} CEs with an IPv4 address each do not fit rule {bmr.ipv4_prefix} "
            f"({1 << suffix_len} addresses): ask for 1 to {1 << suffix_len} CEs"
        )
    length = ipaddress.IPv6Network(first_end_user_prefix).prefixlen
    shift = 128 - rule6.prefixlen - bmr.ea_bits_len
    ces = []
    for index in range(count):
        suffix = (first.ipv4_suffix + index) % (1 << suffix_len)
        ea_bits = (suffix << first.psid_len) | first.psid
        network = int(rule6.network_address) | (ea_bits << shift)
        ces.append(map_ce(bmr, f"{ipaddress.IPv6Address(network)}/{length}"))
    return ces


def rule_capacity(bmr: Bmr) -> int:
    """How many CEs the rule's address and PSID space holds: one per EA-bits value (2^EA-bits length)."""
    return 1 << bmr.ea_bits_len


def ce_at(bmr: Bmr, index: int) -> MapCe:
    """CE number `index` of a run (0-based): its EA-bits value is `index` (IPv4 suffix index >> k, PSID
    index & (2^k - 1)), its end-user prefix the rule IPv6 prefix + those EA bits (subnet ID 0)."""
    if not 0 <= index < rule_capacity(bmr):
        raise ValueError(f"CE number {index} is outside rule {' '.join(bmr.rule_fields())}, which holds "
                         f"{rule_capacity(bmr)} CEs (2^{bmr.ea_bits_len} EA-bits values)")
    rule6 = ipaddress.IPv6Network(bmr.ipv6_prefix)
    length = rule6.prefixlen + bmr.ea_bits_len
    network = int(rule6.network_address) | (index << (128 - length))
    return map_ce(bmr, f"{ipaddress.IPv6Address(network)}/{length}")


def indexed_ces(bmr: Bmr, count: int) -> list[MapCe]:
    """CEs 0 .. count - 1 of the rule (ce_at); ValueError in one line when the rule holds fewer."""
    if not 1 <= count <= rule_capacity(bmr):
        raise ValueError(f"{count} CEs do not fit rule {' '.join(bmr.rule_fields())}: its "
                         f"{bmr.ea_bits_len} EA bits hold {rule_capacity(bmr)} CEs (IPv4 addresses x port "
                         f"sets): ask for 1 to {rule_capacity(bmr)} CEs or a rule with more EA bits")
    return [ce_at(bmr, index) for index in range(count)]


def psid_of_port(port: int, psid_len: int, psid_offset: int) -> int | None:
    """The PSID whose port set holds `port` (RFC 7597 5.1), None for a port the offset excludes (A = 0)."""
    m = 16 - psid_offset - psid_len
    if psid_offset > 0 and port >> (16 - psid_offset) == 0:
        return None
    return (port >> m) & ((1 << psid_len) - 1)


def map_address_of(bmr: Bmr, ipv4: str, port: int) -> str | None:
    """The MAP address a BR derives for an IPv4 address and port of its rule (RFC 7597 5.2: the EA bits are
    the IPv4 suffix and the port's PSID); None when the address lies outside the rule or the port is
    excluded. What the BR checks an outer source against, and encapsulates a reply to."""
    rule4 = ipaddress.IPv4Network(bmr.ipv4_prefix)
    address = ipaddress.IPv4Address(ipv4)
    k = bmr.psid_len(rule4)
    psid = psid_of_port(port, k, bmr.psid_offset)
    if address not in rule4 or psid is None:
        return None
    ea_bits = ((int(address) - int(rule4.network_address)) << k) | psid
    rule6 = ipaddress.IPv6Network(bmr.ipv6_prefix)
    network = int(rule6.network_address) | (ea_bits << (128 - rule6.prefixlen - bmr.ea_bits_len))
    eup = ipaddress.IPv6Network((network, rule6.prefixlen + bmr.ea_bits_len))
    return str(map_address(eup, address, psid))
