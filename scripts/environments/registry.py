"""The registry of environment kinds: a [[setup]] table's `kind` -> its kind (base.EnvironmentKind). The one
list of kinds; the campaign-file parser and the command line ask it (for the names, a kind's rules, the
environment) and name no kind themselves. Adding a kind: its module here, one line in REGISTRY."""

from __future__ import annotations

from ..xlatperf import TesterOptions
from . import emulated, loopback, simulated, simulated_stateful, testbed
from .base import Environment, EnvironmentKind, SetupSpec
from .options import OptionError

# kind name -> kind, in the order choices are offered.
REGISTRY: dict[str, EnvironmentKind] = {k.name: k for k in (simulated.KIND, loopback.KIND, emulated.KIND,
                                                              testbed.KIND, simulated_stateful.KIND)}


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def kind(name: object, where: str = "[[setup]]") -> EnvironmentKind:
    """The kind called `name` (OptionError, one line naming the known kinds, when there is none)."""
    if not isinstance(name, str) or name not in REGISTRY:
        raise OptionError(f"{where}: kind must be one of {list(REGISTRY)}, got {name!r}")
    return REGISTRY[name]


def make_environment(setup: SetupSpec, tester: TesterOptions) -> Environment:
    """The environment of a parsed setup (its kind builds it), not yet up."""
    return kind(setup.kind).build(setup, tester)
