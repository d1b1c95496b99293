"""Backends render a host's configuration items as steps. `linux` renders plain network configuration
(interfaces, routes, forwarding, NAT44); translator roles go to the backend chosen for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..steps import Step
from ..topology import Host, Translator


@dataclass(frozen=True)
class RenderContext:
    """Where a rendering is meant to run.

    world: "real" (a physical host; sub-hosts become namespaces it creates) or "netns" (emulation:
    every host is its own namespace). rundir: directory for the host's files (configs, pid files, logs).
    prefix: name prefix of every object the suite creates (nft tables, namespaces).
    """

    world: str = "real"
    rundir: str = "/run/xlatbench"
    prefix: str = "xlatbench"


class Backend(Protocol):
    name: str
    roles: frozenset[str]  # translator roles it can serve: clat, plat, ce, br

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]: ...
    def unavailable(self) -> str | None: ...  # why it cannot run on this machine, or None
    def describe(self, role: Translator) -> dict[str, object]: ...
