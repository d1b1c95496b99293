"""How the suite spells a list of CPUs: the tester's grammar (dnsperf/src/cpulist.cpp), what users may
write in options and campaign files, and the masks RPS takes. In the foundation, because every part spells
CPU lists (the server's options, both worlds of setups, the campaign files, the analysis): one rule parses
and one rule prints a CPU list."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable

# The tester's grammar (dnsperf/src/cpulist.cpp): comma-separated CPUs and ranges, "0", "0,2", "1-3,6";
# each number 1-5 digits and below CPU_SETSIZE, no backwards range, no CPU twice. Nothing else parses one.
CPU_SETSIZE = 1024
_CPU_ITEM = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPUs of "0", "0,2" or "1-3,6" in the order written (ranges expanded); ValueError with a message
    a user can act on otherwise."""
    return _cpus_of(text.split(","), text)


def parse_user_cpu_list(text: str) -> tuple[int, ...]:
    """A CPU list as users write it in options and campaign files: the tester's grammar, optionally in
    brackets and with spaces around the items ("0,1", "[0, 1]", " 1-3 "). The one place that spelling is
    accepted; ValueError naming the text as written otherwise."""
    inner = text.strip()
    if inner.startswith("[") and inner.endswith("]"):
        inner = inner[1:-1]
    return _cpus_of([item.strip() for item in inner.split(",")], text)


def _cpus_of(items: list[str], text: str) -> tuple[int, ...]:
    cpus: list[int] = []
    for item in items:
        match = _CPU_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"bad CPU list {text!r}: expected numbers and ranges like 0,2-3")
        first, last = int(match[1]), int(match[2] or match[1])
        if max(first, last) >= CPU_SETSIZE:
            raise ValueError(f"bad CPU list {text!r}: CPU {max(first, last)} is beyond the kernel's limit")
        if last < first:
            raise ValueError(f"bad CPU list {text!r}: range {item} runs backwards")
        for cpu in range(first, last + 1):
            if cpu in cpus:
                raise ValueError(f"bad CPU list {text!r}: CPU {cpu} appears twice")
            cpus.append(cpu)
    return tuple(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """CPUs in the tester's grammar, as every output of the suite spells them: "0,2,3"."""
    return ",".join(str(cpu) for cpu in cpus)


def cpu_list_arg(text: str) -> tuple[int, ...]:
    """parse_cpu_list as an argparse type (a bad list is a usage error naming the option)."""
    try:
        return parse_cpu_list(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def cpu_mask(cpus: list[int]) -> str:
    """Hex mask as /sys/class/net/IF/queues/rx-N/rps_cpus takes it."""
    mask = 0
    for cpu in cpus:
        mask |= 1 << cpu
    return f"{mask:x}"
