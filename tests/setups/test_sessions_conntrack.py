"""Many AF_XDP flows through the emulated PLAT (issue 24, item 4), short: 100 000 distinct flows from three
client addresses (45 536 ports each from 20000), each sent one query through tayga + the nftables NAT44 with
`plat_netmap`, as a sessions sweep's point runs it (ChainMeasurer with the chain's tester_place).

Known answers, independent of the tester: the PLAT namespace's own conntrack count (nf_conntrack_count) is
exactly the number of distinct flows, and so is a dynamic nftables set in the server namespace of every
(source address, source port) that reached Knot, from exactly three public addresses (one per client: the
NAT44 kept the flows apart). The conntrack table was raised under the chain's root-sysctl lease, and after
`down` the sysctls are back to what they were and nothing of the prefix is left."""

from __future__ import annotations

import json
import subprocess

import pytest

from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions, place_args
from xlatbench.setups.emulation import leftovers, rootsysctl
from xlatbench.setups.emulation.rootsysctl import conntrack_table

pytestmark = [pytest.mark.root]

FLOWS = 100_000
RATE_QPS = 25_000  # 4 s: one query per flow, well within what tayga forwards here


def _server_set(netns: str) -> None:
    rules = ("table ip xlbsess {\n"
             "set seen {\ntype ipv4_addr . inet_service\nsize 262144\nflags dynamic\n}\n"
             "chain input {\ntype filter hook input priority 0; policy accept;\n"
             "udp dport 53 add @seen { ip saddr . udp sport }\n"
             "}\n"
             "}\n")
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rules, text=True, check=True,
                   capture_output=True)


def _seen(netns: str) -> list[str]:
    """The (address . port) pairs the server's set holds, as "address port"."""
    listed = json.loads(subprocess.run(["ip", "netns", "exec", netns, "nft", "-j", "list", "set", "ip",
                                        "xlbsess", "seen"], capture_output=True, text=True,
                                       check=True).stdout)["nftables"]
    elements = next(entry["set"] for entry in listed if "set" in entry).get("elem", [])
    return [" ".join(str(part) for part in element["concat"]) for element in elements]


def test_a_plat_holds_one_conntrack_entry_per_flow_and_leaves_nothing(chain_factory, prefix, tester):
    keys = conntrack_table(FLOWS)
    before = {key: rootsysctl.read(key) for key in keys}
    chain = chain_factory("plat", backend="tayga", plat_netmap=True)
    _server_set(chain.emulation.netns_of["server"])
    # The known answers are the conntrack entries, not the tester's schedule: on a loaded machine its 4 s send
    # window may run a few ms over the default 2 ms tolerance (every query still sent), so relax it as the
    # tester's own tests do (tests/tester/helpers.RELAXED_TIMING).
    options = TesterOptions(io="xdp", ports_per_thread=FLOWS, first_port=20000, timeout_s=1.0,
                            sender_cpus="0", receiver_cpus="0",
                            extra_args=("--max-lag", "0", "--send-tolerance-abs", "0.5"))
    measurer = ChainMeasurer(chain, options, binary=tester)
    # 3 x 33 334 >= 100 000
    assert place_args(measurer.place)[-1] == "2001:db8:2::4-2001:db8:2::6,20000-53333"
    for key, value in keys.items():
        assert int(rootsysctl.read(key)) >= value, f"{key} not raised for {FLOWS} flows"
    result = measurer.measure(FLOWS / RATE_QPS, RATE_QPS)
    assert result.sent == FLOWS and not result.tester_limited, result.reasons
    assert result.dut_stats is not None
    seen = _seen(chain.emulation.netns_of["server"])
    # Every flow whose query crossed the NAT44 holds exactly one entry: with nothing lost, FLOWS. On a
    # machine loaded by other work tayga may drop a few queries before the NAT44 (its TUN queue; no entry)
    # and a veth backlog a few after it (an entry the server never saw): the entries then lie between the
    # flows the server saw and the flows sent, and nearly all must have come through.
    entries = result.dut_stats["conntrack_entries"]["dut1"]
    assert len(seen) <= entries <= FLOWS, (entries, len(seen))
    assert len(seen) >= 0.5 * FLOWS, f"only {len(seen)} of {FLOWS} flows reached the server"
    public = {pair.split()[0] for pair in seen}  # tayga picks each client's pool address: one each
    assert len(public) == 3 and all(address.startswith("198.18.0.") for address in public), public
    # Answers need tayga's return path too, which a busy machine starves (a quarter lost with a busy loop
    # on each CPU): only that no flow the server never saw was answered.
    assert 0 < result.valid <= len(seen), f"{result.valid} answered, {len(seen)} flows seen"
    chain.down()
    assert leftovers(prefix) == []
    assert {key: rootsysctl.read(key) for key in keys} == before
