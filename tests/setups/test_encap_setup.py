"""The MAP-E and lw4o6 topologies in namespaces with the bpf tunnel ends (issue 34): each comes up, passes
`setup check` (outer and inner headers captured on its check links, every packet's CE-side outer address
equal to what RFC 7597's arithmetic or the lw4o6 binding arithmetic gives for its inner address and port)
and goes down leaving nothing; and the two test-only BR faults through `mape-br` with the tester:

- a BR that drops packets from odd source ports as outside the CE's port set: the tester loses exactly the
  queries the BR counted, half of them (its 8 sockets: 4 odd ports);
- a BR that encapsulates replies to odd ports to the next CE: the tester's tunnel end (the CE the tester
  plays) drops each such reply as not addressed to it; lost = the BR's wrong-CE count = the tunnel end's;
- the socket tester playing 8 CEs of one IPv4 address (one socket in each CE's port set): all answered.
Needs root.
"""

from __future__ import annotations

import pytest
from trials import explain_loss

from xlatbench.setups.backends.bpf import BpfBackend
from xlatbench.setups.emulation import leftovers
from xlatbench.setups.emulation.check import check
from xlatbench.setups.emulation.cleanup import down
from xlatbench.setups.plan import BackendChoice

pytestmark = [pytest.mark.root, pytest.mark.slow]

LENIENT = ("--send-tolerance-abs", "0.05", "--max-lag", "0.2")
MAP_11B = "2001:db8:ce:11b:0:c000:208:1b"
# topology, CEs the tester plays -> (PSIDs, CE-side tunnel addresses) the check must see inside the tunnel
TUNNELS = {
    ("mape", 1): ([27], [MAP_11B]),
    ("lw4o6", 1): ([27], ["2001:db8:b4::11c"]),
    ("mape-ce", 1): ([27], [MAP_11B]),
    ("lwb4", 1): ([27], ["2001:db8:b4::11c"]),
    ("mape-br", 4): ([0, 1, 2, 3], ["2001:db8:ce:1:0:c000:200:1", "2001:db8:ce:2:0:c000:200:2",
                                    "2001:db8:ce:3:0:c000:200:3", "2001:db8:ce::c000:200:0"]),
    ("lwaftr", 4): ([0, 1, 2, 3], [f"2001:db8:b4::{i}" for i in range(1, 5)]),
}


@pytest.mark.parametrize(("name", "ces"), list(TUNNELS))
def test_up_check_down(name, ces, chain_factory, prefix):
    options = {"ces": ces} if ces > 1 else {}
    chain = chain_factory(name, backend="bpf", **options)
    verdict = check(chain.emulation, queries=4)
    assert verdict["ok"], verdict["failures"]
    tunnelled = [link["tunnel"] for link in verdict["links"].values() if "tunnel" in link]
    assert len(tunnelled) == 1, "the tunnel shows on exactly one check link"
    psids, addresses = TUNNELS[(name, ces)]
    assert tunnelled[0]["psids"] == psids and tunnelled[0]["ce_addresses"] == sorted(addresses)
    assert tunnelled[0]["tunneled"] == 8, "4 queries and 4 replies, each inside IPv6"
    counters = chain.emulation.translator_counters()
    # What the hosts send toward the pair's multicast on their own (MLD reports while routers join their
    # groups) is counted as drop_multicast; nothing else was dropped.
    dropped = {f"{end}:{k}": v for end, c in counters.items() for k, v in c.items()
               if k.startswith("drop_") and k != "drop_multicast" and v}
    assert not dropped and sum(c["decapsulated"] for c in counters.values()) >= 8, counters
    down(prefix)
    assert leftovers(prefix) == []


def _faulty(fault: str) -> BackendChoice:
    roles = dict(BackendChoice.parse("bpf").by_role)
    roles["mape-br"] = BpfBackend(fault=fault)
    return BackendChoice.of_roles(roles)


def test_a_br_dropping_odd_ports_as_outside_the_port_set(chain_factory, trial):
    chain = chain_factory("mape-br", backends=_faulty("odd-port-drop"))
    assert chain.describe()["translators"]["dut1"]["fault"] == "odd-port-drop"
    result = trial(chain, 2000, 2, threads=1, ports_per_thread=8, extra=LENIENT)
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    br = result["chain_deltas"]["dut1:translator"]
    print(f"mape-br (bpf, odd-port-drop): sent {sent}, lost {sent - valid}, BR dropped "
          f"{br['fault_port_dropped']}")
    assert sent - valid == br["fault_port_dropped"], explain_loss(result)
    assert abs((sent - valid) - sent / 2) <= 0.02 * sent, "4 of the 8 sockets have odd ports"


def test_a_br_encapsulating_replies_to_the_wrong_ce(chain_factory, trial):
    chain = chain_factory("mape-br", backends=_faulty("wrong-ce"))
    result = trial(chain, 2000, 2, threads=1, ports_per_thread=8, extra=LENIENT)
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    br = result["chain_deltas"]["dut1:translator"]
    tester = result["chain_deltas"]["client:tunnel_end"]
    print(f"mape-br (bpf, wrong-ce): sent {sent}, lost {sent - valid}, BR sent to the wrong CE "
          f"{br['fault_wrong_ce']}, the tester's tunnel end refused {tester['drop_destination_mismatch']}")
    assert sent - valid == br["fault_wrong_ce"] == tester["drop_destination_mismatch"], explain_loss(result)
    assert abs((sent - valid) - sent / 2) <= 0.02 * sent


def test_the_socket_tester_plays_8_ces_of_one_address(chain_factory, trial):
    """8 CEs share 192.0.2.0 (PSIDs 0-7): one --source with one socket in each CE's port set; every query
    is answered, the client's tunnel end encapsulating each from its CE's MAP address (the BR checks it)."""
    chain = chain_factory("mape-br", backend="bpf", ces=8)
    result = trial(chain, 2000, 2, threads=1, ports_per_thread=8, extra=LENIENT)
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    ranges = result["config"]["sources"][0]["port_ranges"]
    assert [first >> 11 for first, _ in ranges] == list(range(8)), ranges
    br = result["chain_deltas"]["dut1:translator"]
    assert sent >= 3600 and valid == sent == br["decapsulated"], explain_loss(result)
