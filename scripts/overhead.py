"""The time a trial takes beyond its duration, for `campaign plan`: starting the tester and waiting out its
reply timeout, and on a testbed the SSH round trips around every trial (counters before and after, the
daemons' pid files and liveness, the translators' CPU times, the tester's start and the fetch of its JSON
from the client). Always measured, never assumed: from the store's own trial records of the setup (their
wall time minus their duration) when it holds enough of them, else by the setup's environment (a testbed
probes its hosts), else said to be unknown. `campaign plan` prints it; a running campaign's ETA counts it.
Where none of these knows it, `campaign plan` counts a stated default per environment kind
(`default_overhead`), said as such, so that its total is never silently short of the overhead."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..data.records import TrialEntry
from ..data.store import ResultStore

MIN_STORED_TRIALS = 3  # fewer stored trials than this: the median says too little, probe instead
# Stated defaults per environment kind, s per trial beyond its duration and the tester's reply timeout, used
# by `campaign plan` only where neither the store nor a probe knows: a testbed's SSH work around a trial
# (issue 32: about 2.4 s probed on the sshd testbed, its 0.25 s timeout included), a local chain's or
# loopback's tester start and counters (an assumption, not measured: a few stored trials replace it).
DEFAULT_PER_TRIAL_S = {"testbed": 2.15, "chain": 0.5, "loopback": 0.5, "fake": 0.0}


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


def default_overhead(kind: str, timeout_s: float) -> Overhead:
    """The stated default overhead of a setup kind (DEFAULT_PER_TRIAL_S plus the tester's reply timeout)."""
    if kind == "fake":
        return Overhead(0.0, "simulated time: trials take only their duration")
    base = DEFAULT_PER_TRIAL_S.get(kind, DEFAULT_PER_TRIAL_S["chain"])
    return Overhead(base + timeout_s, f"stated default for a {kind} setup, not measured ({base:g} s + the "
                    f"tester's {timeout_s:g} s reply timeout); {MIN_STORED_TRIALS} or more of its trials in "
                    "the store replace it")


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
