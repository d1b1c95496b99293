"""The time a trial takes beyond its duration, for `campaign plan`: starting the tester and waiting out its
reply timeout, and on a testbed the SSH round trips around every trial (counters before and after, the
daemons' pid files and liveness, the translators' CPU times, the tester's start and the fetch of its JSON
from the client). Always measured, never assumed: from the store's own trial records of the setup (their
wall time minus their duration) when it holds enough of them, else by the setup's environment (a testbed
probes its hosts), else said to be unknown. `campaign plan` prints it; a running campaign's ETA counts it."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..results.records import TrialEntry
from ..results.store import ResultStore

MIN_STORED_TRIALS = 3  # fewer stored trials than this: the median says too little, probe instead


@dataclass(frozen=True)
class Overhead:
    """per_trial_s: s a trial takes beyond its duration; source: one line saying how it was measured;
    per_idle_run_s: s an idle-capture run takes beyond that (its host samplers, clock offsets)."""

    per_trial_s: float
    source: str
    per_idle_run_s: float = 0.0


class Probe(Protocol):
    """What can time a trial's overhead before running one (scripts.environments.base.Environment)."""

    def probe_trial_overhead(self) -> Overhead | None: ...


def setup_overheads(store: Path, envs: Mapping[str, Probe]) -> dict[str, Overhead | None]:
    """Per setup name: the overhead of its trials in `store`, else its environment's probe, else None (not
    known)."""
    return {name: stored_overhead(store, name) or env.probe_trial_overhead() for name, env in envs.items()}


def trials_overhead_s(found: Overhead | None, trials: float) -> float | None:
    """Time `trials` trials take beyond their durations, s (None: the setup's overhead is not known)."""
    return None if found is None else found.per_trial_s * trials


def idle_overhead_s(found: Overhead | None, runs: int) -> float | None:
    """Time `runs` idle-capture runs take beyond their durations, s (None: not known)."""
    return None if found is None else (found.per_trial_s + found.per_idle_run_s) * runs


def stored_overhead(store: Path, setup: str) -> Overhead | None:
    """Median of (wall time - duration) over the store's trial records of setup `setup`; None when the store
    has fewer than MIN_STORED_TRIALS of them."""
    extra = [entry.wall_s - float(entry.result["duration_s"]) for entry in ResultStore(store).records()
             if isinstance(entry, TrialEntry) and entry.context.setup.get("name") == setup]
    if len(extra) < MIN_STORED_TRIALS:
        return None
    return Overhead(max(0.0, statistics.median(extra)),
                    f"median wall time minus duration of its {len(extra)} trials in {store}")
