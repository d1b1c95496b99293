"""RFC 9693's phases against the emulated stateful NAT44 gateway (the `nat44` topology, issue 33), with known
answers read from the DUT itself, not from the tester: its namespace's own conntrack count
(nf_conntrack_count) and statistics (`conntrack -S`).

Phase 1 of N connections makes exactly N entries from an empty table; phase 2 over the same flows makes none;
tear-down removes exactly N. With nf_conntrack_max = K < N the table ends at K (seen: 998-1000 of 1000):
Linux conntrack does not refuse the new flows of a full table, it evicts entries not yet assured to admit
them (early drop, N - K of them or a few more), so nearly every query is still answered and only the count
shows the table full. The gateway's nftables cap on new connections at R per second (token bucket, burst
R/10) admits about burst + R x duration of a phase at twice R (the step fails) and all of one at half R (it
passes). The root conntrack sysctls come back to what they were after `down`, also when the process that
set them was killed with SIGKILL. A connection timeout shorter than the run is refused before anything
runs. About 25 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from xlatbench.scripts.stateful.emulated import EmulatedStatefulMeasurer
from xlatbench.scripts.stateful.measurer import TableSettings
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig, down, leftovers, rootsysctl
from xlatbench.setups.emulation.check import check

pytestmark = [pytest.mark.root]

TABLE_KEYS = ("net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets")
CAP_PER_S = 4000             # the gateway's new connections per second (nftables), burst 400
N = 3000
SAFE_RATE = 2000             # connections/s: half the cap, 1.5 s
# A send lag up to 0.5 s is the tester's to absorb (a VM pause on a busy machine), not a void phase: the known
# answers here are the DUT's counts, not the schedule.
TESTER = TesterOptions(io="xdp", first_port=1024, timeout_s=0.5, sender_cpus="0", receiver_cpus="0",
                       extra_args=("--max-lag", "0.5"))


def _root_table() -> dict[str, str]:
    return {key: rootsysctl.read(key) for key in TABLE_KEYS}


def test_root_table_is_restored_after_a_killed_run(prefix):
    """A process sets the table (nf_conntrack_max = 1500, 2048 buckets) and is killed with SIGKILL: `down`
    of its prefix (what a resumed campaign or `setup down` runs) puts the root values back."""
    killed = prefix + "k"
    os.environ["XLATBENCH_TEST_PREFIXES"] += f" {killed}"
    before = _root_table()
    script = textwrap.dedent(f"""
        import time
        from xlatbench.setups.emulation import EmulatedChain, EmulationConfig
        chain = EmulatedChain.up(EmulationConfig("nat44", prefix="{killed}", conntrack_max=1500,
                                                 conntrack_buckets=2048))
        print("up", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        assert _root_table() == {TABLE_KEYS[0]: "1500", TABLE_KEYS[1]: "2048"}
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert _root_table() == {TABLE_KEYS[0]: "1500", TABLE_KEYS[1]: "2048"}, "nothing restores before down"
    down(killed)
    assert _root_table() == before
    assert leftovers(killed) == []


@pytest.fixture(scope="module")
def stateful(prefix) -> Iterator[tuple[EmulatedChain, EmulatedStatefulMeasurer, dict[str, str]]]:
    before = _root_table()
    chain = EmulatedChain.up(EmulationConfig("nat44", prefix=prefix, new_connection_cap=CAP_PER_S,
                                             knot_cpus=(1,), client_cpus=(0,)))
    try:
        yield chain, EmulatedStatefulMeasurer(chain, TESTER), before
    finally:
        chain.down()


def test_setup_check_sees_the_netmapped_source_and_describe_names_the_nat44(stateful):
    chain, _, _ = stateful
    verdict = check(chain.emulation)
    assert verdict["ok"], verdict["failures"]
    nat = chain.describe()["nat44"]["dut1"]
    assert (nat["nat"], nat["pool"], nat["new_connections_per_s_cap"]) == ("iptables NETMAP", "198.18.0.0/16",
                                                                          CAP_PER_S)


def test_phase_one_makes_exactly_n_connections(stateful):
    chain, measurer, _ = stateful
    one = measurer.establish(N, SAFE_RATE)
    assert (one.sent, one.answered) == (N, N)
    assert one.table_before == 0, "establish() starts from an empty table"
    assert one.table_after == N == chain.conntrack_count("dut1")
    assert one.passed, one.reasons


def test_phase_two_makes_no_connection(stateful):
    _, measurer, _ = stateful
    two = measurer.over_established(N, SAFE_RATE, rate_qps=6000, duration_s=1.0)
    assert two.setup.table_after == N, two.setup
    assert two.table_before == two.table_after == N, "no connection made over established flows"
    assert not two.table_grew
    # Every flow queried twice over: the known answer is the count above; the replies may lose a few to a
    # machine busy with other work (seen once in about ten runs), which is no connection made.
    assert two.sent == 6000 and two.answered >= 0.99 * two.sent, (two.answered, two.reasons)


def test_tear_down_removes_exactly_n(stateful):
    chain, measurer, _ = stateful
    down_ = measurer.tear_down(N, SAFE_RATE)
    assert down_.loaded == N and down_.removed == N
    assert chain.conntrack_count("dut1") == 0
    assert down_.delete_s > 0 and down_.empty_delete_s > 0


def test_above_the_new_connection_cap_phase_one_fails_and_below_passes(stateful):
    _, measurer, _ = stateful
    below = measurer.establish(4000, CAP_PER_S / 2)
    assert below.passed, f"{below.answered} of 4000 answered at half the cap, {below.reasons}"
    above = measurer.establish(4000, CAP_PER_S * 2)   # 0.5 s
    admitted = CAP_PER_S // 10 + CAP_PER_S * 0.5      # the burst, then the rate
    assert not above.passed
    assert abs(above.answered - admitted) <= 0.1 * admitted, above.answered
    assert above.table_after == above.answered, "a dropped new flow makes no connection"


def test_a_full_table_holds_k_and_evicts_the_rest(stateful):
    chain, measurer, before = stateful
    k = 1000
    measurer.apply(TableSettings(max_connections=k, hash_size=1024))
    try:
        assert _root_table() == {TABLE_KEYS[0]: str(k), TABLE_KEYS[1]: "1024"}
        assert measurer.conditions().table.max_connections == k
        one = measurer.establish(N, SAFE_RATE)
        assert one.table_after is not None and 0.98 * k <= one.table_after <= k, "full at K (an eviction "\
            "racing an insert may leave it a few short)"
        assert one.table_short and not one.passed
        assert one.raw is not None and one.raw["conntrack_stats"]["early_drop"] >= N - k
        assert one.answered >= 0.9 * N, "the kernel evicts to admit: nearly every query is answered"
    finally:
        measurer.apply(TableSettings())


def test_a_timeout_shorter_than_the_run_is_refused_before_anything_runs(stateful):
    chain, measurer, _ = stateful
    measurer.establish(10, SAFE_RATE)
    measurer.apply(TableSettings(timeout_s=20))
    try:
        assert chain.udp_timeouts("dut1") == {"nf_conntrack_udp_timeout": 20,
                                              "nf_conntrack_udp_timeout_stream": 20}
        with pytest.raises(ValueError, match="shorter than the run") as refused:
            measurer.establish(3000, 1000)  # 3 s of phase 1 + 30 s of reads > 20 s
        assert "\n" not in str(refused.value)
        assert chain.conntrack_count("dut1") == 10, "the table was not even flushed"
    finally:
        measurer.apply(TableSettings())
    assert chain.udp_timeouts("dut1")["nf_conntrack_udp_timeout"] == 3600


def test_down_restores_the_root_table(stateful):
    chain, _, before = stateful
    chain.set_conntrack_table(5000, 4096)
    assert _root_table() == {TABLE_KEYS[0]: "5000", TABLE_KEYS[1]: "4096"}
    chain.down()
    assert _root_table() == before
