"""A DNS peer for tests: answers xlatperf's queries correctly or, on purpose, wrongly.

It decodes each query itself (no shared code with the tester) and picks its behaviour from
the query's index k, read back from the name: query k asks for 10.0.0.0 + k.
"""

from __future__ import annotations

import heapq
import ipaddress
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

AAAA = 28
SO_RCVBUFFORCE = 33  # linux/asm-generic/socket.h; the socket module does not name it
IN = 1


@dataclass(frozen=True)
class Query:
    """A decoded query: transaction ID, flags word, QNAME labels, QTYPE, QCLASS, raw question bytes."""

    id: int
    flags: int
    labels: tuple[bytes, ...]
    qtype: int
    qclass: int
    question: bytes

    def index(self, subnet: str = "10.0.0.0/16") -> int:
        """k of the dns64perf++ name AAA-BBB-CCC-DDD.<domain>."""
        octets = [int(part) for part in self.labels[0].split(b"-")]
        address = ipaddress.IPv4Address(".".join(map(str, octets)))
        return int(address) - int(ipaddress.IPv4Network(subnet).network_address)


def parse_query(data: bytes) -> Query:
    qid, flags, qdcount = struct.unpack("!HHH", data[:6])
    assert qdcount == 1, "the tester always asks one question"
    labels, at = [], 12
    while data[at]:
        length = data[at]
        labels.append(data[at + 1: at + 1 + length])
        at += 1 + length
    qtype, qclass = struct.unpack("!HH", data[at + 1: at + 5])
    return Query(qid, flags, tuple(labels), qtype, qclass, data[12: at + 5])


def question_for(labels: tuple[bytes, ...], qtype: int = AAAA, qclass: int = IN) -> bytes:
    name = b"".join(bytes([len(label)]) + label for label in labels) + b"\0"
    return name + struct.pack("!HH", qtype, qclass)


def reply(query: Query, *, rcode: int = 0, answers: int = 1, tc: bool = False, qid: int | None = None,
          question: bytes | None = None) -> bytes:
    """A response: QR=1, AA=1, RD copied, the question (ours or the one given), `answers` AAAA records."""
    flags = 0x8000 | 0x0400 | (query.flags & 0x0100) | (0x0200 if tc else 0) | rcode
    header = struct.pack("!HHHHHH", query.id if qid is None else qid, flags, 1, answers, 0, 0)
    record = struct.pack("!HHHIH", 0xC00C, AAAA, IN, 60, 16) + ipaddress.IPv6Address("2001:db8::1").packed
    return header + (question or query.question) + record * answers


Behaviour = Callable[["Peer", Query, tuple], None]


@dataclass
class Peer:
    """A UDP server on (host, port 0) in a thread; `behaviour(peer, query, source)` answers each query."""

    host: str
    behaviour: Behaviour
    port: int = 0
    rcvbuf: int = 0  # bytes for the peer's receive socket (root: SO_RCVBUFFORCE); 0: kernel default
    queries: int = 0
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _later: list = field(default_factory=list)

    def __post_init__(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        if self.rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, self.rcvbuf)
        self.sock.bind((self.host, 0))
        self.port = self.sock.getsockname()[1]
        self.other = socket.socket(family, socket.SOCK_DGRAM)  # a second source port
        self.other.bind((self.host, 0))
        self._thread = threading.Thread(target=self._serve, name="dns-peer", daemon=True)

    def __enter__(self) -> Peer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.sock.close()
        self.other.close()
        if hasattr(self, "raw"):
            self.raw.close()

    def send(self, data: bytes, to: tuple, delay_s: float = 0.0, from_other: bool = False) -> None:
        sock = self.other if from_other else self.sock
        if delay_s:
            heapq.heappush(self._later, (time.monotonic() + delay_s, id(data), sock, data, to))
        else:
            sock.sendto(data, to)

    def send_bad_checksum(self, data: bytes, to: tuple) -> None:
        """Sends `data` from the peer's address and port with a bad UDP checksum (IPv4 raw socket, root)."""
        if not hasattr(self, "raw"):
            self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
        length = 8 + len(data)
        good = udp_checksum(self.host, to[0], self.port, to[1], data)
        bad = good ^ 0x00FF or 0xFFFF  # never 0 ("no checksum")
        self.raw.sendto(struct.pack("!HHHH", self.port, to[1], length, bad) + data, (to[0], 0))

    def _serve(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            while self._later and self._later[0][0] <= now:
                _, _, sock, data, to = heapq.heappop(self._later)
                sock.sendto(data, to)
            wait = min(0.05, self._later[0][0] - now) if self._later else 0.05
            ready, _, _ = select.select([self.sock], [], [], max(wait, 0))
            if not ready:
                continue
            data, source = self.sock.recvfrom(4096)
            self.queries += 1
            try:
                self.behaviour(self, parse_query(data), source)
            except Exception as err:  # recorded for the test to report; the peer keeps serving
                self.errors.append(repr(err))


def udp_checksum(source: str, destination: str, source_port: int, destination_port: int, data: bytes) -> int:
    """RFC 768 checksum over the IPv4 pseudo-header, the UDP header (checksum 0) and the data."""
    length = 8 + len(data)
    pseudo = (socket.inet_aton(source) + socket.inet_aton(destination)
              + struct.pack("!BBH", 0, socket.IPPROTO_UDP, length))
    whole = pseudo + struct.pack("!HHHH", source_port, destination_port, length, 0) + data
    if len(whole) % 2:
        whole += b"\0"
    total = sum(struct.unpack(f"!{len(whole) // 2}H", whole))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF or 0xFFFF


def answer_all(peer: Peer, query: Query, source: tuple) -> None:
    peer.send(reply(query), source)
