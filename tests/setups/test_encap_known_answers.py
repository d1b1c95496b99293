"""Known answers through the encapsulating chains (issue 34), the tc-BPF tunnel ends as DUTs, the tester on
sockets: `mape` and `lw4o6` (dual-DUT: the faults on the CE-BR link, which carries IPv4 in IPv6, so the nft
rules match the inner UDP port) and `mape-br` (the tester as MAP-E CEs, its sockets' IPv4 encapsulated by the
client host; the faults on the BR's IPv4 side). One chain per topology, the faults one after another:

- random loss of 1 % of the queries: the tester's loss equals the rule's count and lies in its 99.99 %
  binomial interval;
- every 50th query dropped: exactly 2 % (+- one query), equal to the rule's count;
- every 10th reply duplicated (dual-DUT: the BR forwards the replies): a tenth of the replies counted as
  duplicates, none lost;
- a cap of 1000 queries/s (nft limit, bucket of 20): at 2000 queries/s the tester's loss equals the rule's
  count, and what passed is 1000 per second of the send window plus the bucket (within 5 %).
Every query and reply crossed both tunnel ends once: the programs' own counters say so. Needs root.
"""

from __future__ import annotations

import pytest
from test_known_answers import binomial_interval
from trials import explain_loss

from xlatbench.setups.emulation.faults import Fault, clear, fault_counters, inject, rate_cap_burst

pytestmark = [pytest.mark.root, pytest.mark.slow]

RATE_QPS = 2000
DURATION_S = 2  # 4 000 queries a trial
LENIENT = ("--send-tolerance-abs", "0.05", "--max-lag", "0.2")
CAP_PPS = 1000


def _run(chain, trial, fault: Fault) -> tuple[dict, int]:
    """One trial with `fault` installed; the tester's result and the rule's count."""
    clear(chain.emulation)
    inject(chain.emulation, fault)
    result = trial(chain, RATE_QPS, DURATION_S, threads=1, ports_per_thread=8, extra=LENIENT)
    counted = sum(fault_counters(chain.emulation).values())
    clear(chain.emulation)
    return result, counted


@pytest.mark.parametrize("name", ["mape", "lw4o6", "mape-br"])
def test_known_answers_through_the_tunnel(name, chain_factory, trial):
    chain = chain_factory(name, backend="bpf")
    report = []

    result, dropped = _run(chain, trial, Fault("random-loss", 100))
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    lo, hi = binomial_interval(sent, 0.01, confidence=0.9999)
    report.append(f"random 1 %: sent {sent}, lost {sent - valid}, nft dropped {dropped} [{lo}, {hi}]")
    assert sent - valid == dropped, f"a loss the rule did not make; {explain_loss(result)}"
    assert lo <= dropped <= hi
    tunnels = {key: value for key, value in result["chain_deltas"].items()
               if key.endswith((":translator", ":tunnel_end"))}
    # Each query is encapsulated once, each reply too (the tester's side is a tunnel end on mape-br), and
    # decapsulated once, but for the queries the rule dropped inside the tunnel (dual-DUT: on the CE-BR link;
    # mape-br: after the BR, on its IPv4 side).
    encapsulated = sum(c["encapsulated"] for c in tunnels.values())
    decapsulated = sum(c["decapsulated"] for c in tunnels.values())
    inside = dropped if chain.emulation.topology.single_dut_of is None else 0
    assert encapsulated == sent + valid and decapsulated == sent + valid - inside, tunnels
    assert not any(v for c in tunnels.values() for k, v in c.items() if k.startswith("drop_")), tunnels

    result, dropped = _run(chain, trial, Fault("nth-loss", 50))
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    report.append(f"every 50th: sent {sent}, lost {sent - valid}, nft dropped {dropped}")
    assert abs((sent - valid) - sent / 50) <= 1 and sent - valid == dropped, explain_loss(result)

    if name != "mape-br":  # mape-br: Knot itself sends the replies onto the DUT's IPv4 side
        result, duplicated = _run(chain, trial, Fault("dup-replies", 10))
        totals = result["totals"]
        report.append(f"every 10th reply duplicated: valid {totals['valid']}, duplicate "
                      f"{totals['duplicate']}, nft duplicated {duplicated}")
        assert totals["valid"] == totals["sent"], explain_loss(result)
        assert totals["duplicate"] == duplicated and abs(duplicated - totals["valid"] / 10) <= 1

    result, dropped = _run(chain, trial, Fault("rate-cap", CAP_PPS))
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    window = float(result.get("send", {}).get("window_s") or DURATION_S)
    expected = CAP_PPS * window + rate_cap_burst(CAP_PPS)
    report.append(f"cap {CAP_PPS}/s: sent {sent}, passed {valid} (expected {expected:.0f}), nft dropped "
                  f"{dropped}")
    print(f"{name} (bpf, sockets): " + "; ".join(report))
    assert sent - valid == dropped, explain_loss(result)
    assert abs(valid - expected) <= 0.05 * expected
