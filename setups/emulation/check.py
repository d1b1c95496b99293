"""`setup check`: resolve names through the chain with kdig and verify, from captures on the topology's
check links (DUT1-DUT2; a single DUT's two sides), that the packets there carry the addresses the paper
predicts and, where a MAP-T CE's port set applies, source ports inside it. Where IPv4 travels in IPv6 (MAP-E,
lw4o6) both headers are checked: the inner addresses and ports as above, the outer ones as the tunnel ends,
and every packet's CE-side outer address against the RFC 7597 arithmetic (MAP-E: the MAP address that the
inner IPv4 address and the PSID of its port give) or the lw4o6 binding of (IPv4, PSID)."""

from __future__ import annotations

import subprocess
from contextlib import ExitStack
from dataclasses import dataclass

from ...zones import query_name
from ..lw4o6 import binding_of
from ..mapt import map_address_of, psid_of_port
from ..topology import (
    Clat,
    Host,
    LwAftrRole,
    LwB4Role,
    MapBrRole,
    MapCeRole,
    MapeBrRole,
    MapeCeRole,
    Nat44,
    Plat,
    Topology,
    TunnelEnd,
    embed_ipv4,
    extract_ipv4,
    tester_port_range,
)
from .capture import DNS_AND_TUNNELS, Capture, Datagram
from .emulator import Emulation
from .names import rundir


@dataclass(frozen=True)
class Expectation:
    """What a query looks like on the DUT1-DUT2 link: source, destination, source-port range; `outer`: the
    (source, destination) of the IPv6 header it travels in there (IPv4 in IPv6), None: not encapsulated."""

    src: str
    dst: str
    sport_range: tuple[int, int] | None = None
    outer: tuple[str, str] | None = None

    def matches_query(self, d: Datagram) -> bool:
        return (d.src == self.src and d.dst == self.dst and d.dport == 53 and self._port_ok(d.sport)
                and (d.outer_src, d.outer_dst) == (self.outer or (None, None)))

    def matches_reply(self, d: Datagram) -> bool:
        outer = (self.outer[1], self.outer[0]) if self.outer else (None, None)
        return (d.src == self.dst and d.dst == self.src and d.sport == 53 and self._port_ok(d.dport)
                and (d.outer_src, d.outer_dst) == outer)

    def _port_ok(self, port: int) -> bool:
        return self.sport_range is None or self.sport_range[0] <= port <= self.sport_range[1]

    def text(self) -> str:
        ports = f" source port {self.sport_range[0]}-{self.sport_range[1]}" if self.sport_range else ""
        outer = f" in IPv6 {self.outer[0]} -> {self.outer[1]}" if self.outer else ""
        return f"{self.src} -> {self.dst} port 53{ports}{outer}"


def _through(host: Host, flow: Expectation) -> Expectation:
    """The query `flow` as `host` sends it on: its NAT44 and translator applied (forwarding keeps it)."""
    for item in host.items:
        if isinstance(item, Nat44):
            flow = Expectation(item.public_address(flow.src), flow.dst, item.ports or flow.sport_range)
        elif isinstance(item, Clat):
            flow = Expectation(dict(item.eam)[flow.src], embed_ipv4(item.pool6, flow.dst), flow.sport_range)
        elif isinstance(item, Plat):
            flow = Expectation(item.pool4, extract_ipv4(flow.dst), None)  # NAT44 keeps ports only when free
        elif isinstance(item, MapCeRole):
            flow = Expectation(item.ce.map_address, embed_ipv4(item.dmr, flow.dst), flow.sport_range)
        elif isinstance(item, MapBrRole):
            ipv4 = {ce.map_address: ce.ipv4_address for ce in item.served_ces()}[flow.src]
            flow = Expectation(ipv4, extract_ipv4(flow.dst), flow.sport_range)
        elif isinstance(item, MapeCeRole | LwB4Role) or (isinstance(item, TunnelEnd) and item.side == "ce"):
            end = item.tunnel_end if isinstance(item, TunnelEnd) else (
                item.br_address if isinstance(item, MapeCeRole) else item.aftr_address)
            port = flow.sport_range[0] if flow.sport_range else 0
            flow = Expectation(flow.src, flow.dst, flow.sport_range,
                               (tunnel_source(item, flow.src, port) or "no address", end))
        elif isinstance(item, MapeBrRole | LwAftrRole):
            flow = Expectation(flow.src, flow.dst, flow.sport_range)  # decapsulated
    return flow


TunnelItem = MapeCeRole | MapeBrRole | LwB4Role | LwAftrRole | TunnelEnd


def tunnel_source(item: TunnelItem, ipv4: str, port: int) -> str | None:
    """The CE-side IPv6 address of (IPv4 address, port) under `item`'s rule, computed here from RFC 7597's
    arithmetic (MAP-E: mapt.map_address_of) or the lw4o6 binding arithmetic (lw4o6.binding_of); None when
    nothing holds it."""
    bmr = item.bmr if isinstance(item, MapeCeRole | TunnelEnd) else (
        item.fmrs[0] if isinstance(item, MapeBrRole) else None)
    if bmr is not None:
        return map_address_of(bmr, ipv4, port)
    rule = item.rule if isinstance(item, LwB4Role | LwAftrRole | TunnelEnd) else None
    if rule is None:
        return None
    subscribers = item.subscribers if isinstance(item, LwAftrRole | TunnelEnd) else rule.capacity()
    found = binding_of(rule, ipv4, port, subscribers)
    return found.b4_address if found else None


def _tunnel_item(topology: Topology) -> TunnelItem | None:
    """The item whose rule the tunnel's CE-side addresses follow (the BR's or lwAFTR's first)."""
    items = [i for h in topology.hosts for i in h.items if isinstance(i, TunnelItem)]
    items.sort(key=lambda i: not isinstance(i, MapeBrRole | LwAftrRole))
    return items[0] if items else None


def tunnel_failures(seen: list[Datagram], topology: Topology) -> tuple[list[str], dict[str, object]]:
    """Every encapsulated datagram's CE-side outer address (a query's source, a reply's destination)
    against the arithmetic of the topology's rule for its inner CE-side address and port; the failures
    and what was checked (packets, the PSIDs and CE-side addresses seen)."""
    item = _tunnel_item(topology)
    tunneled = [d for d in seen if d.outer_src is not None]
    if item is None or not tunneled:
        return [], {}
    failures, psids, addresses = [], set(), set()
    psid_len, offset = _psid_shape(item)
    for d in tunneled:
        ipv4, port, outer = (d.src, d.sport, d.outer_src) if d.dport == 53 else (d.dst, d.dport, d.outer_dst)
        want = tunnel_source(item, ipv4, port)
        psids.add(psid_of_port(port, psid_len, offset))
        addresses.add(outer)
        if outer != want:
            failures.append(f"{ipv4} port {port} travelled as {outer}, the rule gives {want}")
    checked = {"tunneled": len(tunneled), "psids": sorted(p for p in psids if p is not None),
               "ce_addresses": sorted(a for a in addresses if a)}
    return failures[:3], checked


def _psid_shape(item: TunnelItem) -> tuple[int, int]:
    bmr = item.bmr if isinstance(item, MapeCeRole | TunnelEnd) else (
        item.fmrs[0] if isinstance(item, MapeBrRole) else None)
    if bmr is not None:
        return bmr.psid_len(), bmr.psid_offset
    rule = item.rule  # type: ignore[union-attr]
    return rule.psid_len, rule.psid_offset


def tester_flows(topology: Topology) -> list[Expectation]:
    """The queries as the tester sends them: one flow, or one per CE it plays (ports inside its set)."""
    if topology.tester_ces:
        return [
            Expectation(ce.map_address, topology.server_address, ce.port_ranges[0])
            for ce in topology.tester_ces
        ]
    if topology.tester_subscribers:
        return [Expectation(s.ipv4_address, topology.server_address, tester_port_range(s))
                for s in topology.tester_subscribers]
    return [Expectation(topology.client_address, topology.server_address)]


def expected_on_link(topology: Topology, link_name: str) -> list[Expectation]:
    """Per tester flow, what its queries look like on a link: derived from the topology's parameters (EAM,
    pool6/DMR, NAT44, MAP rule) by passing them through every host before the link, not written by hand."""
    link = topology.link(link_name)
    order = [h.name for h in topology.hosts]
    before = topology.hosts[: min(order.index(link.a.host), order.index(link.b.host)) + 1]
    flows = tester_flows(topology)
    for host in before:
        flows = [_through(host, flow) for flow in flows]
    return flows


def expected_on_inner_link(topology: Topology) -> Expectation:
    """The (first) tester flow on the topology's inner link."""
    return expected_on_link(topology, topology.inner_link)[0]


def check(emulation: Emulation, queries: int = 5) -> dict[str, object]:
    """Send `queries` queries with kdig from the client (from each CE the tester plays, in turn) while
    capturing on the topology's check links; returns the verdict and what was seen on each link."""
    topology = emulation.topology
    answers, failures = [], []
    with ExitStack() as stack:
        captures = {name: stack.enter_context(_capture(emulation, name)) for name in topology.check_links}
        for index, (name, source) in enumerate(_queries(emulation, queries)):
            answer = _kdig(emulation.netns_of["client"], topology.server_address, name, source)
            answers.append({"name": name, "source": source, "answer": answer})
            if not answer:
                failures.append(f"no AAAA answer for {name} from {topology.server_address} (query {index})")
    links = {}
    for name, capture in captures.items():
        seen = capture.datagrams()
        links[name] = _verdict_on_link(seen, expected_on_link(topology, name), queries)
        failures += [f"link {name}: {f}" for f in links[name].pop("failures")]  # type: ignore[attr-defined]
        wrong, checked = tunnel_failures(seen, topology)
        if checked:
            links[name]["tunnel"] = checked
        failures += [f"link {name}: {f}" for f in wrong]
    return {"ok": not failures, "failures": failures, "links": links, "answers": answers}


def _capture(emulation: Emulation, link_name: str) -> Capture:
    link = emulation.topology.link(link_name)
    pcap = rundir(emulation.prefix) / f"check-{link_name}.pcap"
    return Capture(emulation.netns_of[link.a.host], link.a.interface, pcap, DNS_AND_TUNNELS)


def _queries(emulation: Emulation, count: int) -> list[tuple[str, str | None]]:
    """(query name, kdig source `address#port` or None) per query; round robin over the tester's CEs."""
    config = emulation.knot.config
    ces = emulation.topology.tester_ces
    out = []
    for index in range(count):
        name = query_name(index, config.subnet, config.domain)
        source = None
        if ces:
            ce = ces[index % len(ces)]
            first, last = ce.port_ranges[0]
            source = f"{ce.map_address}#{first + (index // len(ces)) % (last - first + 1)}"
        subscribers = emulation.topology.tester_subscribers
        if subscribers:
            played = subscribers[index % len(subscribers)]
            first, last = tester_port_range(played)
            source = f"{played.ipv4_address}#{first + (index // len(subscribers)) % (last - first + 1)}"
        out.append((name, source))
    return out


def _verdict_on_link(seen: list[Datagram], expect: list[Expectation], queries: int) -> dict[str, object]:
    queries_seen = [d for d in seen if d.dport == 53]
    replies_seen = [d for d in seen if d.sport == 53]
    good_q = [d for d in queries_seen if any(e.matches_query(d) for e in expect)]
    good_r = [d for d in replies_seen if any(e.matches_reply(d) for e in expect)]
    failures = []
    wanted = " or ".join(e.text() for e in expect[:2]) + (
        f" (or {len(expect) - 2} more)" if len(expect) > 2 else ""
    )
    if len(good_q) < queries:
        failures.append(f"{len(good_q)} of {len(queries_seen)} queries match {wanted} (want {queries})")
    if len(good_r) < queries:
        failures.append(f"{len(good_r)} of {len(replies_seen)} replies match the reverse of the queries")
    bad = [d for d in queries_seen + replies_seen if d not in good_q and d not in good_r]
    if bad:
        failures.append(f"unexpected packets: {_show(bad[:3])}")
    return {
        "failures": failures,
        "expected": wanted,
        "queries_seen": len(queries_seen),
        "replies_seen": len(replies_seen),
        "source_ports": sorted({d.sport for d in good_q}),
        "examples": _show((good_q + good_r)[:2] or seen[:2]),
    }


def _kdig(netns: str, server: str, name: str, source: str | None = None) -> str:
    bind = ["-b", source] if source else []
    argv = [
        "ip",
        "netns",
        "exec",
        netns,
        "kdig",
        *bind,
        f"@{server}",
        name,
        "AAAA",
        "+short",
        "+retry=2",
        "+timeout=1",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    return done.stdout.strip() if done.returncode == 0 and ":" in done.stdout else ""


def _show(datagrams: list[Datagram]) -> list[str]:
    return [f"{d.src}.{d.sport} > {d.dst}.{d.dport}"
            + (f" in {d.outer_src} > {d.outer_dst}" if d.outer_src else "") for d in datagrams]
