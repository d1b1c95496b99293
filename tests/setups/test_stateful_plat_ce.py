"""RFC 9693's phases against the two stateful parts of the IPv4aaS chains in emulation (issue 33 item 3), with
known answers read from the DUT's own conntrack count, not from the tester:

- the PLAT alone (`plat`, with `plat_netmap`: one public address per IPv6 client), its stateless NAT64 (the
  emulation's default backend, and the tc-BPF one) beside the kernel's nftables NAT44: the connections are
  the PLAT namespace's conntrack entries;
- the MAP-T CE alone (`ce`): its NAPT44 in the `napt` namespace maps every flow into the CE's port set of
  2 048 ports, so N is at most 2 048 there, and N above it is refused in one line naming the port set.

Phase 1 of N makes exactly N entries from an empty table, phase 2 over the same flows none, tear-down removes
exactly N. About 40 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from xlatbench.scripts.stateful.emulated import EmulatedStatefulMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig
from xlatbench.setups.plan import BackendChoice

pytestmark = [pytest.mark.root]

TESTER = TesterOptions(io="xdp", first_port=1024, timeout_s=0.5, sender_cpus="0", receiver_cpus="0",
                       extra_args=("--max-lag", "0.5"))
SAFE_RATE = 2000                   # connections/s
CE_PORTS = 2048                    # the paper's CE 11b: 2^(16 - 5) ports

# (topology, backend, chain options, N, the host keeping the connections, the role recorded)
SETUPS = {
    "plat-default": ("plat", "tayga", {"plat_netmap": True}, 3000, "dut1", "plat-nat44"),
    "plat-bpf": ("plat", "bpf", {"plat_netmap": True}, 3000, "dut1", "plat-nat44"),
    "ce": ("ce", "tayga", {}, 1500, "napt", "napt44"),
}


@pytest.fixture(scope="module", params=sorted(SETUPS))
def stateful(request, prefix) -> Iterator[tuple[EmulatedChain, EmulatedStatefulMeasurer, tuple]]:
    topology, backend, options, *_ = setup = SETUPS[request.param]
    chain = EmulatedChain.up(EmulationConfig(topology, backends=BackendChoice.parse(backend), prefix=prefix,
                                             knot_cpus=(1,), client_cpus=(0,), **options))
    try:
        yield chain, EmulatedStatefulMeasurer(chain, TESTER), setup
    finally:
        chain.down()


def test_the_connections_are_kept_where_the_nat_is(stateful):
    chain, measurer, (_, _, _, _, host, role) = stateful
    assert chain.stateful_host() == host
    conditions = measurer.conditions()
    assert conditions.role == role
    assert "NAT44" in conditions.implementation or "NETMAP" in str(conditions.extra["dut"]) or \
        "SNAT" in str(conditions.extra["dut"])


def test_phase_one_makes_exactly_n_and_phase_two_none(stateful):
    chain, measurer, (_, _, _, n, host, _) = stateful
    one = measurer.establish(n, SAFE_RATE)
    assert (one.sent, one.answered) == (n, n)
    assert one.table_before == 0 and one.table_after == n == chain.conntrack_count(host)
    assert one.passed, one.reasons
    two = measurer.over_established(n, SAFE_RATE, rate_qps=2 * n, duration_s=1.0)
    assert two.setup.table_after == n and two.answered == two.sent == 2 * n
    assert two.table_before == two.table_after == n and not two.table_grew


def test_tear_down_removes_exactly_n(stateful):
    chain, measurer, (_, _, _, n, host, _) = stateful
    down_ = measurer.tear_down(n, SAFE_RATE)
    assert down_.loaded == n and down_.removed == n
    assert chain.conntrack_count(host) == 0


def test_the_ce_refuses_more_connections_than_its_port_set(stateful):
    _, measurer, (topology, *_) = stateful
    if topology != "ce":
        assert measurer.max_connections() > 10**6
        return
    assert measurer.max_connections() == CE_PORTS
    with pytest.raises(ValueError, match=r"^connections must be 1-2048 \(the MAP-T CE's port set") as err:
        measurer.establish(CE_PORTS + 1, SAFE_RATE)
    assert "\n" not in str(err.value)
