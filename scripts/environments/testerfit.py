"""Whether the campaign's tester fits an environment, checked when the campaign is loaded: a chain topology's
flows (a MAP-T CE's port set, a PLAT's one public address, a CE NAT44's ephemeral ports while conntrack keeps
earlier trials' mappings: scripts.nat44) and AF_XDP's binding on its client, for emulated chains and testbed
inventories alike; and, where xlatperf runs on this machine, one socket per flow."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...setups.chain import place_tester
from ...setups.mapt import MapCe
from ...setups.topology import NAT44_PORTS, Plat
from ..nat44 import Cycle, UdpTimeout, ephemeral_refusal
from ..xlatperf import TesterOptions, source_first_port
from .options import OptionError

# Files xlatperf holds open besides its sockets (stdio, its JSON, /proc and /sys reads), with room to spare.
TESTER_OTHER_FILES = 16


def check_chain(chain: Any, setup: str, where: str, tester: TesterOptions, most: int, cycles: list[Cycle],
                timeout: Callable[[], UdpTimeout]) -> None:
    """Fail now when the tester cannot run on this chain topology: [tester] io = "xdp" where its client
    cannot place the AF_XDP flows, more flows than the chain carries, or so many on ephemeral ports that a
    MAP-T CE's NAT44 runs out of ports while conntrack keeps earlier trials' mappings.

    setup: the setup's name; where: its [[setup]] table; most: the sweep's most flows; timeout: the CE's
    UDP conntrack timeout (read only when it matters)."""
    if tester.io != "socket":
        try:
            place_tester(chain, tester.io, most, source_first_port(tester))
        except ValueError as err:
            raise OptionError(f"{where}: [tester] io = \"xdp\": {err}") from None
    limit = chain.max_flows()
    where = f"setup {setup!r}"
    if chain.tester_ces and tester.first_port is not None:
        raise OptionError(f"{where}: [tester] first_port cannot be used with br, which binds the "
                          "tester to its CE's port set itself; remove first_port")
    if limit is not None and most > limit:
        raise OptionError(f"{where}: {most} tester sessions (threads x ports_per_thread) do not fit "
                          f"the {chain.name} chain's {limit} flows ({port_set_text(chain)}): "
                          f"use sessions <= {limit}")
    if limit is not None and not chain.tester_ces and source_first_port(tester) is None:
        refusal = ephemeral_refusal(most, limit, cycles, timeout())
        if refusal:
            raise OptionError(f"{where}: {refusal}")


def port_set_text(chain: Any) -> str:
    """What bounds the chain's flows with the arithmetic: the MAP-T CE's port set, or a PLAT's one public
    address."""
    ces = [ce for t in chain.translators().values() if isinstance(ce := getattr(t, "ce", None), MapCe)]
    if not ces and not chain.tester_ces:
        plat = next(t for t in chain.translators().values() if isinstance(t, Plat))
        return (f"the PLAT's NAT44 shares one address {plat.pool4}: its {NAT44_PORTS} ports 1024-65535 "
                "toward the one server address and port; the plat topology's option plat_netmap = true gives "
                "each IPv6 client an address of its own")
    ce = (ces or list(chain.tester_ces))[0]
    ranges = ", ".join(f"{first}-{last}" for first, last in ce.port_ranges)
    return (f"MAP-T CE {ce.ipv4_address} PSID {ce.psid}: PSID length {ce.psid_len} leaves "
            f"2^(16 - {ce.psid_len}) = {ce.port_count} ports, {ranges}")


def check_local_sockets(most: int, swept: bool) -> None:
    """Fail now when the tester, run on this machine, cannot open one socket per flow: its open-file limit
    (RLIMIT_NOFILE, inherited) and, with ephemeral source ports, the host's ephemeral port range."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    what = "[campaign] sessions" if swept else "[tester] threads x ports_per_thread"
    if most + TESTER_OTHER_FILES > soft:
        raise OptionError(
            f"{what} asks for {most} tester sockets, but this process may open only {soft} files "
            f"(ulimit -n; hard limit {hard}) and xlatperf needs about {TESTER_OTHER_FILES} more: use at most "
            f"{soft - TESTER_OTHER_FILES}, raise the limit (ulimit -n; above the hard limit needs root with "
            "CAP_SYS_RESOURCE), or set [tester] io = \"xdp\" (AF_XDP flows need no socket each)")
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return
    if most > high - low + 1:
        raise OptionError(
            f"{what} asks for {most} tester sockets on ephemeral source ports, more than this host's range "
            f"{low}-{high} ({high - low + 1} ports, net.ipv4.ip_local_port_range): use fewer")
