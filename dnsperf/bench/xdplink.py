"""The AF_XDP layer's proving ground: one veth pair from the root namespace into a server namespace.

The tester's end (`outer`) stays in the root namespace, where an AF_XDP program attaches to it; the
other end (`inner`) is in the namespace `<prefix>-server` (names.netns_name), where knotd answers. Both
ends carry an IPv4 and an IPv6 address of their own (the tester's end a second IPv4 address for
multi-address flows), the server's end sends full UDP checksums (`tx off`: a NIC puts them on the wire,
veth would leave them partial), and everything is removed on exit, also on failure; a run killed before
that leaves only the namespace, which `xlatbench setup down --prefix PREFIX` removes with the pair.
It lives beside its users: the benchmarks in this folder (xdp_bench.py) and the tester's AF_XDP tests
(tests/tester/, tests/setups/test_xdp_mode.py), which import it as `xdplink` (tests/conftest.py puts this
folder on sys.path). It is no emulated testbed: the suite's chains never use it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from xlatbench.setups.emulation.names import check_prefix, netns_name

TESTER_V4, SERVER_V4, TESTER_V4_SECOND = "198.18.77.1", "198.18.77.2", "198.18.77.3"
TESTER_V6, SERVER_V6 = "fd00:77::1", "fd00:77::2"


@dataclass(frozen=True)
class XdpLink:
    """The veth pair: `outer` in the root namespace (the tester's), `inner` in `netns` (the server's)."""

    netns: str
    outer: str
    inner: str

    def inside(self, *argv: str) -> list[str]:
        """`argv` run in the server namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


@contextmanager
def xdp_link(prefix: str, queues: int = 1) -> Iterator[XdpLink]:
    """Creates the pair (each end with `queues` receive and transmit queues) and its addresses; removes
    both on exit. A frame sent on one end's transmit queue q arrives on the other end's receive queue q."""
    check_prefix(prefix)
    if not 1 <= queues <= 64:
        raise ValueError(f"veth queues must be 1..64, got {queues}")
    link = XdpLink(netns=netns_name(prefix, "server"), outer=f"{prefix}-t", inner=f"{prefix}-s")
    counts = ("numtxqueues", str(queues), "numrxqueues", str(queues))
    try:
        _run("ip", "netns", "add", link.netns)
        _run("ip", "link", "add", link.outer, *counts, "type", "veth", "peer", "name", link.inner, *counts,
             "netns", link.netns)
        for address in (f"{TESTER_V4}/24", f"{TESTER_V4_SECOND}/24"):
            _run("ip", "addr", "add", address, "dev", link.outer)
        _run("ip", "addr", "add", f"{TESTER_V6}/64", "dev", link.outer, "nodad")
        _run("ip", "link", "set", link.outer, "up")
        _run(*link.inside("ip", "addr", "add", f"{SERVER_V4}/24", "dev", link.inner))
        _run(*link.inside("ip", "addr", "add", f"{SERVER_V6}/64", "dev", link.inner, "nodad"))
        _run(*link.inside("ip", "link", "set", link.inner, "up"))
        _run(*link.inside("ip", "link", "set", "lo", "up"))
        _run(*link.inside("ethtool", "-K", link.inner, "tx", "off"))
        yield link
    finally:
        subprocess.run(["ip", "link", "del", link.outer], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", link.netns], capture_output=True, check=False)


def attached_program(ifname: str) -> dict | None:
    """The XDP program on `ifname` as `ip -j -d link` reports it (None: none)."""
    out = subprocess.run(["ip", "-j", "-d", "link", "show", "dev", ifname], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)[0].get("xdp")
