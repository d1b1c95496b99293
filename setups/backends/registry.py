"""The registry of translator backends: name -> factory. The one list of implementations; everything
outside setups/backends/ asks it (for choices, defaults and instances) and uses the `Backend` interface.
Adding a translator: its module here, one line in REGISTRY."""

from __future__ import annotations

from collections.abc import Callable

from . import Backend, VariantOption
from .bpf import BpfBackend
from .ip6tnl import Ip6tnlBackend
from .jool import JoolBackend
from .tayga import VARIANT_OPTION, TaygaBackend
from .vpp import VppBackend


def _tayga(variant: str | None) -> Backend:
    return TaygaBackend(variant or VARIANT_OPTION.default)


def _jool(variant: str | None) -> Backend:
    return JoolBackend()


def _bpf(variant: str | None) -> Backend:
    return BpfBackend()


def _vpp(variant: str | None) -> Backend:
    return VppBackend()


def _ip6tnl(variant: str | None) -> Backend:
    return Ip6tnlBackend()


# name -> factory(variant or None), in the order choices are offered.
REGISTRY: dict[str, Callable[[str | None], Backend]] = {"jool": _jool, "tayga": _tayga, "bpf": _bpf,
                                                       "vpp": _vpp, "ip6tnl": _ip6tnl}
EMULATION_DEFAULT = "tayga"  # runs on this machine (no kernel modules needed)
TESTBED_DEFAULT = "jool"  # the paper's implementation


def default_for(role: str) -> str:
    """The emulation's default backend for `role` when it serves it, else the first one that does."""
    for name in (EMULATION_DEFAULT, *REGISTRY):
        if role in make(name).roles:
            return name
    raise ValueError(f"no backend serves the {role} role")


def tunnel_end() -> Backend:
    """The backend that renders the emulation's own tunnel ends (topology.TunnelEnd) of the single-DUT
    MAP-E and lw4o6 topologies: the tester's side, not a DUT."""
    return BpfBackend()


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def make(name: str, variant: str | None = None) -> Backend:
    """The backend called `name` (ValueError naming the choices when there is none)."""
    if name not in REGISTRY:
        raise ValueError(
            f"unknown backend {name!r}: choose {' or '.join(REGISTRY)} "
            "(linux always does forwarding and NAT44)"
        )
    return REGISTRY[name](variant)


def variant_options() -> dict[str, VariantOption]:
    """Backend name -> its variant option, for backends that have one."""
    found = {}
    for name in REGISTRY:
        option = make(name).variant_option
        if option is not None:
            found[name] = option
    return found


def every() -> list[Backend]:
    """One instance of every registered backend (default variants)."""
    return [make(name) for name in REGISTRY]
