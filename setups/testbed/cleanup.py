"""Taking a testbed down: every host undoes what its state file lists (also after a kill -9 of the
controller: `xlatbench testbed down INVENTORY`), and what is still left to undo."""

from __future__ import annotations

from typing import Any

from ..transports import StepError
from .inventory import Inventory
from .machine import ORDER, each, hotplugs
from .ssh import SSH_FAILED, Shell
from .undo import down_script, pending


def down_all(inventory: Inventory, shell: Shell) -> dict[str, Any]:
    """Undo on every host what its state file lists; then bring every allowed CPU back online. Per host:
    the lines it undid, those that failed, testers it stopped; `unreachable` (and nothing else) for a host
    SSH could not reach, whose state file stays for a later `down`."""
    plugs = hotplugs(inventory)

    def undo(role: str) -> dict[str, Any]:
        try:
            out = shell.capture(role, down_script(inventory.statefile(role)), check=False)
        except StepError as err:
            return {"unreachable": str(err)}
        if out.returncode == SSH_FAILED:
            return {"unreachable": (out.stderr.strip().splitlines() or ["ssh failed"])[-1]}
        lines = out.stdout.splitlines()
        report: dict[str, Any] = {"undone": [line[8:] for line in lines if line.startswith("undone: ")],
                                  "failed": [line[8:] for line in lines if line.startswith("failed: ")]}
        stopped = [line.split()[-1] for line in lines if line.startswith("stopped tester ")]
        if stopped:
            report["stopped_testers"] = stopped
        if role in plugs:
            try:
                report["cpus_online"] = plugs[role].online_all(shell)
            except StepError as err:
                report["failed"].append(f"bringing CPUs back online: {err}")
        return report

    return each(tuple(reversed(ORDER)), undo)


def leftovers(inventory: Inventory, shell: Shell) -> dict[str, str]:
    """Role -> what its state file still lists, or why the host could not be asked (empty dict: nothing
    left to undo anywhere)."""
    left = {}
    for role in ORDER:
        try:
            done = shell.capture(role, pending(inventory.statefile(role)), check=False)
        except StepError as err:
            left[role] = f"unreachable: {err}"
            continue
        if done.returncode == SSH_FAILED:
            left[role] = "unreachable: " + (done.stderr.strip().splitlines() or ["ssh failed"])[-1]
        elif done.stdout.strip():
            left[role] = done.stdout.strip()
    return left
