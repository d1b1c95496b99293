"""The zone the tester asks: one AAAA record per dns64perf++-style name of a subnet.

Query k of the tester asks for the IPv4 address `subnet_base + (k mod subnet_size)` written as
`AAA-BBB-CCC-DDD.<domain>.` with zero-padded octets (the dns64perf++ convention). The zone holds
exactly those names, so every query of a correctly configured tester gets a NOERROR answer with one
AAAA record. The AAAA data embeds the IPv4 address in the low 32 bits of 2001:db8::/96, which makes
an answer easy to check by eye; its content is otherwise irrelevant (the server is an echo server).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

DEFAULT_DOMAIN = "dns64perf.test"
DEFAULT_SUBNET = "10.0.0.0/16"
AAAA_PREFIX = int(ipaddress.IPv6Address("2001:db8::"))

# Knot needs an SOA and an NS at the apex; the NS target's address is never queried.
_APEX = """$ORIGIN {domain}.
$TTL 3600
@ SOA ns admin 1 3600 600 86400 60
@ NS ns
ns A 127.0.0.1
"""


def query_label(address: ipaddress.IPv4Address) -> str:
    """The dns64perf++ label of an IPv4 address: 10.0.0.1 -> '010-000-000-001'."""
    return "-".join(f"{octet:03d}" for octet in address.packed)


def query_name(index: int, subnet: str = DEFAULT_SUBNET, domain: str = DEFAULT_DOMAIN) -> str:
    """The fully qualified name query `index` asks for; names wrap around at the subnet size."""
    network = ipaddress.IPv4Network(subnet, strict=True)
    address = network.network_address + (index % network.num_addresses)
    return f"{query_label(address)}.{domain.rstrip('.')}."


def aaaa_for(address: ipaddress.IPv4Address) -> ipaddress.IPv6Address:
    """The AAAA data served for a name: the IPv4 address in the low 32 bits of 2001:db8::/96."""
    return ipaddress.IPv6Address(AAAA_PREFIX | int(address))


def parse_subnet(subnet: str) -> ipaddress.IPv4Network:
    """An IPv4 subnet of at most 2^24 names; raises ValueError with a fix otherwise."""
    try:
        network = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as err:
        raise ValueError(f"bad subnet {subnet!r}: {err} (example: 10.0.0.0/16)") from None
    if network.prefixlen < 8:
        raise ValueError(f"subnet {subnet} has {network.num_addresses} names; use /8 or longer")
    return network


def write_zone(path: Path, domain: str = DEFAULT_DOMAIN, subnet: str = DEFAULT_SUBNET) -> int:
    """Write the zone file for `subnet` to `path` atomically; return the number of AAAA records."""
    network = parse_subnet(subnet)
    base = int(network.network_address)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", buffering=1 << 20) as out:
        out.write(_APEX.format(domain=domain))
        # Formatting by hand: ipaddress objects per record would make a /10 take minutes.
        for offset in range(network.num_addresses):
            value = base + offset
            a, b, c, d = value >> 24, (value >> 16) & 255, (value >> 8) & 255, value & 255
            out.write(f"{a:03d}-{b:03d}-{c:03d}-{d:03d} AAAA 2001:db8::{value >> 16:x}:{value & 0xFFFF:x}\n")
    os.replace(tmp, path)
    return network.num_addresses
