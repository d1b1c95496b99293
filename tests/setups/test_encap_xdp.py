"""The AF_XDP tester playing 1 000 encapsulating CEs itself (xlatperf --encap, from the chain's
tester_place) through the tc-BPF tunnel ends of the single-DUT topologies (issue 34 items 3 and 4):

- `mape-br` (EA 13, 1 000 of its 8 192 CEs) and `lwaftr` (1 000 subscribers in the lwAFTR's binding
  table): at a low rate every query is answered, valid, and the DUT decapsulated every query;
- a BR dropping packets from odd source ports (as outside the CE's port set): the tester loses exactly the
  queries the BR counted;
- a BR encapsulating replies to odd ports to the next CE's MAP address: the tester counts exactly the BR's
  wrong-CE replies as wrong_ce, and those are its only lost queries.
The tester's frames pass the client host's tc tunnel end by (AF_XDP transmit skips tc egress; its replies
are taken at XDP before tc ingress), so only the tester encapsulates and checks here. Needs root.
"""

from __future__ import annotations

import pytest
from trials import explain_loss

from xlatbench.setups.backends.bpf import BpfBackend
from xlatbench.setups.plan import BackendChoice

pytestmark = [pytest.mark.root, pytest.mark.slow]

CES = 1000
RATE, DURATION = 2000, 2  # queries per second, seconds: low enough for a busy 2-core machine
LENIENT = ("--send-tolerance-abs", "0.05", "--max-lag", "0.2")


def _faulty(fault: str) -> BackendChoice:
    roles = dict(BackendChoice.parse("bpf").by_role)
    roles["mape-br"] = BpfBackend(fault=fault)
    return BackendChoice.of_roles(roles)


def _encap_trial(chain, trial) -> tuple[dict, int, int]:
    place = chain.tester_place("xdp", 1, 1024)
    assert place.encap is not None and place.encap.ces == CES, place
    result = trial(chain, RATE, DURATION, io="xdp", extra=LENIENT)
    assert result["io"]["encap"]["ces"] == CES, result["io"]["encap"]
    return result, result["totals"]["sent"], result["totals"]["valid"]


@pytest.mark.parametrize("name", ["mape-br", "lwaftr"])
def test_every_query_of_1000_played_ces_is_answered_through_the_dut(name, chain_factory, trial):
    chain = chain_factory(name, backend="bpf", ces=CES)
    result, sent, valid = _encap_trial(chain, trial)
    dut = result["chain_deltas"]["dut1:translator"]
    print(f"{name} (bpf, {CES} CEs, AF_XDP --encap): sent {sent}, valid {valid}, DUT decapsulated "
          f"{dut['decapsulated']}, encapsulated {dut['encapsulated']}")
    assert sent >= 0.9 * RATE * DURATION and valid == sent, explain_loss(result)
    assert result["io"]["frame_errors"].get("wrong_ce", 0) == 0
    assert dut["decapsulated"] == sent and dut["encapsulated"] == sent, dut


def test_a_br_dropping_odd_ports_loses_exactly_what_it_counted(chain_factory, trial):
    chain = chain_factory("mape-br", backends=_faulty("odd-port-drop"), ces=CES)
    result, sent, valid = _encap_trial(chain, trial)
    br = result["chain_deltas"]["dut1:translator"]
    print(f"mape-br (bpf, odd-port-drop, {CES} CEs, AF_XDP --encap): sent {sent}, lost {sent - valid}, BR "
          f"dropped {br['fault_port_dropped']}")
    assert sent - valid == br["fault_port_dropped"] > 0.3 * sent, explain_loss(result)
    assert result["io"]["frame_errors"].get("wrong_ce", 0) == 0


def test_a_br_encapsulating_to_the_wrong_ce_is_counted_as_wrong_ce(chain_factory, trial):
    chain = chain_factory("mape-br", backends=_faulty("wrong-ce"), ces=CES)
    result, sent, valid = _encap_trial(chain, trial)
    br = result["chain_deltas"]["dut1:translator"]
    wrong = result["io"]["frame_errors"]["wrong_ce"]
    print(f"mape-br (bpf, wrong-ce, {CES} CEs, AF_XDP --encap): sent {sent}, lost {sent - valid}, BR sent to "
          f"the wrong CE {br['fault_wrong_ce']}, tester's wrong_ce {wrong}")
    assert sent - valid == br["fault_wrong_ce"] == wrong > 0.3 * sent, explain_loss(result)
    assert result["io"]["encap"]["wrong_ce"] == wrong
