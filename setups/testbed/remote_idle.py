"""Per-core CPU use on each DUT host, the paper's evidence: a small shell loop on the host copies the
cpu lines of /proc/stat with the host's clock once a second into a file (started before a capture trial,
collected after). The samples have the shape of `xlatbench.cpuload.CpuSampler`'s, with each
interval's end on the host's clock (`t_host`) and on the controller's (`t_controller` = t_host - offset,
the clock offset preflight measured)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ...cpuload import COLUMNS, usage_between
from .hostout import parse_error
from .ssh import Shell
from .undo import append_line, identity_file, remember_process, stop_own, with_record


@dataclass(frozen=True)
class IdleSampler:
    """The sampler of one host: its files live in `rundir`, /proc/stat is read from `proc_stat`."""

    host: str
    rundir: str
    statefile: str
    proc_stat: str = "/proc/stat"
    interval_s: float = 1.0

    @property
    def data(self) -> str:
        return f"{self.rundir}/idle.samples"

    @property
    def pidfile(self) -> str:
        return f"{self.rundir}/idle.pid"

    def start_script(self, record: bool = True) -> str:
        """The sampler started in the background; with `record`, its undo line is written first."""
        loop = (f"while :; do echo \"t $(date +%s.%N)\"; grep '^cpu' {shlex.quote(self.proc_stat)}; "
                f"sleep {self.interval_s}; done")
        data, pid = shlex.quote(self.data), shlex.quote(self.pidfile)
        start = (f"mkdir -p {shlex.quote(self.rundir)} && {{ setsid nohup sh -c {shlex.quote(loop)} >{data} "
                 f"2>/dev/null </dev/null & {remember_process('$!', self.pidfile, 'sh')}; }}")
        if not record:
            return start
        undo = f"{stop_own(self.pidfile)}; rm -f {pid} {shlex.quote(identity_file(self.pidfile))} {data}"
        return with_record(append_line(self.statefile, undo), start, self.statefile)

    def stop_script(self) -> str:
        data, pid = shlex.quote(self.data), shlex.quote(self.pidfile)
        ident = shlex.quote(identity_file(self.pidfile))
        return f"{stop_own(self.pidfile)}; cat {data} 2>/dev/null; rm -f {pid} {ident} {data}"

    def start(self, shell: Shell) -> None:
        shell.capture(self.host, self.start_script())

    def collect(self, shell: Shell, clock_offset_s: float = 0.0) -> list[dict[str, Any]]:
        return samples_from(shell.capture(self.host, self.stop_script()).stdout, clock_offset_s, self.host)


def samples_from(text: str, clock_offset_s: float = 0.0, host: str = "host") -> list[dict[str, Any]]:
    """The sampler file -> [{"t_host", "t_controller", "t_s", "cpus": {cpu: {column: %}}}] per interval;
    HostOutputError (one line naming the host) for a line that is not a time stamp (`date +%s.%N`) or a
    /proc/stat cpu line of counters."""
    snapshots: list[tuple[float, dict[str, tuple[int, ...]]]] = []
    for line in text.splitlines():
        if line.startswith("t "):
            try:
                stamp = float(line.split()[1])
            except (ValueError, IndexError):
                raise parse_error(host, "date +%s.%N (the idle sampler)", "seconds since the epoch with "
                                  "a fraction (a date with %N, as GNU coreutils has)", line) from None
            snapshots.append((stamp, {}))
        elif line.startswith("cpu") and snapshots:
            name, *values = line.split()
            if not all(v.isdigit() for v in values[: len(COLUMNS)]):
                raise parse_error(host, "grep ^cpu PROC_STAT (the idle sampler)", "a /proc/stat cpu line "
                                  "of tick counters", line)
            numbers = tuple(int(v) for v in values[: len(COLUMNS)])
            padded = numbers + (0,) * (len(COLUMNS) - len(numbers))
            snapshots[-1][1]["all" if name == "cpu" else name[3:]] = padded
    snapshots = [s for s in snapshots if s[1]]
    samples = []
    for (_, before), (t1, after) in zip(snapshots, snapshots[1:], strict=False):
        samples.append({"t_host": t1, "t_controller": round(t1 - clock_offset_s, 3),
                        "t_s": round(t1 - snapshots[0][0], 3), "cpus": usage_between(before, after)})
    return samples
