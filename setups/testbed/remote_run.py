"""`python -m xlatbench.setups.testbed.remote_run SSH_ARGV_JSON TESTER REMOTE_DIR -- XLATPERF_ARGV...`:
run the tester on the client host and bring its JSON file back here (what TestbedChain.client_argv wraps).
The argv is the measurement's (scripts/xlatperf.py), passed on as it is but for two arguments: the local
binary path in argv[0] becomes the client's TESTER, and the argument naming the controller's trial JSON file
(procs.is_tester_json) a file in REMOTE_DIR, copied back to the local one after the run. The argv is quoted
once, into the one remote command line. REMOTE_DIR is the client's state directory (`testbed down` removes
what a killed trial left). The tester writes its pid to REMOTE_DIR/trial-ID.pid while it runs: after a killed
controller the tester (no terminal, so no hangup) would run on; `testbed down` ends it through that file.
Exit status is the tester's; when ssh itself failed (exit 255, and the fetch after it cannot reach the client
either) the last line on stderr says that the SSH connection to the client was lost (LOST_PREFIX), never that
the tester exited with 255."""

from __future__ import annotations

import json
import shlex
import sys
import uuid

from ...procs import is_tester_json
from .hostout import CAPTURE_LIMIT, run_bounded, shown
from .ssh import SSH_FAILED
from .undo import identity_file, remember_process

LOST_PREFIX = "remote_run: lost the SSH connection to the client"


def json_argument(command: list[str]) -> int | None:
    """Where in `command` the controller's trial JSON file is named (procs.is_tester_json); None: nowhere."""
    return next((i for i, arg in enumerate(command) if i and is_tester_json(arg)), None)


def remote_scripts(tester: str, remote_dir: str, command: list[str], trial: str,
                   json_at: int | None = None) -> tuple[str, str, str | None]:
    """(run, fetch, remote JSON path or None) for one trial: `run` writes the tester's pid file and execs the
    client's tester (argv[0] replaced, the JSON file argument at `json_at` moved into remote_dir); `fetch`
    removes the pid file and prints then deletes the JSON."""
    command = [tester, *command[1:]]
    base = f"{remote_dir}/trial-{trial}"
    remote_json = None
    if json_at is not None:
        command[json_at] = remote_json = f"{base}.json"
    pidfile = shlex.quote(f"{base}.pid")
    started = remember_process("$$", f"{base}.pid", tester)
    run = f"mkdir -p {shlex.quote(remote_dir)} && {started} && exec {shlex.join(command)}"
    ident = shlex.quote(identity_file(f"{base}.pid"))
    fetch = f"rm -f {pidfile} {ident}"
    if remote_json:
        fetch += f"; cat {shlex.quote(remote_json)} && rm -f {shlex.quote(remote_json)}"
    return run, fetch, remote_json


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: remote_run SSH_ARGV_JSON TESTER REMOTE_DIR -- BINARY ARGS...", file=sys.stderr)
        return 2
    ssh, tester, remote_dir, command = json.loads(argv[0]), argv[1], argv[2], argv[4:]
    json_at = json_argument(command)
    local_json = None if json_at is None else command[json_at]
    run, fetch, _ = remote_scripts(tester, remote_dir, command, uuid.uuid4().hex, json_at)
    # The client's words reach this terminal bounded and escaped (hostout), as every host's do.
    ran = run_bounded([*ssh, "--", run], None, None)
    sys.stderr.write(ran.stderr)
    code = ran.returncode
    got = run_bounded([*ssh, "--", fetch], None, 120)
    if code == SSH_FAILED and got.returncode == SSH_FAILED:
        why = (got.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"{LOST_PREFIX} ({shown(why)}): the tester's own status is unknown, the trial is void",
              file=sys.stderr)
        return code
    if local_json is not None:
        if got.dropped.get("stdout"):
            print(f"remote_run: the tester JSON on the client is larger than the {CAPTURE_LIMIT} bytes kept "
                  f"({got.dropped['stdout']} more): not read", file=sys.stderr)
            return 1
        if got.returncode == 0:
            with open(local_json, "w") as out:
                out.write(got.stdout)
        elif code == 0:
            print(f"remote_run: tester JSON not found on the client: {shown(got.stderr.strip())}",
                  file=sys.stderr)
            return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
