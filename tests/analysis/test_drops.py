"""The one rule for which counters count lost packets (analysis.drops), on hand-built counter changes."""

from __future__ import annotations

from xlatbench.analysis.drops import counts_loss, losses


def test_loss_counters_of_every_layer_and_nothing_else() -> None:
    deltas = {
        "dut1:eth1": {"rx_packets": 4000, "rx_dropped": 3, "tx_errors": 0, "rx_missed": 2},
        "dut1:xlatbench64": {"tx_dropped": 7, "tx_packets": 3993},
        "server:udp": {"InDatagrams": 3990, "NoPorts": 1, "InErrors": 4, "RcvbufErrors": 4},
        "dut2:translator": {"translated_6to4": 4000, "drop_unmapped_source": 5, "drop_fragment": 0},
        "dut2:nft:xq_fault": {"discarded_packets": 80},
        "client:eth1": {"tx_packets": 4000, "tx_dropped": -1},  # a counter that fell (a reset): no loss
    }
    assert losses(deltas) == {
        "dut1:eth1": {"rx_dropped": 3, "rx_missed": 2},
        "dut1:xlatbench64": {"tx_dropped": 7},
        "server:udp": {"NoPorts": 1, "InErrors": 4, "RcvbufErrors": 4},
        "dut2:translator": {"drop_unmapped_source": 5},
        "dut2:nft:xq_fault": {"discarded_packets": 80},
    }
    assert counts_loss("SndbufErrors") and not counts_loss("OutDatagrams") and not counts_loss("rx_bytes")
