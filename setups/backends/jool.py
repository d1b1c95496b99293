"""Jool (kernel modules jool_siit, jool, jool_mapt): the paper's commands, for real hosts.

Render only here: this machine's kernel cannot load modules. The paper's BR listing stops before Jool;
the BR lines follow Jool's MAP-T documentation (instance with the DMR, the FMR, map-t-type BR).
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Mapping

from ..steps import Cmd, Step
from ..topology import Clat, Host, MapBrRole, MapCeRole, Plat, Translator
from . import IN_KERNEL_SOFTIRQ, BackendBase, RenderContext, declared
from .statetable import StateTable, TableError, TableSpec, in_netns

PAPER_VERSION = "4.2.0-rc2"
MODULES = ("jool_siit", "jool", "jool_mapt")  # kernel modules, each with its user-space tool of that name


class JoolBackend(BackendBase):
    name = "jool"
    roles = frozenset({"clat", "plat", "ce", "br"})
    execution_model = IN_KERNEL_SOFTIRQ
    # Jool's SIIT drops IPv4 UDP with checksum 0 unless `global update amend-udp-checksum-zero true`, which
    # the steps here do not render; said for NAT64 too until someone checks it there.
    accepts_zero_udp_checksum = False

    def version(self) -> str:
        return f"as installed on the real host (the paper used {PAPER_VERSION}; jool_mapt needs >= 4.2)"

    def owns_undo(self, argv: tuple[str, ...]) -> bool:
        return (len(argv) > 2 and argv[0] in MODULES
                and (argv[1:3] == ("instance", "add") or argv[1] in ("eamt", "pool4", "-i", "global")))

    def undo(self, argv: tuple[str, ...]) -> str | None:
        """An instance is removed whole; its tables and globals (eamt, pool4, -i NAME ...) go with it."""
        if argv[0] in ("jool_siit", "jool") and argv[1:3] == ("instance", "add"):
            return f"{argv[0]} instance remove"
        if argv[0] == "jool_mapt" and argv[1:3] == ("instance", "add"):
            return shlex.join(("jool_mapt", "instance", "remove", argv[3]))
        return None  # eamt, pool4, -i NAME ...: part of the instance

    def preflight_facts(self, binary: str | None = None) -> list[str]:
        """The user-space tools' version and, per module, the loaded and the installed version."""
        lines = ['echo "jool_tools=$( (jool --version 2>/dev/null || echo absent) | head -n 1)"']
        for module in MODULES:
            lines += [
                f'echo "loaded_{module}=$(cat /sys/module/{module}/version 2>/dev/null || echo absent)"',
                f'echo "installed_{module}=$(modinfo -F version {module} 2>/dev/null || echo absent)"',
            ]
        return lines

    def preflight_report(self, facts: Mapping[str, str]) -> object | None:
        return {m: module_version(facts, m) for m in MODULES} | {"tools": facts.get("jool_tools")}

    def preflight_summary(self, report: object | None) -> str:
        found = report if isinstance(report, dict) else {}
        if not any(found.get(m) for m in MODULES):
            return ""
        return "jool " + ", ".join(f"{m} {found[m]}" for m in MODULES if found.get(m)) + \
            f" (tools {found.get('tools')})"

    def testbed_version(self, host_report: Mapping[str, object]) -> object | None:
        return host_report.get("jool")

    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]:
        """MAP-T needs jool_mapt >= 4.2; the CLAT (dut1) jool_siit, the PLAT jool; tools of the module's
        version."""
        if topology == "baseline":
            return []
        if topology == "mapt":
            version = module_version(facts, "jool_mapt")
            if version is None or not version_at_least(version, (4, 2)):
                found = version or f"no jool_mapt module (jool tools: {facts.get('jool_tools', 'absent')})"
                return [f"{role}: MAP-T needs Jool >= 4.2 (jool_mapt), this host has {found}: install "
                        "Jool 4.2 from source (Debian 12's jool-tools 4.1.9 has no MAP-T), or use "
                        "backend = \"tayga\""]
            return _tools_problems(role, facts, version)
        module = "jool_siit" if role == "dut1" else "jool"
        version = module_version(facts, module)
        if version is None:
            return [f"{role}: Jool module {module} neither loaded nor installed: install Jool "
                    "(jool-dkms + jool-tools), or use backend = \"tayga\""]
        return _tools_problems(role, facts, version)

    def notes(self, role: Translator) -> list[str]:
        if isinstance(role, MapBrRole):
            return ["jool: the paper's BR listing omits Jool's lines; the BR's follow Jool's MAP-T docs"]
        return []

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
                # With pool4_netmap Jool's pool4 is that prefix (Jool spreads clients over it itself).
                Cmd(("jool", "pool4", "add", role.pool4_netmap or role.pool4, "--udp", f"{first}-{last}")),
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
                Cmd(("jool_mapt", "-i", name, "global", "update", "bmr", *role.bmr.rule_fields())),
                Cmd(("jool_mapt", "-i", name, "global", "update", "map-t-type", "CE")),
            ]
        if isinstance(role, MapBrRole):
            name = role.instance
            steps = [
                Cmd(("modprobe", "jool_mapt")),
                Cmd(("jool_mapt", "instance", "add", name, "--netfilter", "--dmr", role.dmr)),
            ]
            steps += [Cmd(("jool_mapt", "-i", name, "fmrt", "add", *fmr.rule_fields())) for fmr in role.fmrs]
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

    def state_table(self, role: Translator) -> StateTable | None:
        """The NAT64 (PLAT) keeps its own session table; the stateless roles keep none."""
        return JoolSessionTable() if isinstance(role, Plat) else None

    def describe(self, role: Translator) -> dict[str, object]:
        module = {Clat: "jool_siit", Plat: "jool", MapCeRole: "jool_mapt", MapBrRole: "jool_mapt"}[type(role)]
        return {
            "implementation": "jool",
            **declared(self),
            "module": module,
            "version": self.version(),
        }


def module_version(facts: Mapping[str, str], module: str) -> str | None:
    """A module's loaded version, else its installed one (None: neither)."""
    for key in (f"loaded_{module}", f"installed_{module}"):
        value = facts.get(key, "absent")
        if value != "absent" and value:
            return value
    return None


def version_at_least(version: str, wanted: tuple[int, ...]) -> bool:
    numbers = tuple(int(n) for n in re.findall(r"\d+", version)[: len(wanted)])
    return numbers >= wanted


def _tools_problems(role: str, facts: Mapping[str, str], module_version: str) -> list[str]:
    """Jool's user-space tools must be there and of the module's version (major.minor.patch)."""
    tools = facts.get("jool_tools", "absent")
    if tools == "absent" or not re.search(r"\d", tools):
        return [f"{role}: Jool's user-space tools (jool, jool_siit) not found: install jool-tools of the "
                f"module's version {module_version}"]
    if re.findall(r"\d+", tools)[:3] != re.findall(r"\d+", module_version)[:3]:
        return [f"{role}: Jool tools {tools} and module {module_version} differ: install the tools of the "
                "module's version (they refuse to talk to another)"]
    return []


# RFC 6146 section 4 (and Jool) keep a UDP session at least 2 minutes.
JOOL_MIN_UDP_TIMEOUT_S = 120


class JoolSessionTable(StateTable):
    """Jool's NAT64 BIB and session table (the `jool` instance of the PLAT). Jool 4.1 has no limit on its
    size and no hash size to set (its BIB and sessions are trees, bounded only by memory): a table size or
    hash size is refused, never silently left out. Its UDP timeout is `jool global update udp-timeout`,
    which goes with the instance at teardown. It has no session flush either: sessions go only with their
    pool4 entry (`jool pool4 flush` without --quick cascades to BIB and sessions) or with the instance, so a
    timed deletion would time those too; the tear-down is refused."""

    name = "jool NAT64 session table"

    def settings_steps(self, spec: TableSpec, netns: str | None,
                       initial_netns: str | None = None) -> list[Step]:
        spec.check()
        if spec.max_connections is not None or spec.hash_size is not None:
            raise TableError("Jool 4.1 has no session-table size nor hash size to set (its BIB and session "
                             "tables are trees bounded by memory): leave max_connections and hash_size unset "
                             "for a jool PLAT")
        if spec.timeout_s is None:
            return []
        seconds = math.ceil(spec.timeout_s)
        if seconds < JOOL_MIN_UDP_TIMEOUT_S:
            raise TableError(f"Jool keeps a UDP session at least {JOOL_MIN_UDP_TIMEOUT_S} s (RFC 6146), "
                             f"timeout {seconds} s is below it")
        value = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        argv = ("jool", "global", "update", "udp-timeout", value)
        return [Cmd(argv if netns is None else ("ip", "netns", "exec", netns, *argv))]

    def applies(self) -> dict[str, str]:
        return {"max_connections": "not settable (Jool has no session-table limit; memory bounds it)",
                "hash_size": "not settable (Jool's BIB and session tables are trees)",
                "timeout_s": "jool global update udp-timeout (H:MM:SS, >= 2 min; goes with the instance)"}

    def settings_script(self, netns: str | None, initial_netns: str | None = None) -> str:
        return in_netns(netns, "jool global display | grep -i udp-timeout")

    def count_script(self, netns: str | None) -> str:
        return in_netns(netns, "jool session display --udp --numeric --csv --no-headers | wc -l")

    def flush_script(self, netns: str | None) -> str:
        raise TableError("Jool 4.1 has no session flush: its sessions go only with their pool4 entry (`jool "
                         "pool4 flush` without --quick) or the instance, which a timed deletion would time "
                         "too; the tear-down rate is not measured on a jool PLAT")
