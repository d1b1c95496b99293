"""What to undo on a real host, written down on the host itself before each change is made.

Every step that changes a host is sent as `RECORD && STEP`: RECORD appends the shell line that reverses
the step to the host's state file (for a sysctl or an offload setting it stores the value read just
before). `down_script` runs the file's lines newest first and deletes it, so a controller killed with
-9 at any point leaves a file that says exactly what is left to undo (`xlatbench testbed down`).
A step whose reversal is unknown is refused at planning time.
"""

from __future__ import annotations

import shlex

from ..steps import Cmd, Comment, Daemon, Step, WriteFile


class UndoError(ValueError):
    """A step the suite does not know how to reverse."""


def _append(statefile: str, line: str) -> str:
    return f"printf '%s\\n' {shlex.quote(line)} >> {shlex.quote(statefile)}"


def _append_dynamic(statefile: str, shell_expr: str) -> str:
    """Append a line built by the remote shell (double-quoted expression with $(...) in it)."""
    return f"printf '%s\\n' \"{shell_expr}\" >> {shlex.quote(statefile)}"


def undo_line(step: Step) -> str | None:
    """The line that reverses `step` when no previous value has to be read; None: nothing to undo."""
    if isinstance(step, Comment):
        return None
    if isinstance(step, WriteFile):
        return f"rm -f {shlex.quote(step.path)}"
    if isinstance(step, Daemon):
        pid, log = shlex.quote(step.pidfile), shlex.quote(step.logfile)
        return f"pkill -F {pid}; rm -f {pid} {log}"
    return _cmd_undo(step)


def _cmd_undo(step: Cmd) -> str | None:
    a = step.argv
    if not step.check or a[:3] == ("ip", "netns", "exec"):
        return None  # cleanup steps; and whatever runs inside a namespace goes with the namespace
    if a[:3] in {("ip", "address", "add"), ("ip", "addr", "add"), ("ip", "route", "add")}:
        return shlex.join((*a[:2], "del", *a[3:]))
    if a[:4] == ("ip", "-6", "route", "add"):
        return shlex.join(("ip", "-6", "route", "del", *a[4:]))
    if a[:3] == ("ip", "netns", "add"):
        return shlex.join(("ip", "netns", "del", a[3]))
    if a[:3] == ("ip", "link", "add"):
        return shlex.join(("ip", "link", "del", a[3]))
    if a[:3] == ("ip", "link", "set") and len(a) == 6 and a[4] == "netns":
        return f"ip -n {shlex.quote(a[5])} link set {shlex.quote(a[3])} netns $$"
    if a[:4] == ("iptables", "-t", "nat", "-A"):
        return shlex.join(("iptables", "-t", "nat", "-D", *a[4:]))
    if a[:3] == ("nft", "add", "table"):
        return shlex.join(("nft", "delete", "table", *a[3:]))
    if a[:3] in {("nft", "add", "chain"), ("nft", "add", "rule")}:
        return None  # the table's deletion takes them
    if a[0] in ("jool_siit", "jool") and a[1:3] == ("instance", "add"):
        return f"{a[0]} instance remove"
    if a[0] == "jool_mapt" and a[1:3] == ("instance", "add"):
        return shlex.join(("jool_mapt", "instance", "remove", a[3]))
    if a[0].startswith("jool") and a[1] in ("eamt", "pool4", "-i", "global"):
        return None  # part of the instance
    if a[:2] == ("mkdir", "-p"):
        return shlex.join(("rm", "-rf", a[2]))
    if len(a) >= 3 and a[-1] == "--mktun" and "tayga" in a[0]:
        return "ip link del nat64"
    if a[:2] == ("ip", "link") and a[2:3] == ("set",) and a[-1] == "up":
        return None  # recorded with its previous state (record_script)
    raise UndoError(f"no undo known for `{step.shell()}`: teach xlatbench.setups.testbed.undo to reverse it")


def record_script(step: Step, statefile: str) -> str | None:
    """The shell snippet that writes the step's undo line to `statefile` (None: nothing to record)."""
    if isinstance(step, Cmd) and step.check:
        a = step.argv
        if a[0] == "sysctl":
            key = next(arg for arg in a[1:] if "=" in arg).split("=", 1)[0]
            return _append_dynamic(statefile, f"sysctl -qw {key}=$(sysctl -n {key})")
        if a[:2] == ("ethtool", "-K") and len(a) == 5:
            iface, feature = a[2], a[3]
            name = {"tx": "tx-checksumming", "rx": "rx-checksumming", "gro": "generic-receive-offload",
                    "gso": "generic-segmentation-offload", "lro": "large-receive-offload"}[feature]
            current = f"$(ethtool -k {iface} | sed -n 's/^{name}: \\([a-z]*\\).*/\\1/p')"
            return _append_dynamic(statefile, f"ethtool -K {iface} {feature} {current}")
        if a[:3] == ("ip", "link", "set") and a[-1] == "up":
            iface = shlex.quote(a[3])
            return (f"if ip link show {iface} | grep -q '[<,]UP[,>]'; then :; else "
                    f"{_append(statefile, f'ip link set {a[3]} down')}; fi")
        if a[0] == "modprobe":
            return f"[ -d /sys/module/{a[1]} ] || {_append(statefile, f'modprobe -r {a[1]}')}"
    line = undo_line(step)
    return None if line is None else _append(statefile, line)


def guarded(step_script: str, step: Step, statefile: str) -> str:
    """`RECORD && STEP`: the undo line is on the host before the change is."""
    return with_record(record_script(step, statefile), step_script, statefile)


def append_line(statefile: str, line: str) -> str:
    """Snippet appending a fixed undo line to the state file."""
    return _append(statefile, line)


def with_record(record: str | None, step_script: str, statefile: str) -> str:
    if record is None:
        return step_script
    return f"mkdir -p \"$(dirname {shlex.quote(statefile)})\" && {{ {record}; }} && {{ {step_script}\n}}"


def down_script(statefile: str) -> str:
    """Run the state file's lines newest first (each tolerated to fail, reported), then delete it; stop a
    tester a killed controller left running (its `trial-*.pid`, see remote_run), delete the tester's result
    files of killed trials (`trial-*.json`, and the `.tmp-PID` file xlatperf writes before renaming) and
    the then empty directories.
    Prints `undone N`, `failed: LINE` and `stopped tester PID` lines."""
    path = shlex.quote(statefile)
    role_dir = shlex.quote(statefile.rsplit("/", 1)[0])
    return (f"if [ -f {path} ]; then n=0; tac {path} | while IFS= read -r line; do "
            f"sh -c \"$line\" >/dev/null 2>&1 || echo \"failed: $line\"; n=$((n+1)); echo \"undone $n\"; "
            f"done; rm -f {path}; fi; {stop_testers(role_dir)}; "
            f"rm -f {role_dir}/trial-*.json {role_dir}/trial-*.json.tmp-*; "
            f"rmdir {role_dir} \"$(dirname {role_dir})\" 2>/dev/null; true")


def stop_testers(role_dir: str) -> str:
    """Snippet ending every tester whose pid file is still in the (quoted) directory, then the files."""
    return (f"for p in {role_dir}/trial-*.pid; do [ -f \"$p\" ] || continue; "
            f"pkill -KILL -F \"$p\" && echo \"stopped tester $(cat \"$p\")\"; rm -f \"$p\"; done")


def pending(statefile: str) -> str:
    """Snippet printing what the state file still lists and any tester still running from a killed
    controller (empty when nothing is left to undo)."""
    path = shlex.quote(statefile)
    role_dir = shlex.quote(statefile.rsplit("/", 1)[0])
    return f"cat {path} 2>/dev/null; ls {role_dir}/trial-*.pid 2>/dev/null; true"
