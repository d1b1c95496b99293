"""A DNS peer for tests: answers xlatperf's queries correctly or, on purpose, wrongly.

It decodes each query itself (no shared code with the tester) and picks its behaviour from
the query's index k, read back from the name: query k asks for 10.0.0.0 + k. It reads the kernel's
receive timestamp of each query (SO_TIMESTAMPNS, CLOCK_REALTIME), so a behaviour can answer a known
time after the query arrived and the peer can measure the delay it really kept. Given a network namespace,
its sockets live there (tests/tester/netns.py): an AF_XDP tester reaches it through a veth.
"""

from __future__ import annotations

import ctypes
import heapq
import ipaddress
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .netns import enter_netns, in_netns

AAAA = 28
SO_RCVBUFFORCE = 33  # linux/asm-generic/socket.h; the socket module does not name it
SO_TIMESTAMPNS = 35  # likewise; its control message type SCM_TIMESTAMPNS has the same number
PR_SET_TIMERSLACK = 29  # linux/prctl.h
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
    netns: str | None = None  # the network namespace its sockets live in (root); None: the test's own
    cpus: frozenset[int] = frozenset()  # CPUs the serving thread is pinned to (empty: not pinned)
    queries: int = 0
    errors: list[str] = field(default_factory=list)
    received_ns: int = 0  # kernel receive time of the query being handled (CLOCK_REALTIME, ns)
    delays_ns: list[int] = field(default_factory=list)  # kept delays of timed replies (see send_timed)
    _stop: threading.Event = field(default_factory=threading.Event)
    _later: list = field(default_factory=list)

    def __post_init__(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with in_netns(self.netns):
            self.sock = socket.socket(family, socket.SOCK_DGRAM)
            self.other = socket.socket(family, socket.SOCK_DGRAM)  # a second source port
        if self.rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, self.rcvbuf)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind((self.host, 0))
        self.port = self.sock.getsockname()[1]
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
            due_ns = time.time_ns() + round(delay_s * 1e9)
            heapq.heappush(self._later, (due_ns, id(data), sock, data, to, None))
        else:
            sock.sendto(data, to)

    def send_timed(self, data: bytes, to: tuple, delay_ns: int) -> None:
        """Sends `data` delay_ns after the kernel received the current query; records the delay kept.

        The delay kept runs from the query's kernel receive timestamp to the clock read just before
        `sendto`, so it is never longer than what a tester sees (its send time is earlier than the
        first, its kernel receive time of the reply later than the second)."""
        since_ns = self.received_ns
        if delay_ns <= 0:
            self._send_recorded(self.sock, data, to, since_ns)
        else:
            heapq.heappush(self._later, (since_ns + delay_ns, id(data), self.sock, data, to, since_ns))

    def _send_recorded(self, sock: socket.socket, data: bytes, to: tuple, since_ns: int | None) -> None:
        if since_ns is not None:
            self.delays_ns.append(time.time_ns() - since_ns)
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
        if self.netns is not None:
            enter_netns(self.netns)  # this thread only: a raw socket it makes lives beside the others
        # Timer slack 1 ns (default 50 µs): select() wakes when the next reply is due, not up to 50 µs later.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)  # pid 0: this thread only
        while not self._stop.is_set():
            now = time.time_ns()
            while self._later and self._later[0][0] <= now:
                _, _, sock, data, to, since_ns = heapq.heappop(self._later)
                self._send_recorded(sock, data, to, since_ns)
                now = time.time_ns()
            wait = min(0.05, (self._later[0][0] - now) / 1e9) if self._later else 0.05
            ready, _, _ = select.select([self.sock], [], [], max(wait, 0))
            if not ready:
                continue
            data, control, _, source = self.sock.recvmsg(4096, socket.CMSG_SPACE(16))
            self.received_ns = kernel_timestamp_ns(control)
            self.queries += 1
            try:
                self.behaviour(self, parse_query(data), source)
            except Exception as err:  # recorded for the test to report; the peer keeps serving
                self.errors.append(repr(err))


def kernel_timestamp_ns(control: list[tuple[int, int, bytes]]) -> int:
    """The SCM_TIMESTAMPNS control message (struct timespec) in ns; now if the kernel gave none."""
    for level, kind, payload in control:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
            seconds, nanoseconds = struct.unpack("@qq", payload[:16])
            return seconds * 1_000_000_000 + nanoseconds
    return time.time_ns()


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


def answer_after(delay_s: float) -> Behaviour:
    """A behaviour: answer every query correctly, delay_s after the kernel received it."""
    delay_ns = round(delay_s * 1e9)

    def behaviour(peer: Peer, query: Query, source: tuple) -> None:
        peer.send_timed(reply(query), source, delay_ns)

    return behaviour
