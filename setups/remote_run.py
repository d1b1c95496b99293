"""`python -m xlatbench.setups.remote_run SSH_ARGV_JSON TESTER REMOTE_DIR -- XLATPERF_ARGV...`: run the
tester on the client host and bring its `--json FILE` back to FILE here (what TestbedChain.client_argv
wraps). The local binary path in argv[0] is replaced by the client's TESTER; the remote JSON lives in
REMOTE_DIR (the client's state directory: `testbed down` removes what a killed trial left). The tester
writes its pid to REMOTE_DIR/trial-ID.pid while it runs: after a killed controller the tester (no terminal,
so no hangup) would run on; `testbed down` ends it through that file. Exit status is the tester's."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: remote_run SSH_ARGV_JSON TESTER REMOTE_DIR -- BINARY ARGS...", file=sys.stderr)
        return 2
    ssh, tester, remote_dir, command = json.loads(argv[0]), argv[1], argv[2], argv[4:]
    command = [tester, *command[1:]]
    local_json = None
    trial = f"{remote_dir}/trial-{uuid.uuid4().hex}"
    if "--json" in command:
        at = command.index("--json") + 1
        local_json = command[at]
        command[at] = f"{trial}.json"
    pidfile = shlex.quote(f"{trial}.pid")
    run = f"mkdir -p {shlex.quote(remote_dir)} && echo $$ >{pidfile} && exec {shlex.join(command)}"
    code = subprocess.run([*ssh, "--", run], check=False).returncode
    if local_json is None:
        subprocess.run([*ssh, "--", f"rm -f {pidfile}"], check=False)
    else:
        remote = shlex.quote(command[command.index("--json") + 1])
        fetch = [*ssh, "--", f"rm -f {pidfile}; cat {remote} && rm -f {remote}"]
        got = subprocess.run(fetch, capture_output=True, check=False)
        if got.returncode == 0:
            with open(local_json, "wb") as out:
                out.write(got.stdout)
        elif code == 0:
            print(f"remote_run: tester JSON not found on the client: {got.stderr.decode().strip()}",
                  file=sys.stderr)
            return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
