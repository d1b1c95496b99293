"""Jool (kernel modules jool_siit, jool, jool_mapt): the paper's commands, for real hosts.

Render only here: this machine's kernel cannot load modules. The paper's BR listing stops before Jool;
the BR lines follow Jool's MAP-T documentation (instance with the DMR, the FMR, map-t-type BR).
"""

from __future__ import annotations

import os

from ..steps import Cmd, Step
from ..topology import Clat, Host, MapBrRole, MapCeRole, Plat, Translator
from . import RenderContext

PAPER_VERSION = "4.2.0-rc2"


class JoolBackend:
    name = "jool"
    roles = frozenset({"clat", "plat", "ce", "br"})

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]:
        if isinstance(role, Clat):
            steps: list[Step] = [
                Cmd(("modprobe", "jool_siit")),
                Cmd(("jool_siit", "instance", "add", "--netfilter", "--pool6", role.pool6)),
            ]
            steps += [Cmd(("jool_siit", "eamt", "add", v4, v6)) for v4, v6 in role.eam]
            return steps
        if isinstance(role, Plat):
            first, last = role.udp_ports
            return [
                Cmd(("modprobe", "jool")),
                Cmd(("jool", "instance", "add", "--netfilter", "--pool6", role.pool6)),
                Cmd(("jool", "pool4", "add", role.pool4, "--udp", f"{first}-{last}")),
            ]
        if isinstance(role, MapCeRole):
            name = role.instance
            return [
                Cmd(("modprobe", "jool_mapt")),
                Cmd(("jool_mapt", "instance", "add", name, "--netfilter", "--dmr", role.dmr)),
                Cmd(
                    (
                        "jool_mapt",
                        "-i",
                        name,
                        "global",
                        "update",
                        "end-user-ipv6-prefix",
                        role.end_user_prefix,
                    )
                ),
                Cmd(("jool_mapt", "-i", name, "global", "update", "bmr", *role.bmr.jool_args())),
                Cmd(("jool_mapt", "-i", name, "global", "update", "map-t-type", "CE")),
            ]
        if isinstance(role, MapBrRole):
            name = role.instance
            steps = [
                Cmd(("modprobe", "jool_mapt")),
                Cmd(("jool_mapt", "instance", "add", name, "--netfilter", "--dmr", role.dmr)),
            ]
            steps += [Cmd(("jool_mapt", "-i", name, "fmrt", "add", *fmr.jool_args())) for fmr in role.fmrs]
            steps.append(Cmd(("jool_mapt", "-i", name, "global", "update", "map-t-type", "BR")))
            return steps
        raise TypeError(f"jool backend cannot render {type(role).__name__}")

    def unavailable(self) -> str | None:
        if not os.path.exists("/proc/modules"):
            return (
                "Jool is a kernel module and this kernel cannot load modules (CONFIG_MODULES unset): "
                "use `xlatbench setup render ... --backend jool` for real hosts, or --backend tayga here"
            )
        return None

    def describe(self, role: Translator) -> dict[str, object]:
        module = {Clat: "jool_siit", Plat: "jool", MapCeRole: "jool_mapt", MapBrRole: "jool_mapt"}[type(role)]
        return {
            "implementation": "jool",
            "module": module,
            "version": f"as installed on the real host (the paper used {PAPER_VERSION}; "
            "jool_mapt needs >= 4.2)",
        }
