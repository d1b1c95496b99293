"""NIC IRQ affinity of a DUT's test interfaces across a core sweep.

Taking a CPU offline breaks the affinity of the IRQs that pointed at it (the kernel moves them to an online
CPU, usually CPU 0) and bringing it back does not move them back: in an ascending sweep every later core
count would take its NICs' interrupts on CPU 0. So, before the first core change, the affinity of every IRQ
of the host's test interfaces is saved (`<proc_root>/irq/N/smp_affinity_list`; the IRQs are those listed in
`<sysfs_root>/class/net/IF/device/msi_irqs`, else for a virtio NIC its queues' `<proc_root>/interrupts` lines
`virtioN-input.Q` / `virtioN-output.Q`, else the lines named IF or IF-...),
each write-back of the saved value journalling the line that restores it (undo.py: `down` puts it back,
after the hotplug lines have brought the CPUs online). An IRQ whose affinity the kernel refuses to change
(a kernel-managed queue IRQ, which follows hotplug by itself) is left alone and named. After each core
change the changeable IRQs are spread over the online CPUs (the host's IRQs in turn, one CPU each), read
back, and what each IRQ then has goes with the placement of every record."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from .ssh import Shell
from .undo import append_line, with_record

SPREAD_RULE = ("each changeable IRQ of the test interfaces on one online CPU in turn, set after every core "
               "change; the affinity found before the sweep is restored by down")


class IrqError(ValueError):
    """An IRQ affinity the host did not take; the message names the host, IRQ and CPU."""


@dataclass
class SavedIrqs:
    """What `IrqAffinity.save` found: per interface its IRQs (sorted) with the affinity list each had
    before the sweep; `fixed`: IRQs whose affinity the kernel refused to change (kernel-managed)."""

    saved: dict[str, dict[int, str]] = field(default_factory=dict)
    fixed: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class IrqAffinity:
    """The IRQs of one host's test interfaces. sysfs_root / proc_root: where /sys and /proc are (tests
    point them at fake trees)."""

    host: str
    interfaces: tuple[str, ...]
    statefile: str
    sysfs_root: str = "/sys"
    proc_root: str = "/proc"

    def affinity_file(self, irq: int) -> str:
        return f"{self.proc_root}/irq/{irq}/smp_affinity_list"

    def find_script(self) -> str:
        """Prints `IF IRQ AFFINITY` for each IRQ of each test interface that has an affinity file. An
        interface's IRQs, first found first: its device's `msi_irqs`; for a virtio NIC (its `device` is the
        virtioN device, whose PCI parent holds the MSI-X vectors of its queues and of its configuration) the
        `<proc_root>/interrupts` lines of its queues, `virtioN-input.Q` and `virtioN-output.Q`; else the
        lines named IF or IF-..."""
        q = shlex.quote
        interrupts = q(f"{self.proc_root}/interrupts")
        by_name = "'{ sub(\":\", \"\", $1); print $1 }'"
        parts = []
        for iface in self.interfaces:
            device = q(f"{self.sysfs_root}/class/net/{iface}/device")
            parts.append(
                f"irqs=$(ls {device}/msi_irqs 2>/dev/null); "
                f"dev=$(readlink -f {device} 2>/dev/null); dev=${{dev##*/}}; "
                f"case \"$irqs:$dev\" in :virtio[0-9]*) irqs=$(awk -v d=\"$dev\" "
                f"'index($NF, d \"-input.\") == 1 || index($NF, d \"-output.\") == 1' {interrupts} "
                f"2>/dev/null | awk {by_name});; esac; "
                f"[ -n \"$irqs\" ] || irqs=$(awk -v i={q(iface)} "
                f"'$NF == i || index($NF, i \"-\") == 1' {interrupts} 2>/dev/null | awk {by_name}); "
                f"for n in $irqs; do f={q(self.proc_root)}/irq/$n/smp_affinity_list; "
                f"[ -f \"$f\" ] && echo \"{iface} $n $(cat \"$f\")\"; done")
        return "; ".join(parts) + "; true"

    def save(self, shell: Shell) -> SavedIrqs:
        """Read every IRQ's affinity and write it back as it was, journalling its restore line only when the
        kernel took the write (a refused one is kernel-managed: named in `fixed`, never touched again)."""
        found = SavedIrqs()
        rows = [line.split() for line in shell.capture(self.host, self.find_script()).stdout.splitlines()]
        for iface, irq, cpus in (r for r in rows if len(r) == 3 and r[1].isdigit()):
            found.saved.setdefault(iface, {})[int(irq)] = cpus
        lines = []
        for irq, cpus in sorted((i, c) for per in found.saved.values() for i, c in per.items()):
            path = shlex.quote(self.affinity_file(irq))
            restore = f"[ \"$(cat {path})\" = {shlex.quote(cpus)} ] || echo {shlex.quote(cpus)} > {path}"
            write = f"echo {shlex.quote(cpus)} > {path} 2>/dev/null"
            lines.append(f"{with_record(append_line(self.statefile, restore), write, self.statefile)} "
                         f"|| echo fixed {irq}")
        if lines:
            out = shell.capture(self.host, "\n".join(lines)).stdout.split()
            pairs = zip(out[::2], out[1::2], strict=False)
            found.fixed = sorted(int(n) for kind, n in pairs if kind == "fixed")
        return found

    def plan(self, saved: SavedIrqs, online: list[int]) -> dict[int, int]:
        """IRQ -> the CPU it gets: the changeable IRQs (interface by interface, each's in order) on the
        online CPUs in turn."""
        irqs = [irq for iface in self.interfaces for irq in sorted(saved.saved.get(iface, {}))
                if irq not in saved.fixed]
        return {irq: online[i % len(online)] for i, irq in enumerate(irqs)}

    def spread(self, shell: Shell, saved: SavedIrqs, online: list[int]) -> dict[str, object]:
        """Set the plan's affinities and read them back; IrqError when one does not read back as set.
        Returns the record: per interface IRQ -> affinity list read back, the saved lists and the rule."""
        chosen = self.plan(saved, online)
        script = [f"echo {cpu} > {shlex.quote(self.affinity_file(irq))}" for irq, cpu in chosen.items()]
        script += [f"echo \"{irq} $(cat {shlex.quote(self.affinity_file(irq))})\""
                   for per in saved.saved.values() for irq in per]
        done = shell.capture(self.host, "\n".join(script), check=False)
        now = {int(r[0]): r[1] for r in (line.split() for line in done.stdout.splitlines()) if len(r) == 2}
        for irq, cpu in chosen.items():
            if now.get(irq) != str(cpu):
                raise IrqError(f"{self.host}: IRQ {irq} was set to CPU {cpu} but reads back "
                               f"{now.get(irq, 'nothing')} ({done.stderr.strip()[-200:] or 'no error'}): "
                               f"check {self.affinity_file(irq)} on the host (irqbalance running?)")
        per_iface = saved.saved.items()
        return {"rule": SPREAD_RULE, "online": online,
                "affinity": {iface: {str(irq): now.get(irq) for irq in per} for iface, per in per_iface},
                "before_sweep": {iface: {str(irq): cpus for irq, cpus in per.items()}
                                 for iface, per in saved.saved.items()},
                "kernel_managed": saved.fixed}
