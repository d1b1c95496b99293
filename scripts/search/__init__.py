"""Throughput searches: the RFC 8219 binary search and MLRsearch (RFC 9971), over one trial runner.

settings: `SearchSettings` (bounds, error width, loss criterion, trial lengths), the method names and
    `check_method` (the retired fast search's one-line refusal).
runner: `verdict` (the one pass / fail / tester-limited rule), `TrialRecord`, `TrialRunner` (rests, records,
    replays stored trials on resume).
outcome: `SearchOutcome` and its statuses; `Search`, the bookkeeping both methods share.
rfc8219: `rfc8219_search`, the paper's binary search.
goals, mlrsearch: `mlrsearch_search`, RFC 9971 through FD.io CSIT's MLRsearch library, with its goals.
repeat: `repeat_search`, R repetitions of one method and their summary.
"""

from .goals import Goal, ResolvedGoal
from .mlrsearch import mlrsearch_search
from .outcome import (
    BELOW_LOWER,
    OK,
    UPPER_NOT_FAILED,
    Search,
    SearchOutcome,
    with_id,
)
from .repeat import RepeatedSearch, repeat_search, search_id, summarize_outcomes
from .rfc8219 import midpoint, rfc8219_search
from .runner import (
    FAIL,
    PASS,
    TESTER_LIMITED,
    ReplayMismatch,
    TrialRecord,
    TrialRunner,
    verdict,
)
from .settings import FAST, METHODS, MLRSEARCH, RETIRED, RFC8219, SearchSettings, check_method

__all__ = [
    "BELOW_LOWER", "FAIL", "FAST", "METHODS", "MLRSEARCH", "OK", "PASS", "RETIRED", "RFC8219",
    "TESTER_LIMITED", "UPPER_NOT_FAILED", "Goal", "RepeatedSearch", "ReplayMismatch", "ResolvedGoal",
    "Search", "SearchOutcome", "SearchSettings", "TrialRecord", "TrialRunner", "check_method", "midpoint",
    "mlrsearch_search", "repeat_search", "rfc8219_search", "search_id", "summarize_outcomes", "verdict",
    "with_id",
]
