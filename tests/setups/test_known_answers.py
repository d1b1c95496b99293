"""Known answers injected with nftables on the DUT1-DUT2 link; the tester must measure them.

- random loss of 1 % of the queries: the measured loss lies in the 99 % binomial interval of 1 %
  for the number of queries sent, and equals what the nft rule counted;
- every 100th query dropped: measured loss exactly 1 % (+- one query);
- every 10th reply duplicated: the tester counts a tenth of the replies as duplicates, valid unchanged.
Each translator chain runs with both translators of the emulation: tayga (user space) and bpf (tc-BPF SIIT),
and each fault once more with the tester on AF_XDP (`io = "xdp"`: the client's veth, flows without sockets)
through the in-kernel translator, whose own limit is far above the rate. Needs root and the tester.
"""

from __future__ import annotations

import math

import pytest
from trials import explain_loss

from xlatbench.setups.emulation.faults import Fault, fault_counters, inject

pytestmark = [pytest.mark.root, pytest.mark.slow]

RATE_QPS = 2000
# 8 000 queries: 80 dropped or duplicated by the nth rules, about 80 by the random one (99.99 % interval
# [48, 117]); every check is exact against the rule's own count, which needs no longer trial.
DURATION_S = 4


def binomial_interval(n: int, p: float, confidence: float = 0.99) -> tuple[int, int]:
    """Smallest [lo, hi] of counts holding at least `confidence` of Binomial(n, p), equal tails."""
    tail = (1 - confidence) / 2
    log_pmf = [
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
        for k in range(n + 1)
    ]
    cdf, lo = 0.0, 0
    for k, lp in enumerate(log_pmf):
        cdf += math.exp(lp)
        if cdf > tail:
            lo = k
            break
    cdf, hi = 0.0, n
    for k in range(n, -1, -1):
        cdf += math.exp(log_pmf[k])
        if cdf > tail:
            hi = k
            break
    return lo, hi


def test_binomial_interval_matches_normal_approximation():
    lo, hi = binomial_interval(20000, 0.01)
    sigma = math.sqrt(20000 * 0.01 * 0.99)
    assert abs(lo - (200 - 2.576 * sigma)) <= 3 and abs(hi - (200 + 2.576 * sigma)) <= 3


# (backend, tester io): both translators with sockets, and the in-kernel one with the tester on AF_XDP.
BACKENDS_IO = [("tayga", "socket"), ("bpf", "socket"), ("bpf", "xdp")]


@pytest.mark.parametrize(
    ("topology", "backend", "io"),
    [("baseline", "tayga", "socket"), ("464xlat", "tayga", "socket"), ("464xlat", "bpf", "socket"),
     ("464xlat", "bpf", "xdp")],
)
def test_random_one_percent_query_loss(topology, backend, io, chain_factory, trial):
    chain = chain_factory(topology, backend=backend)
    inject(chain.emulation, Fault("random-loss", 100))
    result = trial(chain, RATE_QPS, DURATION_S, io=io)
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    lost = sent - valid
    # The rule's own count is random: a 99 % interval fails one run in a hundred per parametrization (CI
    # saw 239 of 20 000 against [165, 237]), so the range check uses 99.99 %; the exact check is the next one.
    lo, hi = binomial_interval(sent, 0.01, confidence=0.9999)
    dropped = sum(fault_counters(chain.emulation).values())
    print(
        f"{topology} ({backend}, tester {io}): random 1 % loss: sent {sent}, "
        f"lost {lost} ({lost / sent:.4%}), "
        f"nft dropped {dropped}, 99.99 % interval [{lo}, {hi}]"
    )
    assert lo <= lost <= hi
    # The tester's count is exact: it counts as lost exactly what the rule dropped, with either backend
    # and tester io. bpf's one extra lost query in CI (socket tester) was the tester's own misdated reply,
    # fixed in xlatperf 29c161f; after it, 10 runs of 464xlat-bpf with the socket tester and 18 with the
    # AF_XDP tester here (2026-11-25) lost none beyond the rule's.
    assert lost == dropped, f"a loss the rule did not make; {explain_loss(result)}"


@pytest.mark.parametrize(("backend", "io"), BACKENDS_IO)
def test_every_100th_query_dropped(backend, io, chain_factory, trial):
    chain = chain_factory("mapt", backend=backend)
    inject(chain.emulation, Fault("nth-loss", 100))
    result = trial(chain, RATE_QPS, DURATION_S, io=io)
    sent, valid = result["totals"]["sent"], result["totals"]["valid"]
    lost = sent - valid
    print(
        f"mapt ({backend}, tester {io}): every 100th query dropped: sent {sent}, "
        f"lost {lost} ({lost / sent:.4%}), "
        f"loss_ratio {result['loss_ratio']}"
    )
    assert abs(lost - sent / 100) <= 1
    assert abs(result["loss_ratio"] - 0.01) <= 1 / sent


@pytest.mark.parametrize(("backend", "io"), BACKENDS_IO)
def test_every_10th_reply_duplicated(backend, io, chain_factory, trial):
    chain = chain_factory("464xlat", backend=backend)
    inject(chain.emulation, Fault("dup-replies", 10))
    result = trial(chain, RATE_QPS, DURATION_S, io=io)
    totals = result["totals"]
    duplicated = sum(fault_counters(chain.emulation).values())
    print(
        f"464xlat ({backend}, tester {io}): every 10th reply duplicated: sent {totals['sent']}, "
        f"valid {totals['valid']}, "
        f"duplicate {totals['duplicate']}, nft duplicated {duplicated}"
    )
    assert totals["valid"] == totals["sent"]
    assert abs(totals["duplicate"] - totals["valid"] / 10) <= 1
    assert totals["duplicate"] == duplicated
