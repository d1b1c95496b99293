"""What to undo on a real host, written down on the host itself before each change is made.

Every step that changes a host is sent as `PENDING && STEP && COMMIT`: PENDING writes the shell line
that reverses the step to the host's pending file (`undo.sh.pending`; for a sysctl or an offload setting
it holds the value read just before), COMMIT appends it to the state file (`undo.sh`) once the step
succeeded and removes the pending file. A step that fails (e.g. because its object already exists on the
host) leaves no undo line: its pending file is removed, so a rollback never deletes what the suite did not
make. `down_script` first runs a pending file left by a controller killed between the step and its
commit (a step that was under way; `testbed check` has shown its object absent before `up`), then the
state file's lines newest first, and deletes both, so a `kill -9` at any moment leaves files that say
exactly what is left to undo (`xlatbench testbed down`). A step whose reversal is unknown is refused at
planning time.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath as Path

from ..backends import registry
from ..steps import Cmd, Comment, Daemon, Step, WriteFile


class UndoError(ValueError):
    """A step the suite does not know how to reverse."""


def pending_file(statefile: str) -> str:
    """Where a step's undo line waits while the step runs (see the module docstring)."""
    return f"{statefile}.pending"


def _append(statefile: str, line: str) -> str:
    """Snippet writing a fixed undo line to the pending file of `statefile`."""
    return f"printf '%s\\n' {shlex.quote(line)} > {shlex.quote(pending_file(statefile))}"


def _append_dynamic(statefile: str, shell_expr: str) -> str:
    """The same with a line built by the remote shell (double-quoted expression with $(...) in it)."""
    return f"printf '%s\\n' \"{shell_expr}\" > {shlex.quote(pending_file(statefile))}"


def identity_file(pidfile: str) -> str:
    """Beside a pid file: `COMM STARTTIME` of the process the suite started (pid reuse cannot fake both)."""
    return f"{pidfile}.id"


def remember_process(pid_expr: str, pidfile: str, comm: str) -> str:
    """Snippet writing the pid and identity (the program's name as the kernel shows it once it runs, and
    the process's start time in clock ticks after boot, /proc/PID/stat field 22) of process `pid_expr`."""
    pid, ident = shlex.quote(pidfile), shlex.quote(identity_file(pidfile))
    return (f"echo {pid_expr} >{pid} && echo \"{shlex.quote(Path(comm).name[:15])} "
            f"$(cut -d')' -f2- /proc/{pid_expr}/stat | cut -d' ' -f21)\" >{ident}")


def own_process(pidfile: str, pid: str | None = None, ident: str | None = None) -> str:
    """Shell condition: the pid file's process runs and is the one the suite started (name + start time);
    it sets $p to its pid. `pid`/`ident`: the files as shell words instead (e.g. "$f")."""
    pid = pid or shlex.quote(pidfile)
    ident = ident or shlex.quote(identity_file(pidfile))
    return (f"p=$(cat {pid} 2>/dev/null) && [ -n \"$p\" ] && [ \"$(cat /proc/$p/comm 2>/dev/null) "
            f"$(cut -d')' -f2- /proc/$p/stat 2>/dev/null | cut -d' ' -f21)\" = "
            f"\"$(cat {ident} 2>/dev/null)\" ]")


def stop_own(pidfile: str, signal: str = "TERM") -> str:
    """Snippet ending the pid file's process only if it is the program the suite started (a stale pid file
    whose number now belongs to another process leaves that process alone); always succeeds."""
    return f"if {own_process(pidfile)}; then kill -{signal} \"$p\"; fi; true"


@dataclass(frozen=True)
class XdpRelease:
    """A host step that changes nothing but journals a promise: `interface` carries no XDP program now (the
    step fails, naming it, if one is there), and `down` detaches the program named `program` (as the kernel
    shows it, 15 characters at most) from it, should the process that attaches it later (`owner`: knotd in
    XDP mode, the tester with --io xdp) leave it there, as one killed with SIGKILL does. It goes into the
    plan before that process starts, so its line is in the state file before the program can be."""

    interface: str
    program: str
    owner: str

    def shell(self) -> str:
        q = shlex.quote(self.interface)
        found = f"ip -j -d link show dev {q} | grep -q '\"xdp\":'"
        why = shlex.quote(f"{self.interface} already carries an XDP program, and {self.owner} attaches "
                          f"its own ({self.program}) there: detach it (`ip link set dev {self.interface} "
                          "xdp off`) if nothing needs it")
        return f"ip link show dev {q} >/dev/null && if {found}; then echo {why} >&2; false; fi"


def detach_xdp_line(interface: str, program: str) -> str:
    """Undo line: detach the XDP program named `program` from `interface` in whichever mode it is attached
    (generic, native), if it is there; another program there is left alone. Fails if it stays."""
    q = shlex.quote(interface)
    pattern = shlex.quote('"name":"' + program + '"')
    ours = f"ip -j -d link show dev {q} 2>/dev/null | grep -q {pattern}"
    return (f"if {ours}; then ip link set dev {q} xdpgeneric off 2>/dev/null; "
            f"{ours} && ip link set dev {q} xdpdrv off; fi; ! {ours}")


def undo_line(step: Step | XdpRelease) -> str | None:
    """The line that reverses `step` when no previous value has to be read; None: nothing to undo."""
    if isinstance(step, XdpRelease):
        return detach_xdp_line(step.interface, step.program)
    if isinstance(step, Comment):
        return None
    if isinstance(step, WriteFile):
        return f"rm -f {shlex.quote(step.path)}"
    if isinstance(step, Daemon):
        pid, log = shlex.quote(step.pidfile), shlex.quote(step.logfile)
        return f"{stop_own(step.pidfile)}; rm -f {pid} {shlex.quote(identity_file(step.pidfile))} {log}"
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
    for backend in registry.every():  # a translator's own commands: its backend knows their reversal
        if backend.owns_undo(a):
            return backend.undo(a)
    if a[:2] == ("mkdir", "-p"):
        return shlex.join(("rm", "-rf", a[2]))
    if a[:2] == ("ip", "link") and a[2:3] == ("set",) and a[-1] == "up":
        return None  # recorded with its previous state (record_script)
    raise UndoError(f"no undo known for `{step.shell()}`: teach xlatbench.setups.testbed.undo to reverse it")


def record_script(step: Step, statefile: str) -> str | None:
    """The shell snippet that writes the step's undo line to `statefile` (None: nothing to record)."""
    if isinstance(step, Cmd) and step.check:
        a = step.argv
        where = ""
        if a[0] == "nsenter" and a[1].startswith("--net=") and a[2] == "sysctl":
            # a global sysctl written in the initial namespace (conntrack's table size): read, restored there
            a, where = a[2:], shlex.join(a[:2]) + " "
        if a[0] == "sysctl":
            key = next(arg for arg in a[1:] if "=" in arg).split("=", 1)[0]
            return _append_dynamic(statefile, f"{where}sysctl -qw {key}=$({where}sysctl -n {key})")
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
        if a[:4] == ("iptables", "-t", "nat", "-A"):
            # iptables-nft makes the `nat` table (and with it the kernel's NAT hooks) on first use: one the
            # step made goes again once its last rule is gone (legacy iptables cannot remove a table)
            line = undo_line(step)
            assert line is not None
            made = (f"{line} && {{ if iptables -t nat -S | grep -q '^-A'; then :; else "
                    "nft delete table ip nat 2>/dev/null || true; fi; }")
            return (f"if nft list table ip nat >/dev/null 2>&1; then {_append(statefile, line)}; else "
                    f"{_append(statefile, made)}; fi")
        if a[0] == "modprobe":
            return f"[ -d /sys/module/{a[1]} ] || {_append(statefile, f'modprobe -r {a[1]}')}"
    line = undo_line(step)
    return None if line is None else _append(statefile, line)


def guarded(step_script: str, step: Step, statefile: str) -> str:
    """`PENDING && STEP && COMMIT`: the undo line is pending on the host while the change is made and
    enters the state file only once it succeeded."""
    return with_record(record_script(step, statefile), step_script, statefile)


def append_line(statefile: str, line: str) -> str:
    """Snippet writing a fixed undo line as the pending one (committed by `with_record`)."""
    return _append(statefile, line)


def with_record(record: str | None, step_script: str, statefile: str) -> str:
    """`step_script` with its undo record pending while it runs, committed to `statefile` if it succeeds
    and dropped if it fails (the snippet's status is the step's)."""
    if record is None:
        return step_script
    state, waiting = shlex.quote(statefile), shlex.quote(pending_file(statefile))
    commit = f"if [ -f {waiting} ]; then cat {waiting} >> {state} && rm -f {waiting}; fi"
    return (f"mkdir -p \"$(dirname {state})\" && rm -f {waiting} && {{ {record}; }} && "
            f"if {{ {step_script}\n}}; then {commit}; else rm -f {waiting}; false; fi")


def moving_nics(steps: list[Step]) -> list[str]:
    """The host's interfaces the steps move into a namespace (they come back with the kernel's defaults)."""
    return [s.argv[3] for s in steps if isinstance(s, Cmd) and s.argv[:3] == ("ip", "link", "set")
            and len(s.argv) == 6 and s.argv[4] == "netns"]


def sysctl_snapshot(statefile: str, nics: list[str]) -> str:
    """Snippet saving, before `up`, every sysctl the plan can change directly or through the kernel's
    propagation: each interface's IPv4/IPv6 `forwarding` (writing `all.forwarding` rewrites them all) and
    every net.ipv4.conf.NIC.* / net.ipv6.conf.NIC.* of a NIC that moves into a namespace (it comes back
    with the defaults). The saved values (writable, readable ones) go to `sysctl.saved` beside the state
    file, whose first line restores them, `all` and `default` first; `down` runs that line last."""
    role_dir = statefile.rsplit("/", 1)[0]
    saved = f"{role_dir}/sysctl.saved"
    paths = [f"/proc/sys/net/{v}/conf/{k}/forwarding" for k in ("all", "default") for v in ("ipv4", "ipv6")]
    paths += [f"/proc/sys/net/{v}/conf/*/forwarding" for v in ("ipv4", "ipv6")]
    paths += [f"/proc/sys/net/{v}/conf/{shlex.quote(nic)}/*" for nic in nics for v in ("ipv4", "ipv6")]
    restore = (f"ok=0; while read -r f v; do [ \"$(cat \"$f\" 2>/dev/null)\" = \"$v\" ] || "
               f"printf '%s\\n' \"$v\" > \"$f\" 2>/dev/null || ok=1; done < {shlex.quote(saved)}; "
               f"rm -f {shlex.quote(saved)}; exit $ok")
    q = shlex.quote
    return (f"mkdir -p {q(role_dir)} && : > {q(saved)} && for f in {' '.join(paths)}; do "
            f"[ -f \"$f\" ] && [ -w \"$f\" ] && v=$(cat \"$f\" 2>/dev/null) && "
            f"printf '%s %s\\n' \"$f\" \"$v\" >> {q(saved)}; done; "
            f"printf '%s\\n' {q(restore)} >> {q(statefile)}\n")


def down_script(statefile: str) -> str:
    """Stop a tester a killed controller left running (its `trial-*.pid`, see remote_run; first, so that
    what it uses, such as its XDP program, is undone after it ends), run the state file's lines newest
    first (each tolerated to fail, reported), then delete it; delete the tester's result
    files of killed trials (`trial-*.json`, and the `.tmp-PID` file xlatperf writes before renaming) and
    the then empty directories that `up` created (note_created_dirs).
    Prints `undone: LINE`, `failed: LINE` and `stopped tester PID` lines."""
    path, waiting = shlex.quote(statefile), shlex.quote(pending_file(statefile))
    role_dir = shlex.quote(statefile.rsplit("/", 1)[0])
    # A pending line equal to the state file's last one was committed already (killed before its rm).
    pending_first = (f"if [ -f {waiting} ]; then if [ -f {path} ] && [ \"$(tail -n 1 {path})\" = "
                     f"\"$(cat {waiting})\" ]; then :; else cat {waiting} >> {path}; fi; "
                     f"rm -f {waiting}; fi; ")
    return (f"{pending_first}{stop_testers(role_dir)}; if [ -f {path} ]; then tac {path} | "
            f"while IFS= read -r line; do if sh -c \"$line\" >/dev/null 2>&1; then echo \"undone: $line\"; "
            f"else echo \"failed: $line\"; fi; "
            f"done; rm -f {path}; fi; "
            f"rm -f {role_dir}/trial-*.json {role_dir}/trial-*.json.tmp-*; "
            f"{remove_created_dirs(statefile.rsplit('/', 1)[0])}; true")


def created_dirs_file(role_dir: str) -> str:
    """Which of a host's role directory and its parent `up` created (`note_created_dirs`)."""
    return f"{role_dir}/dirs.created"


MADE_MARK = ".xlatbench-made"  # in the parent of the role directories, when `up` created it


def note_created_dirs(role_dir: str) -> str:
    """Snippet run first by `up`: create the role directory and its parent, writing down those that were
    not there (the role directory in `dirs.created`, the parent, which the roles of one file system share,
    by a mark file in it), so that `down` removes only what the suite made (an operator's empty directory
    stays)."""
    q = shlex.quote
    parent = role_dir.rsplit("/", 1)[0]
    return (f"if [ ! -d {q(parent)} ]; then mkdir -p {q(parent)} && : > {q(f'{parent}/{MADE_MARK}')}; fi; "
            f"if [ -d {q(role_dir)} ]; then made=''; else made={q(role_dir)}; fi; "
            f"mkdir -p {q(role_dir)} && printf '%s\\n' $made > {q(created_dirs_file(role_dir))}")


def remove_created_dirs(role_dir: str) -> str:
    """Snippet removing, if empty, the role directory `note_created_dirs` wrote down, then the parent if
    `up` made it and nothing but its mark is left there."""
    q = shlex.quote
    listed, parent = q(created_dirs_file(role_dir)), role_dir.rsplit("/", 1)[0]
    mark = q(f"{parent}/{MADE_MARK}")
    return (f"if [ -f {listed} ]; then d=$(cat {listed}); rm -f {listed}; for x in $d; do "
            f"rmdir \"$x\" 2>/dev/null; done; fi; "
            f"if [ -f {mark} ] && [ -z \"$(ls -A {q(parent)} | grep -vxF {MADE_MARK})\" ]; then "
            f"rm -f {mark} && rmdir {q(parent)} 2>/dev/null; fi")


def stop_testers(role_dir: str) -> str:
    """Snippet ending every tester whose pid file is still in the (quoted) directory, then the files."""
    ours = own_process("", '"$f"', '"$f.id"')
    return (f"for f in {role_dir}/trial-*.pid; do [ -f \"$f\" ] || continue; "
            f"if {ours}; then "
            f"kill -KILL \"$p\" && echo \"stopped tester $p\"; fi; "
            f"rm -f \"$f\" \"$f.id\"; done")


def pending(statefile: str) -> str:
    """Snippet printing what the state file still lists and any tester still running from a killed
    controller (empty when nothing is left to undo)."""
    path = shlex.quote(statefile)
    role_dir = shlex.quote(statefile.rsplit("/", 1)[0])
    waiting = shlex.quote(pending_file(statefile))
    return f"cat {path} {waiting} 2>/dev/null; ls {role_dir}/trial-*.pid 2>/dev/null; true"
