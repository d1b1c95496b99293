"""A one-search loopback campaign for the fault tests (signals, a component killed mid-trial)."""

from pathlib import Path

TEMPLATE = """
[campaign]
name = "{name}"
methods = ["rfc8219-binary"]
cores = [1]

[search]
max_rate_qps = 16000
error_qps = 2000
duration_s = 1
rest_s = 0.1
repetitions = 1

[tester]
port = {port}
threads = 1
ports_per_thread = 1

[[setup]]
name = "loopback"
kind = "loopback"
rmem_bytes = 0
"""


def loopback_campaign(name: str, port: int) -> str:
    """The campaign file's text: one short RFC 8219 search against Knot on loopback at `port`."""
    return TEMPLATE.format(name=name, port=port)


def xlatperf_pids_on(port: int) -> list[int]:
    """Pids of xlatperf processes whose command line names `port` (the test's own Knot port)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and argv[0].endswith(b"xlatperf") and str(port).encode() in argv:
            found.append(int(proc.name))
    return found
