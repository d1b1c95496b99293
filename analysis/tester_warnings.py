"""What the tester warned of, for the report: xlatperf's `warnings` kept in each trial record (a
case-rewriting server, replies on unbound AF_XDP queues, most replies failing their checksum) gathered into
one line per kind of warning, with the trials and configurations that carried it.

A warning says the loss of its trials means less than it seems (the status of the trial stays as the tester
gave it); the report says so beside the conditions, so a reader sees it before quoting a figure.
"""

from __future__ import annotations

import re

from ..data.records import Record, TrialEntry

_NUMBER = re.compile(r"\d+(\.\d+)?")


def _warnings_of(record: TrialEntry) -> list[str]:
    """The record's warnings: stored with its result, else (records stored before) in its raw document."""
    stored = record.result.get("warnings")
    if stored is None and isinstance(record.raw, dict):
        stored = record.raw.get("warnings")
    return [w for w in stored or [] if isinstance(w, str) and w.strip()]


def warnings_text(records: list[Record]) -> list[str]:
    """One line per kind of warning (its text with the numbers set aside): how many trials carried it, in
    which setups and core counts, and its first occurrence in full; empty when no trial carried one."""
    trials = [r for r in records if isinstance(r, TrialEntry)]
    kinds: dict[str, tuple[str, list[str]]] = {}
    for record in trials:
        where = f"{record.context.setup_name} at {record.context.cores} core(s)"
        for warning in _warnings_of(record):
            first, places = kinds.setdefault(_NUMBER.sub("#", warning), (warning, []))
            places.append(where)
    lines = []
    for first, places in kinds.values():
        setups = ", ".join(dict.fromkeys(places))
        lines.append(f"{len(places)} of {len(trials)} trials ({setups}): {first}")
    return lines
