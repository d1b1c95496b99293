"""RFC 9971 (MLRsearch) search goals as a campaign file states them, with the defaults that mirror RFC 8219.

A goal is what RFC 9971 calls a "search goal": goal loss ratio, goal exceed ratio, goal final trial duration,
goal duration sum, goal width (relative) and the initial trial duration of its preceding targets. It lives
here, apart from the library, so a campaign file is checked (one line per mistake) before any trial runs and
so `SearchSettings` can hold goals without importing the library. `mlrsearch.py` turns a `Goal` into the
library's `SearchGoal`.

Keys of a `[[search.goals]]` table (every one optional but `name`; unset ones take the default below):
    name: label of the goal in records and tables (unique within its search).
    loss_ratio: goal loss ratio, fraction (default: the search's loss_ratio, 0.0001 = RFC 8219's 0.01 %).
    exceed_ratio: goal exceed ratio, fraction of the duration sum whose trials may exceed the loss ratio
        (default 0: no trial may, as in RFC 8219).
    relative_width: goal width as a fraction of the upper bound (default: the search's error_ratio, or
        error_qps / max_rate_qps when only error_qps is given; the wider of the two when both are).
    initial_trial_duration_s: shortest trials, used for the preceding targets, s (default: the search's
        short_duration_s, at most the final trial duration).
    final_trial_duration_s: goal final trial duration, s (default: the search's duration_s).
    duration_sum_s: goal duration sum, s (default: the final trial duration: one full-length trial decides).
    preceding_targets: coarser targets searched first with shorter trials (default 2).
    expansion_coefficient: how fast the external search widens, integer > 1 (default 2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

# The default second goal: the same loss ratio, trials of short_duration_s, a majority of three deciding.
FAST_GOAL_TRIALS = 3
FAST_GOAL_EXCEED = 0.5


@dataclass(frozen=True)
class Goal:
    """One RFC 9971 search goal as written (None: take the search's default, see `resolve_goal`)."""

    name: str
    loss_ratio: float | None = None
    exceed_ratio: float | None = None
    relative_width: float | None = None
    initial_trial_duration_s: float | None = None
    final_trial_duration_s: float | None = None
    duration_sum_s: float | None = None
    preceding_targets: int = 2
    expansion_coefficient: int = 2

    def __post_init__(self) -> None:
        problems = goal_problems(self)
        if problems:
            raise ValueError(f"goal {self.name!r}: " + "; ".join(problems))


@dataclass(frozen=True)
class ResolvedGoal:
    """A goal with every value set (units as in `Goal`)."""

    name: str
    loss_ratio: float
    exceed_ratio: float
    relative_width: float
    initial_trial_duration_s: float
    final_trial_duration_s: float
    duration_sum_s: float
    preceding_targets: int
    expansion_coefficient: int

    def describe(self) -> str:
        """The goal in RFC 9971's terms, one line."""
        return (f"goal {self.name!r}: loss ratio {100 * self.loss_ratio:g} %, exceed ratio "
                f"{100 * self.exceed_ratio:g} %, final trial duration {self.final_trial_duration_s:g} s, "
                f"duration sum {self.duration_sum_s:g} s, width {100 * self.relative_width:g} %")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def goal_problems(goal: Goal) -> list[str]:
    """What is wrong with a goal's values, as one phrase each (empty when none)."""
    problems = []
    if not isinstance(goal.name, str) or not goal.name or "/" in goal.name:
        problems.append("name must be a non-empty string without '/'")
    checks = (("loss_ratio", 0.0, 1.0, True), ("exceed_ratio", 0.0, 1.0, True),
              ("relative_width", 0.0, 1.0, False))
    for key, low, high, low_ok in checks:
        value = getattr(goal, key)
        if value is None:
            continue
        if not _is_number(value) or not (low <= value < high if low_ok else low < value < high):
            bracket = "[" if low_ok else "("
            problems.append(f"{key} must be a number in {bracket}{low:g}, {high:g}), got {value!r}")
    for key in ("initial_trial_duration_s", "final_trial_duration_s", "duration_sum_s"):
        value = getattr(goal, key)
        if value is not None and (not _is_number(value) or value <= 0):
            problems.append(f"{key} must be a positive number of seconds, got {value!r}")
    if not isinstance(goal.preceding_targets, int) or isinstance(goal.preceding_targets, bool) \
            or goal.preceding_targets < 0:
        problems.append(f"preceding_targets must be an integer >= 0, got {goal.preceding_targets!r}")
    if not isinstance(goal.expansion_coefficient, int) or isinstance(goal.expansion_coefficient, bool) \
            or goal.expansion_coefficient < 2:
        problems.append(f"expansion_coefficient must be an integer >= 2, got {goal.expansion_coefficient!r}")
    final, total, initial = goal.final_trial_duration_s, goal.duration_sum_s, goal.initial_trial_duration_s
    if _is_number(final) and _is_number(total) and final > 0 and total < final:
        problems.append(f"duration_sum_s ({total:g} s) must be at least final_trial_duration_s ({final:g} s)")
    if _is_number(final) and _is_number(initial) and initial > final > 0:
        problems.append(f"initial_trial_duration_s ({initial:g} s) must not exceed final_trial_duration_s "
                        f"({final:g} s)")
    if goal.preceding_targets == 0 and _is_number(initial) and _is_number(total) and initial < total:
        problems.append("preceding_targets = 0 needs initial_trial_duration_s equal to duration_sum_s "
                        f"({initial:g} s < {total:g} s): use 1 or more")
    return problems


def goals_from_tables(tables: Any) -> tuple[Goal, ...]:
    """Goals from a campaign file's `[[search.goals]]` tables (or already built Goals); ValueError names the
    goal and the key. Names must be unique; unknown keys are refused."""
    if isinstance(tables, Goal):
        tables = [tables]
    if not isinstance(tables, list | tuple):
        raise ValueError(f"goals must be a list of tables ([[search.goals]]), got {tables!r}")
    allowed = {f.name for f in fields(Goal)}
    goals = []
    for i, table in enumerate(tables):
        if isinstance(table, Goal):
            goals.append(table)
            continue
        if not isinstance(table, Mapping):
            raise ValueError(f"goals #{i + 1} must be a table, got {table!r}")
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise ValueError(f"goals #{i + 1}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        if "name" not in table:
            raise ValueError(f"goals #{i + 1}: every goal needs a name")
        goals.append(Goal(**table))
    names = [g.name for g in goals]
    if len(set(names)) != len(names):
        raise ValueError(f"goal names must be unique within a search, got {names}")
    return tuple(goals)


def default_width(error_qps: float | None, error_ratio: float | None, max_rate_qps: float) -> float:
    """The RFC 9971 goal width that matches a search's stop width: error_ratio (relative to the lower bound
    there, to the upper here: the same within the width), or error_qps / max_rate_qps (no narrower width
    at any answer below max_rate_qps); the wider when both are set."""
    widths = [w for w in (error_ratio, (error_qps / max_rate_qps) if error_qps else None) if w]
    return min(max(widths), 0.5) if widths else 0.01


def resolve_goal(goal: Goal, loss_ratio: float, duration_s: float, short_duration_s: float,
                 width: float) -> ResolvedGoal:
    """Fill a goal's unset values from its search (loss_ratio fraction; durations s; width fraction)."""
    final = goal.final_trial_duration_s if goal.final_trial_duration_s is not None else duration_s
    initial = goal.initial_trial_duration_s if goal.initial_trial_duration_s is not None \
        else min(short_duration_s, final)
    resolved = ResolvedGoal(
        goal.name, goal.loss_ratio if goal.loss_ratio is not None else loss_ratio,
        goal.exceed_ratio if goal.exceed_ratio is not None else 0.0,
        goal.relative_width if goal.relative_width is not None else width, float(initial), float(final),
        float(goal.duration_sum_s if goal.duration_sum_s is not None else final), goal.preceding_targets,
        goal.expansion_coefficient)
    Goal(**{f.name: getattr(resolved, f.name) for f in fields(Goal)})  # checks the filled-in values
    return resolved


def default_goals(duration_s: float, short_duration_s: float) -> tuple[Goal, ...]:
    """Without [[search.goals]]: "rfc8219" (one full-length trial with at most loss_ratio lost decides, as
    in RFC 8219) and the faster "short" (trials of short_duration_s, the load's verdict that of most of
    three, exceed ratio 50 %)."""
    short = min(short_duration_s, duration_s)
    return (Goal("rfc8219"),
            Goal("short", exceed_ratio=FAST_GOAL_EXCEED, final_trial_duration_s=short,
                 duration_sum_s=FAST_GOAL_TRIALS * short, initial_trial_duration_s=min(1.0, short)))


def resolved_goals(goals: Iterable[Goal], loss_ratio: float, duration_s: float, short_duration_s: float,
                   width: float) -> tuple[ResolvedGoal, ...]:
    """The goals of a search with every value set; the defaults when none are given."""
    chosen = tuple(goals) or default_goals(duration_s, short_duration_s)
    return tuple(resolve_goal(g, loss_ratio, duration_s, short_duration_s, width) for g in chosen)
