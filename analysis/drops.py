"""Which of a hop's counters count lost packets (drops and errors): the one word rule wherever the suite
explains a loss, i.e. the bottleneck's evidence from a failing trial (analysis.evidence) and the known-answer
tests' failure messages. The counters are those a chain reads per hop (setups.counters and a translator's
own): `ip -s link` rx/tx_dropped, rx/tx_errors, rx_missed; /proc/net/snmp UDP InErrors, NoPorts,
RcvbufErrors, SndbufErrors; a translator's `drop_<reason>`; anything a backend names with these words.
"""

from __future__ import annotations

from collections.abc import Mapping

# A counter whose name (any case) holds one of these words counts lost packets.
LOSS_WORDS = ("drop", "err", "missed", "noports", "discard")


def counts_loss(name: str) -> bool:
    """Whether a counter of this name counts lost packets (a drop or an error)."""
    lowered = name.lower()
    return any(word in lowered for word in LOSS_WORDS)


def losses(deltas: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Of per-hop counter changes (hop -> counter -> increase), the loss counters that rose, per hop; hops
    with none left out."""
    found = {hop: {name: value for name, value in changes.items() if counts_loss(name) and float(value) > 0}
             for hop, changes in deltas.items()}
    return {hop: changes for hop, changes in found.items() if changes}
