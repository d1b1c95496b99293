"""XDP programs on network interfaces: which one is attached, in which mode, and how to detach it.

Both ends of the suite use XDP: Knot answers in XDP mode on the server's interface (`[server] io = "xdp"`)
and the tester's AF_XDP layer attaches its reply filter to the client's. A process killed with SIGKILL
leaves its program attached (no destructor runs), so `xlatbench setup down` detaches every program on the
suite's interfaces through `detach_all`. Everything here goes through iproute2 (`ip -j -d link`,
`ip link set dev IF xdp{drv,generic,offload} off`), in a network namespace when one is named.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

# ip's "mode" numbers (the kernel's XDP_ATTACHED_*) and the word `ip link set ... MODE off` takes for each.
_MODES = {1: ("native", "xdpdrv"), 2: ("generic", "xdpgeneric"), 3: ("offload", "xdpoffload")}


@dataclass(frozen=True)
class Attached:
    """One XDP program on an interface: the interface, the program's name and id, and the attach mode
    (native = in the driver, generic = on the kernel's skb path, offload = on the NIC)."""

    interface: str
    program: str
    program_id: int
    mode: str

    def text(self) -> str:
        return f"{self.program} (id {self.program_id}, {self.mode}) on {self.interface}"

    def record(self) -> dict[str, object]:
        return {"interface": self.interface, "program": self.program, "program_id": self.program_id,
                "mode": self.mode}


def _in_netns(argv: list[str], netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv] if netns else argv


def parse_links(out: str) -> list[Attached]:
    """`ip -j -d link show` output -> the XDP programs attached, one per interface and mode."""
    found = []
    for link in json.loads(out or "[]"):
        xdp = link.get("xdp")
        if not xdp:
            continue
        entries = xdp.get("attached") or [xdp]  # mode 4 (several modes at once) lists them in "attached"
        for entry in entries:
            mode = _MODES.get(int(entry.get("mode", 0)))
            prog = entry.get("prog") or {}
            if mode is None or not prog:
                continue
            found.append(Attached(str(link["ifname"]), str(prog.get("name", "?")), int(prog.get("id", 0)),
                                  mode[0]))
    return found


def attached(netns: str | None = None, interface: str | None = None) -> list[Attached]:
    """The XDP programs on every interface of `netns` (None: this namespace), or on `interface` alone."""
    argv = ["ip", "-j", "-d", "link", "show", *(["dev", interface] if interface else [])]
    done = subprocess.run(_in_netns(argv, netns), capture_output=True, text=True, check=False, timeout=30)
    if done.returncode != 0:
        return []  # the namespace or interface is gone: nothing is attached to it
    return parse_links(done.stdout)


def detach(program: Attached, netns: str | None = None) -> str | None:
    """Detach one program; None on success, else ip's one-line error."""
    word = next(w for name, w in _MODES.values() if name == program.mode)
    argv = _in_netns(["ip", "link", "set", "dev", program.interface, word, "off"], netns)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    return None if done.returncode == 0 else (done.stderr.strip() or f"ip exited {done.returncode}")


def detach_all(netns: str | None = None, interfaces: tuple[str, ...] | None = None) -> list[str]:
    """Detach every XDP program on the interfaces of `netns` (or only those named in `interfaces`);
    returns "PROGRAM (id N, MODE) on IF" for each one removed, with the error for one that would not go."""
    done = []
    for program in attached(netns):
        if interfaces is not None and program.interface not in interfaces:
            continue
        error = detach(program, netns)
        done.append(program.text() + (f": NOT detached: {error}" if error else ""))
    return done
