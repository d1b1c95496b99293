"""A packet capture with tcpdump and a small pcap reader for the UDP datagrams in it, also inside IPv4-in-IPv6
(MAP-E, lw4o6): such a datagram carries its outer IPv6 addresses too."""

from __future__ import annotations

import ipaddress
import signal
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ETH_IPV4, ETH_IPV6, ETH_VLAN = 0x0800, 0x86DD, 0x8100
UDP, IPIP = 17, 4
# What `setup check` captures: DNS over UDP, and IPv4 in IPv6 (whatever it carries: filtered when read).
DNS_AND_TUNNELS = "udp port 53 or ip6 proto 4"


@dataclass(frozen=True)
class Datagram:
    """One UDP datagram seen on the wire (addresses as compressed text); outer_src / outer_dst: the IPv6
    header it travelled in (IPv4 in IPv6), None when not encapsulated."""

    src: str
    sport: int
    dst: str
    dport: int
    outer_src: str | None = None
    outer_dst: str | None = None


def read_pcap(path: Path) -> list[Datagram]:
    """UDP datagrams of an Ethernet pcap file (IPv4 or IPv6 without extension headers)."""
    data = path.read_bytes()
    if len(data) < 24:
        return []
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        endian = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        endian = ">"
    else:
        raise ValueError(f"{path}: not a pcap file")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, expected Ethernet (1)")
    datagrams, offset = [], 24
    while offset + 16 <= len(data):
        caplen = struct.unpack(endian + "I", data[offset + 8 : offset + 12])[0]
        frame = data[offset + 16 : offset + 16 + caplen]
        offset += 16 + caplen
        datagram = _parse_ethernet(frame)
        if datagram:
            datagrams.append(datagram)
    return datagrams


def _parse_ethernet(frame: bytes) -> Datagram | None:
    if len(frame) < 14:
        return None
    ethertype, at = struct.unpack("!H", frame[12:14])[0], 14
    if ethertype == ETH_VLAN and len(frame) >= 18:
        ethertype, at = struct.unpack("!H", frame[16:18])[0], 18
    if ethertype == ETH_IPV4 and len(frame) >= at + 20:
        ihl = (frame[at] & 0x0F) * 4
        if frame[at + 9] != UDP:
            return None
        src, dst = (
            ipaddress.IPv4Address(frame[at + 12 : at + 16]),
            ipaddress.IPv4Address(frame[at + 16 : at + 20]),
        )
        udp = at + ihl
    elif ethertype == ETH_IPV6 and len(frame) >= at + 40 and frame[at + 6] == IPIP:
        inner = _parse_ip4(frame, at + 40)
        if inner is None:
            return None
        outer_src = ipaddress.IPv6Address(frame[at + 8 : at + 24])
        outer_dst = ipaddress.IPv6Address(frame[at + 24 : at + 40])
        return Datagram(inner.src, inner.sport, inner.dst, inner.dport, str(outer_src), str(outer_dst))
    elif ethertype == ETH_IPV6 and len(frame) >= at + 40:
        if frame[at + 6] != UDP:
            return None
        src, dst = (
            ipaddress.IPv6Address(frame[at + 8 : at + 24]),
            ipaddress.IPv6Address(frame[at + 24 : at + 40]),
        )
        udp = at + 40
    else:
        return None
    if len(frame) < udp + 4:
        return None
    sport, dport = struct.unpack("!HH", frame[udp : udp + 4])
    return Datagram(str(src), sport, str(dst), dport)


def _parse_ip4(frame: bytes, at: int) -> Datagram | None:
    """The UDP datagram of the IPv4 packet at `at` (inside IPv4-in-IPv6), or None."""
    if len(frame) < at + 20 or frame[at] >> 4 != 4 or frame[at + 9] != UDP:
        return None
    udp = at + (frame[at] & 0x0F) * 4
    if len(frame) < udp + 4:
        return None
    sport, dport = struct.unpack("!HH", frame[udp : udp + 4])
    return Datagram(str(ipaddress.IPv4Address(frame[at + 12 : at + 16])), sport,
                    str(ipaddress.IPv4Address(frame[at + 16 : at + 20])), dport)


class Capture:
    """tcpdump on one interface of a namespace, writing a pcap; a context manager."""

    def __init__(self, netns: str, interface: str, path: Path, filter_expr: str = "udp port 53") -> None:
        self.argv = [
            "ip",
            "netns",
            "exec",
            netns,
            "tcpdump",
            "-n",
            "-U",
            "--immediate-mode",
            "-i",
            interface,
            "-w",
            str(path),
            filter_expr,  # a pcap-filter(7) expression
        ]
        self.path = path
        self.errpath = path.with_suffix(".err")
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Capture:
        self.errfile = open(self.errpath, "wb")  # noqa: SIM115 -- closed in __exit__
        self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.errfile)
        deadline = time.monotonic() + 5.0
        while b"listening on" not in self.errpath.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(
                    f"tcpdump did not start: {self.errpath.read_text(errors='replace').strip()}"
                )
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process and self.process.poll() is None:
            time.sleep(0.2)  # the last packets reach the file (-U writes per packet)
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.errfile.close()

    def datagrams(self) -> list[Datagram]:
        return read_pcap(self.path) if self.path.exists() else []
