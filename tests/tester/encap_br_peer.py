"""A self-contained MAP-E BR (or lwAFTR) for the encapsulating tester's known answers (server namespace).

It reads IPv4-in-IPv6 frames (next header 4) to the BR's address from an AF_PACKET socket, checks each one
as RFC 7597 §8.1 has a BR do — the outer source must be the MAP address that the inner IPv4 source and source
port give under the rule (the rule's arithmetic is setups/mapt.py's, independent of the tester's C++; with
--lw4o6 the lwB4 address bound to that IPv4 address and PSID, setups/lw4o6.py's binding arithmetic) —
answers the DNS query itself (one AAAA record), and encapsulates the reply from the BR's address to the MAP
address of the reply's inner destination and port. Faults with a known answer:
  --drop-below N   a BR whose idea of each CE's port set lacks the set's first N ports: it drops (and counts)
                   a query from one of them, as a BR drops a source port outside the CE's port set;
  --wrong-ce-every N  every N-th reply is encapsulated to the next CE's MAP address (EA bits + 1).
It prints "ready" once its socket is bound and, on SIGTERM, one JSON line of its counters.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import signal
import socket
import struct
import sys

from xlatbench.setups.lw4o6 import Lw4o6Rule, binding
from xlatbench.setups.mapt import Bmr, map_ce

ETH_P_IPV6 = 0x86DD
PACKET_OUTGOING = 4


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class Rule:
    """The BMR and the MAP address of an (IPv4 address, port) pair, by setups/mapt.py."""

    def __init__(self, bmr: Bmr) -> None:
        self.bmr = bmr
        self.v6 = ipaddress.IPv6Network(bmr.ipv6_prefix)
        self.v4 = ipaddress.IPv4Network(bmr.ipv4_prefix)
        self.k = bmr.psid_len(self.v4)
        self.m = 16 - bmr.psid_offset - self.k

    def ea_of(self, ipv4: bytes, port: int) -> int | None:
        suffix = int.from_bytes(ipv4, "big") - int(self.v4.network_address)
        if not 0 <= suffix < self.v4.num_addresses:
            return None
        psid = (port >> self.m) & ((1 << self.k) - 1)
        return (suffix << self.k) | psid

    def address(self, ea: int) -> tuple[str, tuple[tuple[int, int], ...]]:
        """The CE's MAP address and port set."""
        ce = self.ce(ea)
        return ce.map_address, ce.port_ranges

    def ce(self, ea: int):
        shift = 128 - self.v6.prefixlen - self.bmr.ea_bits_len
        eup = ipaddress.IPv6Network((int(self.v6.network_address) | (ea << shift),
                                     self.v6.prefixlen + self.bmr.ea_bits_len))
        return map_ce(self.bmr, str(eup))


class Bindings:
    """The lwAFTR's binding table as arithmetic (setups/lw4o6.py): subscriber (suffix << k) | PSID."""

    def __init__(self, rule: Lw4o6Rule) -> None:
        self.rule = rule
        self.v4 = ipaddress.IPv4Network(rule.ipv4_pool)
        self.k = rule.psid_len
        self.m = 16 - rule.psid_offset - self.k
        self.capacity = rule.capacity()

    def ea_of(self, ipv4: bytes, port: int) -> int | None:
        suffix = int.from_bytes(ipv4, "big") - int(self.v4.network_address)
        if not 0 <= suffix < self.v4.num_addresses:
            return None
        return (suffix << self.k) | ((port >> self.m) & ((1 << self.k) - 1))

    def address(self, index: int) -> tuple[str, tuple[tuple[int, int], ...]]:
        b = binding(self.rule, index % self.capacity)
        return b.b4_address, b.port_ranges


def answer(query: bytes) -> bytes | None:
    """The DNS reply: the question echoed, QR/RA set, one AAAA record (name by pointer)."""
    if len(query) < 12:
        return None
    flags = struct.unpack("!H", query[2:4])[0]
    header = query[:2] + struct.pack("!HHHHH", flags | 0x8080, 1, 1, 0, 0)
    end = 12
    while end < len(query) and query[end] != 0:
        end += 1 + query[end]
    question = query[12:end + 5]
    record = struct.pack("!HHHIH", 0xC00C, 28, 1, 60, 16) + ipaddress.IPv6Address("2001:db8::53").packed
    return header + question + record


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interface", required=True)
    parser.add_argument("--rule", required=True, help="IPV6PREFIX,IPV4PREFIX,EABITS,PSIDOFFSET")
    parser.add_argument("--lw4o6", action="store_true", help="--rule is B4PREFIX,POOL,PSIDLEN,PSIDOFFSET")
    parser.add_argument("--br", required=True)
    parser.add_argument("--drop-below", type=int, default=0)
    parser.add_argument("--wrong-ce-every", type=int, default=0)
    args = parser.parse_args()
    v6, v4, bits, offset = args.rule.split(",")
    rule: Rule | Bindings = (Bindings(Lw4o6Rule(v4, int(bits), int(offset), v6)) if args.lw4o6
                             else Rule(Bmr(v6, v4, int(bits), int(offset))))
    wrap = 1 << (rule.bmr.ea_bits_len if isinstance(rule, Rule) else 62)
    br = ipaddress.IPv6Address(args.br).packed
    counts = {"received": 0, "answered": 0, "bad_source": 0, "dropped_port": 0, "wrong_ce_sent": 0}
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
    sock.bind((args.interface, ETH_P_IPV6))
    sock.settimeout(0.2)
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    print("ready", flush=True)
    while running[0]:
        try:
            frame, where = sock.recvfrom(4096)
        except TimeoutError:
            continue
        except InterruptedError:
            continue
        if where[2] == PACKET_OUTGOING or len(frame) < 14 + 40 + 20 + 8:
            continue
        outer = frame[14:54]
        if outer[6] != 4 or outer[24:40] != br:
            continue
        inner = frame[54:]
        if inner[9] != 17:
            continue
        counts["received"] += 1
        ihl = (inner[0] & 0x0F) * 4
        src4, dst4 = inner[12:16], inner[16:20]
        sport, dport = struct.unpack("!HH", inner[ihl:ihl + 4])
        ea = rule.ea_of(src4, sport)
        where = rule.address(ea) if ea is not None else None
        if where is None or ipaddress.IPv6Address(outer[8:24]) != ipaddress.IPv6Address(where[0]):
            counts["bad_source"] += 1
            continue
        first, _ = next(r for r in where[1] if r[0] <= sport <= r[1])
        if sport - first < args.drop_below:
            counts["dropped_port"] += 1
            continue
        dns = answer(inner[ihl + 8:ihl + struct.unpack("!H", inner[ihl + 4:ihl + 6])[0]])
        if dns is None:
            continue
        counts["answered"] += 1
        target = where[0]
        if args.wrong_ce_every and counts["answered"] % args.wrong_ce_every == 0:
            target = rule.address((ea + 1) % wrap)[0]
            counts["wrong_ce_sent"] += 1
        udp_len = 8 + len(dns)
        ip4 = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0, dst4, src4))
        ip4[10:12] = struct.pack("!H", checksum(bytes(ip4)))
        udp = bytearray(struct.pack("!HHHH", dport, sport, udp_len, 0) + dns)
        pseudo = dst4 + src4 + struct.pack("!BBH", 0, 17, udp_len)
        udp[6:8] = struct.pack("!H", checksum(pseudo + bytes(udp)) or 0xFFFF)
        payload = bytes(ip4) + bytes(udp)
        ip6 = struct.pack("!IHBB16s16s", 0x60000000, len(payload), 4, 64, br,
                          ipaddress.IPv6Address(target).packed)
        sock.send(frame[6:12] + frame[0:6] + frame[12:14] + ip6 + payload)
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
