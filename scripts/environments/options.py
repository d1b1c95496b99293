"""The rules for a [[setup]] table's values that more than one environment kind uses (numbers, CPU lists, a
topology's name, a CPU map), and the error they raise. The campaign-file parser turns it into its own
(scripts.campaignfile.CampaignFileError), so the message reads the same wherever a rule sits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...cpulist import parse_user_cpu_list
from ...setups.paper import TOPOLOGIES
from .. import hostinfo

Check = Callable[[str, Any], None]  # (where, value): raises OptionError naming where


class OptionError(ValueError):
    """A campaign option is wrong; the message names the table and the key."""


def only(table: dict[str, Any], where: str, allowed: set[str]) -> None:
    """Refuse keys the table may not have, naming them and the allowed ones."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise OptionError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def number(low: float, inclusive: bool = True, integer: bool = False) -> Check:
    """A check that a value is a number (an integer if `integer`) >= low (> low unless inclusive)."""
    def check(where: str, value: Any) -> None:
        kinds = (int,) if integer else (int, float)
        noun = "an integer" if integer else "a number"
        bound = f"{'>=' if inclusive else '>'} {low:g}"
        if isinstance(value, bool) or not isinstance(value, kinds) or not (
                value >= low if inclusive else value > low):
            raise OptionError(f"{where} must be {noun} {bound}, got {value!r}")
    return check


def of_type(kind: type, noun: str) -> Check:
    """A check that a value is of `kind` (said as `noun`)."""
    def check(where: str, value: Any) -> None:
        if not isinstance(value, kind):
            raise OptionError(f"{where} must be {noun}, got {value!r}")
    return check


def cpus(where: str, value: Any) -> tuple[int, ...]:
    """A CPU list (a TOML list of integers, or text such as "0,1") of CPUs this process may run on."""
    if isinstance(value, str):
        try:
            value = list(parse_user_cpu_list(value))
        except ValueError as err:
            raise OptionError(f"{where}: {err}; write CPU numbers such as [0, 1] or \"0,1\"") from None
    usable = hostinfo.affinity_cpus()
    if (not isinstance(value, list) or not value or any(isinstance(c, bool) or not isinstance(c, int)
                                                         or c not in usable for c in value)):
        raise OptionError(f"{where} must be a non-empty list of this machine's CPUs {usable}, "
                          f"got {value!r}")
    return tuple(value)


def known_topology(where: str, value: Any) -> None:
    """One of the paper's topologies by name."""
    topologies = tuple(TOPOLOGIES)
    if value not in topologies:
        raise OptionError(f"{where} must be one of {list(topologies)}, got {value!r}")


def cpu_map(where: str, value: Any) -> None:
    """Core count -> CPU list, each list exactly that many of this machine's CPUs."""
    if not isinstance(value, dict):
        raise OptionError(f"{where} must be a table such as {{ 1 = [1], 2 = [0, 1] }}, got {value!r}")
    for cores, listed in value.items():
        if not str(cores).isdigit() or int(cores) < 1:
            raise OptionError(f"{where}: key {cores!r} must be a core count >= 1")
        if len(cpus(f"{where} {cores}", listed)) != int(cores):
            raise OptionError(f"{where} {cores}: list exactly {cores} CPU(s), got {listed!r}")


def check_values(table: dict[str, Any], where: str, rules: dict[str, Check]) -> None:
    """Each key of the table that has a rule, checked in the table's order."""
    for key, value in table.items():
        if key in rules:
            rules[key](f"{where} {key}", value)


# The topologies whose setups have a stateful DUT for RFC 9693's procedures (Environment.stateful_measurer):
# the scalability draft's single NAT44 gateway, the PLAT alone (its kernel NAT44), the MAP-T CE alone (its
# napt NAT44, at most its port set's flows).
STATEFUL_TOPOLOGIES = ("nat44", "plat", "ce")


def stateful_topology_refusal(kind: str, topology: object) -> str | None:
    """Why a setup of this topology cannot run RFC 9693's procedures (one line), or None."""
    if topology in STATEFUL_TOPOLOGIES:
        return None
    return (f"kind {kind!r} with topology {topology!r} has no stateful DUT for RFC 9693's procedures; use "
            f"topology {' or '.join(repr(t) for t in STATEFUL_TOPOLOGIES)}")
