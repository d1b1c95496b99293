"""Knot on loopback (`[[setup]] kind = "loopback"`): xlatperf against knotd on 127.0.0.1, the tester's
self-test with no DUT."""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..measurers import LoopbackMeasurer
from ..nat44 import Cycle
from ..trial import Measurer
from ..xlatperf import TesterOptions
from .base import Environment, EnvironmentKind, SetupSpec
from .options import OptionError, check_values, cpus, number


@dataclass
class LoopbackEnvironment(Environment):
    """xlatperf against Knot on 127.0.0.1 (a tester self-test; no DUT, so one "core" only).

    knot_cpus: CPUs knotd is pinned to (a self-test compared with chains pins it where they pin theirs).
    rmem_bytes: root net.core.rmem_max, rmem_default and wmem_max while it is up, bytes: the same socket
        buffers as an emulated chain gives Knot and the tester, so the self-test is comparable with it
        (knotd's sockets take rmem_default; with 208 KiB it drops replies long before its CPU is full).
    """

    tester: TesterOptions
    knot_cpus: tuple[int, ...] | None = None
    udp_workers: int = 1
    workdir: Path | None = None
    rmem_bytes: int = 4 << 20
    _server: Any = field(default=None, init=False)
    _measurer: LoopbackMeasurer | None = field(default=None, init=False)
    _sysctls: dict[str, object] | None = field(default=None, init=False)

    @property
    def _holder(self) -> str:
        return f"loopback-{os.getpid()}"

    def up(self) -> None:
        from ...setups.emulation import rootsysctl
        from ...zones.knot import KnotConfig, KnotServer, loopback_rundir

        self._sysctls = rootsysctl.acquire(self._holder, rootsysctl.socket_buffers(self.rmem_bytes), netns=[],
                                           pid=os.getpid())
        # A fixed run directory (not a temporary one): a later run or `setup down` finds a killed run's knotd.
        workdir = self.workdir or loopback_rundir("127.0.0.1", self.tester.port)
        config = KnotConfig(listen=(("127.0.0.1", self.tester.port),), udp_workers=self.udp_workers,
                            cpus=self.knot_cpus)
        self._server = KnotServer(workdir, config)
        try:
            self._server.start()
        except BaseException:
            self.down()
            raise
        self._measurer = LoopbackMeasurer(tester=self.tester, knot_description=self._server.describe())

    def down(self) -> None:
        from ...setups.emulation import rootsysctl

        if self._server is not None:
            server, self._server = self._server, None
            server.stop()
            if self.workdir is None:
                shutil.rmtree(server.workdir, ignore_errors=True)
        if self._sysctls is not None:
            rootsysctl.release(self._holder)
            self._sysctls = None

    def set_tester(self, tester: TesterOptions) -> None:
        self.tester = tester
        if self._measurer is not None:
            self._measurer.tester = tester

    def measurer(self) -> Measurer:
        assert self._measurer is not None, "environment not up"
        return self._measurer

    def describe(self) -> dict[str, Any]:
        server = self._server.describe() if self._server is not None else {"implementation": "knot"}
        return {"implementation": "loopback (no DUT)", "server": server, "server_io": "socket",
                "root_sysctls": self._sysctls}

    def tester_version(self) -> str | None:
        return self._measurer.last_tester_version if self._measurer else None


class LoopbackKind(EnvironmentKind):
    """`kind = "loopback"`: knot_cpus, udp_workers, rmem_bytes; the tester runs here on sockets (no interface:
    neither AF_XDP nor Knot's XDP mode)."""

    name = "loopback"
    summary = "tester vs Knot on 127.0.0.1"
    keys = frozenset({"knot_cpus", "udp_workers", "rmem_bytes"})
    rules = {"knot_cpus": cpus, "udp_workers": number(1, integer=True), "rmem_bytes": number(0, integer=True)}

    def command_line_table(self, args: argparse.Namespace) -> dict[str, Any]:
        table: dict[str, Any] = {"name": "loopback", "kind": "loopback"}
        if args.knot_cpus:
            table["knot_cpus"] = args.knot_cpus  # checked with the campaign file's rule
        return table

    def check(self, table: dict[str, Any], where: str) -> None:
        check_values(table, where, self.rules)

    def with_server_io(self, setup: SetupSpec, io: str, where: str) -> SetupSpec:
        if io == "xdp":
            raise OptionError(f"{where}: [server] io = \"xdp\" needs a network interface for Knot's XDP "
                              "mode; a loopback setup has none: use a chain setup (or io = \"socket\")")
        return setup

    def check_tester(self, setup: SetupSpec, tester: TesterOptions, most: int, cycles: list[Cycle],
                     where: str) -> None:
        if tester.io != "socket":
            raise OptionError(f"{where}: [tester] io = \"xdp\" needs a network interface for AF_XDP; a "
                              "loopback setup has none: use a chain setup (or io = \"socket\")")

    def tester_is_local(self, setup: SetupSpec) -> bool:
        return True

    def build(self, setup: SetupSpec, tester: TesterOptions) -> Environment:
        p = setup.params
        knot = p.get("knot_cpus")
        return LoopbackEnvironment(tester, knot_cpus=cpus("knot_cpus", knot) if knot is not None else None,
                                   udp_workers=int(p.get("udp_workers", 1)),
                                   rmem_bytes=int(p.get("rmem_bytes", 4 << 20)))


KIND = LoopbackKind()
