"""Core counts on a real DUT by CPU hotplug (`<sysfs>/devices/system/cpu/cpuN/online`), as the paper's
`maxcpus=` without a reboot. CPU 0 and CPUs the inventory does not allow never go offline; before a CPU
goes offline the host's state file gets the line that brings it back, and `online_all` brings every
allowed CPU back (at the end of a run and after any failure). After each change the host's `online` files
are read back: a core count the host does not really have (a CPU outside `offline_cpus` left offline by
someone else) is refused, never recorded as N cores."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ...cpulist import parse_cpu_list
from .hostout import parse_error
from .ssh import Shell
from .undo import append_line, with_record


class HotplugError(ValueError):
    """A core count the host or the inventory cannot give; the message says which CPU and why."""


@dataclass(frozen=True)
class Hotplug:
    """CPU hotplug of one host. allowed: CPUs the inventory lets go offline."""

    host: str
    allowed: tuple[int, ...]
    sysfs_root: str = "/sys"
    statefile: str = "/run/xlatbench-testbed/undo.sh"

    def online_file(self, cpu: int) -> str:
        return f"{self.sysfs_root}/devices/system/cpu/cpu{cpu}/online"

    def plan(self, keep: list[int], present: list[int]) -> list[int]:
        """The CPUs to take offline so that `keep` (plus CPUs that may not go offline) stay online."""
        missing = sorted(set(keep) - set(present))
        if missing:
            raise HotplugError(f"{self.host}: CPU {missing[0]} does not exist (present: {present})")
        offline = sorted(set(present) - set(keep))
        for cpu in offline:
            if cpu == 0:
                raise HotplugError(f"{self.host}: CPU 0 cannot go offline: keep CPU 0 in the core set")
            if cpu not in self.allowed:
                raise HotplugError(f"{self.host}: CPU {cpu} would go offline but is not in "
                                   f"hosts.{self.host}.offline_cpus: add it there or keep it in the core set")
        return offline

    def commands(self, offline: list[int], record: bool = True) -> list[str]:
        """Shell lines: every allowed CPU online, then the chosen ones offline (with `record`, each
        offline write first appends the line that brings the CPU back to the state file)."""
        lines = [self._write(cpu, 1) for cpu in self.allowed if cpu not in offline]
        for cpu in offline:
            line = self._write(cpu, 0)
            if record:
                line = with_record(append_line(self.statefile, self._write(cpu, 1)), line, self.statefile)
            lines.append(line)
        return lines

    def _write(self, cpu: int, value: int) -> str:
        path = shlex.quote(self.online_file(cpu))
        # A CPU already in that state refuses the write on some kernels: compare first.
        return f"[ \"$(cat {path})\" = {value} ] || echo {value} > {path}"

    def present(self, shell: Shell) -> list[int]:
        path = f"{shlex.quote(self.sysfs_root)}/devices/system/cpu/present"
        out = shell.capture(self.host, f"cat {path}").stdout
        try:
            return list(parse_cpu_list(out.strip()))
        except ValueError:
            why = parse_error(self.host, f"cat {path}", "a CPU list such as 0-7", out)
            raise HotplugError(str(why)) from None

    def online(self, shell: Shell) -> list[int]:
        """CPUs online now, from each cpuN/online (a CPU without that file cannot go offline)."""
        script = (f"cd {shlex.quote(self.sysfs_root)}/devices/system/cpu && for d in cpu[0-9]*; do "
                  "if [ ! -f $d/online ] || [ \"$(cat $d/online)\" = 1 ]; then echo ${d#cpu}; fi; done")
        out = shell.capture(self.host, script).stdout
        if not all(n.isdigit() for n in out.split()):
            raise HotplugError(str(parse_error(self.host, f"the online CPUs under {self.sysfs_root}",
                                               "CPU numbers", out)))
        return sorted(int(n) for n in out.split())

    def apply(self, shell: Shell, keep: list[int]) -> dict[str, object]:
        """Keep exactly `keep` online among the allowed CPUs; returns what the host then has online."""
        present = self.present(shell)
        offline = self.plan(keep, present)
        shell.capture(self.host, "set -e\n" + "\n".join(self.commands(offline)))
        online = self.online(shell)
        wanted = sorted(set(keep) & set(present))
        if [c for c in online if c in present] != wanted:
            down, up = sorted(set(wanted) - set(online)), sorted(set(online) - set(wanted))
            what = (f"CPU {down} stayed offline" if down else "") + ("; " if down and up else "") + (
                f"CPU {up} stayed online" if up else "")
            raise HotplugError(f"{self.host}: asked for CPUs {wanted} online, the host reads back {online}: "
                               f"{what}; bring the CPUs outside hosts.{self.host}.offline_cpus online "
                               "(`echo 1 > /sys/devices/system/cpu/cpuN/online`) or add them to offline_cpus")
        return {"asked": sorted(keep), "offline": offline, "online": online}

    def online_all(self, shell: Shell) -> list[int]:
        if self.allowed:
            shell.capture(self.host, "\n".join(self._write(cpu, 1) for cpu in self.allowed), check=False)
        return self.online(shell)

