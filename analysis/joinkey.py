"""The one key every analysis join uses: (setup, DUT cores, tester sessions, [[search]] name, method).

Two figures are compared, averaged or put side by side only when their keys agree on everything but what the
comparison is about (the setup for chain/baseline ratios, the sessions for a sessions table, the cores for
the scale-up row). Evidence (idle runs, idle means, trials), latency, the comparison table, the sessions
tables and the measured bottleneck all take their keys from here, so a sessions sweep or a second [[search]]
table can never be pooled with another.

An idle capture belongs to the search whose median rate it offered: newer records carry it in "rate_of"
(scripts.records.RateOf); older ones name it in their rate_source text ("median of fast search 'default'"),
and the oldest (idle means) not at all (search and method "" then: they join any search at their point).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..data.records import Context, IdleMean, IdleRun, RateOf, TrialEntry


class JoinKey(NamedTuple):
    """setup name, DUT cores (count), tester sessions (distinct flows, count), [[search]] name, method."""

    setup: str
    cores: int
    sessions: int
    search: str
    method: str

    @property
    def point(self) -> tuple[str, int, int]:
        """(setup, cores, sessions): the sweep point an idle capture is stored under."""
        return self.setup, self.cores, self.sessions

    def matches(self, other: JoinKey) -> bool:
        """Same key, where an unknown ("") search or method of either side matches any."""
        if self.point != other.point:
            return False
        return all(a == b or "" in (a, b) for a, b in ((self.search, other.search),
                                                        (self.method, other.method)))

    def with_setup(self, setup: str) -> JoinKey:
        """The same point and search of another setup (its baseline, its loopback self-test)."""
        return self._replace(setup=setup)


def join_key(context: Context, search: str, method: str) -> JoinKey:
    return JoinKey(context.setup_name, context.cores, context.sessions, search, method)


_SOURCE = re.compile(r"median of (?P<method>\S+) search '(?P<search>[^']*)'")


def rate_of(record: IdleRun | IdleMean) -> RateOf:
    """Which search's median an idle record's rate is, and whether it is a lower bound or a median over
    fewer repetitions: from the record's rate_of, else read from an older record's rate_source text."""
    if record.rate_of is not None:
        return record.rate_of
    text = record.rate_source if isinstance(record, IdleRun) else ""
    found = _SOURCE.search(text or "")
    return RateOf(search=found["search"] if found else "", method=found["method"] if found else "",
                  lower_bound="lower bound" in (text or ""), partial=False)


def idle_key(record: IdleRun | IdleMean) -> JoinKey:
    source = rate_of(record)
    return join_key(record.context, source.search, source.method)


def trial_key(record: TrialEntry) -> JoinKey:
    return join_key(record.context, record.search.settings_name, record.search.method)
