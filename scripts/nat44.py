"""The MAP-T CE's NAT44 port rule: how many tester sessions on ephemeral source ports fit its port set.

A tester on ephemeral ports opens new sockets, hence new NAT44 mappings, every trial. Conntrack keeps a
replied UDP mapping for its UDP stream timeout (net.netfilter.nf_conntrack_udp_timeout_stream, 120 s by
default) after its last packet, so during a trial the mappings of the current trial and of every earlier one
that ended less than that timeout before it began all hold ports:

    trials whose mappings coexist = 1 + ceil((timeout - rest) / (trial + rest))

and sets x sessions must fit the CE's port set (2^(16 - PSID length) ports), unless [tester] first_port makes
every trial reuse the same flows. The shortest trial-plus-rest of the campaign (MLRsearch's shorter
trials, the idle runs) decides. scripts/environments/testerfit checks it when a campaign is loaded (emulated
chains and testbed inventories alike) with this host's /proc/sys value (the kernel default for a testbed);
once a chain is up, the campaign checks it again with the timeout read in the CE's NAT44 namespace itself
(chain_refusal), before the first trial. The refusal says where the timeout came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The kernel's defaults, s: a replied ("stream") UDP mapping and an unreplied one.
DEFAULT_STREAM_TIMEOUT_S = 120.0
SYSCTLS = ("nf_conntrack_udp_timeout_stream", "nf_conntrack_udp_timeout")


@dataclass(frozen=True)
class UdpTimeout:
    """seconds: how long conntrack keeps a replied UDP mapping, s; source: where that figure came from."""

    seconds: float
    source: str


@dataclass(frozen=True)
class Cycle:
    """One kind of trial the campaign runs: its length and the rest after it, s; what: which it is."""

    trial_s: float
    rest_s: float
    what: str


def udp_timeout(proc_sys: Path = Path("/proc/sys")) -> UdpTimeout:
    """The longer of the UDP conntrack timeouts of this host (a DNS flow is replied: the stream one)."""
    found = {}
    for name in SYSCTLS:
        try:
            found[name] = float((proc_sys / "net" / "netfilter" / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    if not found:
        return UdpTimeout(DEFAULT_STREAM_TIMEOUT_S, "net.netfilter.nf_conntrack_udp_timeout_stream's kernel "
                                                    "default (not readable on this host)")
    name, seconds = max(found.items(), key=lambda item: item[1])
    return UdpTimeout(seconds, f"net.netfilter.{name} = {seconds:g} on this host")


def coexisting_trials(timeout_s: float, cycle: Cycle) -> int:
    """Trials whose NAT44 mappings hold ports at once: the current one and every earlier one that ended
    less than timeout_s before it began."""
    return 1 + max(0, math.ceil((timeout_s - cycle.rest_s) / (cycle.trial_s + cycle.rest_s)))


def ephemeral_refusal(sessions: int, port_set: int, cycles: list[Cycle], timeout: UdpTimeout) -> str | None:
    """None when `sessions` ephemeral-port flows per trial fit the port set at every cycle; else why not,
    with the arithmetic."""
    if not cycles:
        return None
    cycle = min(cycles, key=lambda c: (c.trial_s + c.rest_s, -c.rest_s))
    sets = coexisting_trials(timeout.seconds, cycle)
    if sets * sessions <= port_set:
        return None
    t, r, timeout_s = f"{cycle.trial_s:g}", f"{cycle.rest_s:g}", f"{timeout.seconds:g}"
    return (f"{sessions} tester sessions on ephemeral ports are new NAT44 mappings every trial, and "
            f"conntrack keeps a replied UDP mapping {timeout_s} s ({timeout.source}); with {t} s trials and "
            f"{r} s rests ({cycle.what}) the mappings of 1 + ⌈({timeout_s} − {r}) / ({t} + {r})⌉ = {sets} "
            f"trials coexist, and {sets} × {sessions} = {sets * sessions} do not fit its {port_set}-port "
            f"set: set [tester] first_port (e.g. 20000) so every trial reuses the same flows, or use at most "
            f"{port_set // sets} sessions")


def chain_refusal(chain: Any, flows: int, first_port: int | None, cycles: list[Cycle]) -> str | None:
    """The same rule once a chain is up, with the timeout its MAP-T CE's NAT44 namespace really has
    (chain.nat44_udp_timeout(), emulated or testbed): None when it fits, has no CE NAT44 or first_port is
    set."""
    read = getattr(chain, "nat44_udp_timeout", None)
    if first_port is not None or read is None or getattr(chain, "max_flows", None) is None:
        return None
    found = read()
    if found is None:
        return None
    seconds, where = found
    return ephemeral_refusal(flows, chain.max_flows, cycles, UdpTimeout(seconds, f"{where} = {seconds:g}"))
