"""Before an AF_XDP tester measures, the client interface's receive queues are checked (issue 31, item 2).

xlatperf binds one AF_XDP socket per thread pair, on queues 0..threads-1 (a campaign's AF_XDP tester runs one
pair); a reply the other side's hash puts on any other queue never reaches it and would count as loss. Known
answers: a client interface with 4 receive queues is refused before a trial, in one line naming the count
and the fix; with one queue, with sockets, or where the count cannot be read, nothing is refused. Both
worlds read the count the same way (setups.chain.LIST_RECEIVE_QUEUES, sysfs rx-N entries).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xlatbench.scripts.measurers import ChainMeasurer
from xlatbench.scripts.xlatperf import TesterOptions
from xlatbench.setups.chain import TesterPlace, receive_queue_count, xdp_queue_problem


@dataclass
class QueuedChain:
    """A chain whose client interface has `queues` receive queues (None: unreadable)."""

    queues: int | None
    topology: str = "464xlat"
    max_flows: int | None = None

    def tester_place(self, io: str, flows: int, first_port: int | None) -> TesterPlace:
        return TesterPlace(interface="enp5s0f0" if io == "xdp" else None)

    def client_receive_queues(self) -> tuple[str, int | None]:
        return "enp5s0f0", self.queues


def test_a_client_interface_with_more_queues_than_the_tester_binds_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError) as refused:
        ChainMeasurer(QueuedChain(4), TesterOptions(io="xdp", threads=1))  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message
    assert "enp5s0f0 has 4 receive queues but the tester binds 1" in message
    assert "ethtool -L enp5s0f0 combined 1" in message


@pytest.mark.parametrize("queues,options", [(1, TesterOptions(io="xdp", threads=1)),
                                            (None, TesterOptions(io="xdp", threads=1)),
                                            (4, TesterOptions(io="socket", threads=1))])
def test_one_queue_sockets_or_an_unknown_count_measure(queues, options) -> None:
    ChainMeasurer(QueuedChain(queues), options)  # type: ignore[arg-type]


def test_the_count_is_the_rx_entries_of_the_listing() -> None:
    assert receive_queue_count("rx-0\nrx-1\nrx-2\nrx-3\ntx-0\ntx-1\n") == 4
    assert receive_queue_count("") is None
    assert xdp_queue_problem("eth0", 2, 2) is None  # every queue bound (a standalone xlatperf's --threads 2)


@pytest.mark.root
def test_the_emulated_chain_reads_its_client_veths_queues(monkeypatch) -> None:
    """A veth with 4 receive queues in a namespace of its own, read as the emulated chain reads its client's:
    4, which a one-thread AF_XDP tester is refused on."""
    import secrets
    from types import SimpleNamespace

    from xdplink import xdp_link

    from xlatbench.setups.emulation import chain as emulated

    with xdp_link("xbq" + secrets.token_hex(2), queues=4) as link:
        monkeypatch.setattr(emulated, "client_interface", lambda topology: link.inner)
        chain = SimpleNamespace(emulation=SimpleNamespace(topology=None, netns_of={"client": link.netns}))
        assert emulated.EmulatedChain.client_receive_queues(chain) == (link.inner, 4)  # type: ignore[arg-type]
        assert xdp_queue_problem(link.inner, 4, 1) is not None
