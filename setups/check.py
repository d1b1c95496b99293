"""`setup check`: resolve names through the chain with kdig and verify, from a capture on the
DUT1-DUT2 link, that the packets there carry the addresses the paper predicts."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from xlatbench.setups.capture import Capture, Datagram
from xlatbench.setups.emulation import Emulation
from xlatbench.setups.names import rundir
from xlatbench.setups.topology import Clat, MapCeRole, Topology, embed_ipv4
from xlatbench.zones import query_name


@dataclass(frozen=True)
class Expectation:
    """What a query looks like on the DUT1-DUT2 link: source, destination, source-port range."""

    src: str
    dst: str
    sport_range: tuple[int, int] | None = None

    def matches_query(self, d: Datagram) -> bool:
        return d.src == self.src and d.dst == self.dst and d.dport == 53 and self._port_ok(d.sport)

    def matches_reply(self, d: Datagram) -> bool:
        return d.src == self.dst and d.dst == self.src and d.sport == 53 and self._port_ok(d.dport)

    def _port_ok(self, port: int) -> bool:
        return self.sport_range is None or self.sport_range[0] <= port <= self.sport_range[1]

    def text(self) -> str:
        ports = f" source port {self.sport_range[0]}-{self.sport_range[1]}" if self.sport_range else ""
        return f"{self.src} -> {self.dst} port 53{ports}"


def expected_on_inner_link(topology: Topology) -> Expectation:
    """Derived from the topology's parameters (EAM, pool6/DMR, MAP rule), not written down by hand."""
    translators = topology.translators()
    dut1 = translators.get("dut1")
    if isinstance(dut1, Clat):
        client6 = dict(dut1.eam)[topology.client_address]
        return Expectation(client6, embed_ipv4(dut1.pool6, topology.server_address))
    if isinstance(dut1, MapCeRole):
        ce = dut1.ce
        return Expectation(ce.map_address, embed_ipv4(dut1.dmr, topology.server_address), ce.port_ranges[0])
    return Expectation(topology.client_address, topology.server_address)


def check(emulation: Emulation, queries: int = 5) -> dict[str, object]:
    """Send `queries` queries with kdig from the client; returns the verdict and what was seen."""
    topology = emulation.topology
    expect = expected_on_inner_link(topology)
    link = topology.link(topology.inner_link)
    pcap = rundir(emulation.prefix) / "check.pcap"
    answers, failures = [], []
    with Capture(emulation.netns_of[link.a.host], link.a.interface, pcap) as capture:
        for index in range(queries):
            name = query_name(index, emulation.knot.config.subnet, emulation.knot.config.domain)
            answer = _kdig(emulation.netns_of["client"], topology.server_address, name)
            answers.append({"name": name, "answer": answer})
            if not answer:
                failures.append(f"no AAAA answer for {name} from {topology.server_address}")
    seen = capture.datagrams()
    queries_seen = [d for d in seen if d.dport == 53]
    replies_seen = [d for d in seen if d.sport == 53]
    good_q = [d for d in queries_seen if expect.matches_query(d)]
    good_r = [d for d in replies_seen if expect.matches_reply(d)]
    if len(good_q) < queries:
        failures.append(
            f"{len(good_q)} of {len(queries_seen)} queries on link {link.name} match "
            f"{expect.text()} (want {queries})"
        )
    if len(good_r) < queries:
        failures.append(
            f"{len(good_r)} of {len(replies_seen)} replies on link {link.name} match the reverse "
            "of the queries"
        )
    bad = [d for d in queries_seen + replies_seen if d not in good_q and d not in good_r]
    if bad:
        failures.append(f"unexpected packets on {link.name}: {_show(bad[:3])}")
    return {
        "ok": not failures,
        "failures": failures,
        "link": link.name,
        "captured_on": f"{emulation.netns_of[link.a.host]}:{link.a.interface}",
        "expected": expect.text(),
        "queries_seen": len(queries_seen),
        "replies_seen": len(replies_seen),
        "examples": _show((good_q + good_r)[:2] or seen[:2]),
        "answers": answers,
    }


def _kdig(netns: str, server: str, name: str) -> str:
    argv = [
        "ip",
        "netns",
        "exec",
        netns,
        "kdig",
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
    return [f"{d.src}.{d.sport} > {d.dst}.{d.dport}" for d in datagrams]
