"""Backends render a host's configuration items as steps. `linux` renders plain network configuration
(interfaces, routes, forwarding, NAT44); translator roles go to the backend chosen for them.

This package owns everything that differs between translator implementations, behind one interface
(`Backend`) split by concern, so that each part of the suite sees only what it uses: rendering (`Renderer`:
the roles it plays, the steps it renders, its machine-wide steps, its description and version label), the
emulation's runtime (`Runtime`: whether it runs here, the processes it starts, how to recognise, watch and
pin them, the devices it creates), a testbed host's part (`Deployment`: preflight facts and refusals, undo
specifics, how a testbed swaps in a host's own build) and its own counters (`Counters`, read locally or on a
testbed host). What analysis reads of a backend through its records is declared (`Declared`: its execution
model, the device its queue drops show on) and written under the keys defined here.
The registry (`registry.REGISTRY`, name -> factory) is the only list of implementations: callers outside
this package name none; they ask the registry and use the interface.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ..mapt import MapCe
from ..steps import Step
from ..topology import Host, Item, MapBrRole, Translator
from .statetable import StateTable

# How a translator spends CPU: what a per-process CPU reading covers and whether one instance can use
# more than one core. Every record's translator description carries one of these as `execution_model`.
USER_SPACE_SINGLE_THREAD = "user-space, one thread per instance"
USER_SPACE_MULTI_THREAD = "user-space, multi-threaded"
IN_KERNEL_SOFTIRQ = "in-kernel, softirq"
EXECUTION_MODELS = (USER_SPACE_SINGLE_THREAD, USER_SPACE_MULTI_THREAD, IN_KERNEL_SOFTIRQ)


@dataclass(frozen=True)
class RenderContext:
    """Where a rendering is meant to run.

    world: "real" (a physical host; sub-hosts become namespaces it creates) or "netns" (emulation:
    every host is its own namespace). rundir: directory for the host's files (configs, pid files, logs).
    prefix: name prefix of every object the suite creates (nft tables, namespaces).
    """

    world: str = "real"
    rundir: str = "/run/xlatbench"
    prefix: str = "xlatbench"


@dataclass(frozen=True)
class Process:
    """A process a backend starts for a role on a host.

    name: how records and messages call it ("<program> (<host>)"). pidfile: where its pid is written.
    program: the executable's base name, matched against /proc/PID/comm so that `down` never ends a
    stranger that reused the pid. watch: a trial is void if it dies. pin: it belongs in the DUT's cpuset.
    log: its log file (for the message when it does not stay up).
    """

    name: str
    pidfile: str
    program: str
    watch: bool = True
    pin: bool = True
    log: str = ""


@dataclass(frozen=True)
class VariantOption:
    """A backend's build variant as a command-line / inventory option (`--<flag> CHOICE`).

    default_prefix: a translation prefix a variant needs instead of the paper's (variant -> prefix)."""

    flag: str
    choices: tuple[str, ...]
    default: str
    help: str
    default_prefix: Mapping[str, str]


# What analysis reads of a backend from a record's translator description, under these keys: how it spends
# CPU (one of EXECUTION_MODELS) and the network device its queue drops show on (a user-space translator's
# TUN: its tx_dropped counts what the translator did not take in time), if it has one.
EXECUTION_MODEL_KEY = "execution_model"
QUEUE_DEVICE_KEY = "tun_device"


def declared(backend: Declared) -> dict[str, object]:
    """The declared facts (execution model, queue device) a backend's describe() carries, under their keys."""
    facts: dict[str, object] = {EXECUTION_MODEL_KEY: backend.execution_model}
    if backend.queue_device is not None:
        facts[QUEUE_DEVICE_KEY] = backend.queue_device
    return facts


def recorded_execution_model(description: Mapping[str, object]) -> str | None:
    """A recorded translator description's execution model (None: a record from before it was declared)."""
    model = description.get(EXECUTION_MODEL_KEY)
    return model if isinstance(model, str) else None


def recorded_queue_device(description: Mapping[str, object]) -> str | None:
    """The device a recorded translator's queue drops show on (None: it has none, or it was not recorded)."""
    device = description.get(QUEUE_DEVICE_KEY)
    return device if isinstance(device, str) and device else None


# The `Backend` interface, split by concern: each part of the suite types what it holds with the part it
# uses (tests/setups/test_backends.py keeps each part narrow).


class Named(Protocol):
    """What every part may read: the backend's name, the roles it serves and its build variant."""

    name: str
    roles: frozenset[str]  # translator roles it can serve: clat, plat, ce, br
    variant_option: VariantOption | None  # its build variants, if it has any
    variant: str | None  # the variant this instance is (None: it has none)


class Declared(Protocol):
    """What analysis reads of a backend (through its records), declared rather than implied."""

    execution_model: str  # one of EXECUTION_MODELS
    queue_device: str | None  # the device its queue drops show on (a TUN's tx_dropped), None: none


class Renderer(Named, Declared, Protocol):
    """Rendering (setups.plan): the steps of a role, once-per-machine steps, the devices it makes, what it
    is (describe, notes, version) and whether it carries a zero IPv4 UDP checksum to IPv6."""

    # It carries an IPv4 UDP datagram with checksum 0 (no checksum, RFC 768) to IPv6 by computing the checksum
    # (RFC 7915 section 4.5) rather than dropping it: Knot's XDP mode replies so over IPv4.
    accepts_zero_udp_checksum: bool

    def render(self, role: Translator, host: Host, ctx: RenderContext) -> list[Step]: ...
    # A host whose network the backend owns (a user-space data plane): its steps for a non-translator item
    # of that host (interface, route, forwarding); None: Linux renders it.
    def render_item(self, item: Item, host: Host, ctx: RenderContext) -> list[Step] | None: ...
    def describe(self, role: Translator) -> dict[str, object]: ...  # carries declared()
    def notes(self, role: Translator) -> list[str]: ...  # lines for a rendering's header
    def version(self) -> str: ...
    def machine_steps(self, ctx: RenderContext) -> list[Step]: ...
    def refusal(self, role: Translator) -> str | None: ...  # why this machine cannot hold this role


class Runtime(Named, Protocol):
    """The emulation's runtime on this machine: whether it can run here, the processes it starts (how to
    recognise, watch and pin them) and the devices it creates."""

    def unavailable(self) -> str | None: ...  # why it cannot run on this machine, or None
    def processes(self, host: str, ctx: RenderContext) -> list[Process]: ...
    def devices(self, ctx: RenderContext) -> tuple[str, ...]: ...


class Deployment(Named, Protocol):
    """Deploying to a testbed host: its preflight (facts, refusals, report), the undo of its steps and its
    own build."""

    own_build: str | None  # what a testbed host's own build replaces (inventory `<name>_binary`), if anything

    def preflight_facts(self, binary: str | None = None) -> list[str]: ...
    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]: ...
    def preflight_report(self, facts: Mapping[str, str]) -> object | None: ...
    def preflight_summary(self, report: object | None) -> str: ...
    def testbed_version(self, host_report: Mapping[str, object]) -> object | None: ...
    def undo(self, argv: tuple[str, ...]) -> str | None: ...
    def owns_undo(self, argv: tuple[str, ...]) -> bool: ...
    def created_device(self, argv: tuple[str, ...]) -> str | None: ...
    def with_binary(self, argv: tuple[str, ...], binary: str) -> tuple[str, ...]: ...
    def state_table(self, role: Translator) -> StateTable | None: ...


class Counters(Named, Protocol):
    """The translator's own counters and the kernel's run time of its program, read here or (the script and
    its parser) on a testbed host."""

    def counters(self, host: str, ctx: RenderContext) -> dict[str, int]: ...
    def counters_script(self, host: str, ctx: RenderContext) -> str: ...
    def parse_counters(self, text: str) -> dict[str, int]: ...
    def run_time(self, host: str, ctx: RenderContext) -> tuple[int, int] | None: ...


class Backend(Renderer, Runtime, Deployment, Counters, Protocol):
    """One translator implementation: every part. Only `name`, `roles`, `execution_model`, `render`,
    `unavailable` and `describe` are specific to every backend; the rest have neutral defaults in
    `BackendBase`. What is chosen per role (setups.plan.BackendChoice) are instances of it."""


class BackendBase:
    """Neutral defaults of the optional parts of `Backend` (an in-kernel translator with nothing to start,
    nothing to undo beyond the generic steps, no preflight of its own)."""

    name = ""
    execution_model = IN_KERNEL_SOFTIRQ
    queue_device: str | None = None
    own_build: str | None = None
    variant_option: VariantOption | None = None
    variant: str | None = None
    accepts_zero_udp_checksum = False  # RFC 7915 section 4.5 allows a stateless translator to drop them

    def version(self) -> str:
        return "unknown"

    def render_item(self, item: Item, host: Host, ctx: RenderContext) -> list[Step] | None:
        """None: the host's interfaces, routes and forwarding are the kernel's (Linux renders them)."""
        return None

    def notes(self, role: Translator) -> list[str]:
        return []

    def processes(self, host: str, ctx: RenderContext) -> list[Process]:
        return []

    def machine_steps(self, ctx: RenderContext) -> list[Step]:
        return []

    def refusal(self, role: Translator) -> str | None:
        """Why this machine cannot hold `role` as configured (one line, before anything is brought up)."""
        return None

    def devices(self, ctx: RenderContext) -> tuple[str, ...]:
        return ()

    def state_table(self, role: Translator) -> StateTable | None:
        """The table holding the role's connections when the translator keeps its own (a stateful NAT64);
        None: the role keeps none itself (a stateful NAT44 beside it uses the kernel's conntrack)."""
        return None

    def preflight_facts(self, binary: str | None = None) -> list[str]:
        """Shell lines printing `key=value` facts of a testbed host this backend needs (`binary`: the
        host's own build of its program, if the inventory names one)."""
        return []

    def preflight_problems(self, role: str, topology: str, binary: str | None,
                           facts: Mapping[str, str]) -> list[str]:
        """Why a testbed host cannot serve `role` with this backend (empty: it can)."""
        return []

    def preflight_report(self, facts: Mapping[str, str]) -> object | None:
        """What the preflight record keeps of this backend's facts (under the backend's name)."""
        return None

    def preflight_summary(self, report: object | None) -> str:
        """The report in a few words for the preflight summary ("": nothing found)."""
        return ""

    def testbed_version(self, host_report: Mapping[str, object]) -> object | None:
        """The version a testbed host's preflight report found (None: describe()'s own label stands)."""
        return None

    def owns_undo(self, argv: tuple[str, ...]) -> bool:
        """Whether `undo` knows how to reverse this step (one of this backend's own commands)."""
        return False

    def undo(self, argv: tuple[str, ...]) -> str | None:
        """The shell line reversing one of this backend's steps (None: nothing to undo)."""
        return None

    def created_device(self, argv: tuple[str, ...]) -> str | None:
        """The network device a step of this backend creates (for collision checks), if any."""
        return None

    def with_binary(self, argv: tuple[str, ...], binary: str) -> tuple[str, ...]:
        """`argv` with a host's own build of this backend's program in place of the default one."""
        return argv

    def counters(self, host: str, ctx: RenderContext) -> dict[str, int]:
        """The translator's own counters on `host` (translated, dropped per reason), where it keeps any
        outside the interfaces' statistics; {} if none or unreadable. Read on this machine by running
        `counters_script` (a testbed runs the same script on the host over SSH)."""
        script = self.counters_script(host, ctx)
        if not script:
            return {}
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False, timeout=30)
        return self.parse_counters(done.stdout) if done.returncode == 0 else {}

    def counters_script(self, host: str, ctx: RenderContext) -> str:
        """Shell line printing the translator's own counters on `host` ("": it keeps none)."""
        return ""

    def parse_counters(self, text: str) -> dict[str, int]:
        """Counter name -> value from what `counters_script` printed ({} when unreadable)."""
        return {}

    def run_time(self, host: str, ctx: RenderContext) -> tuple[int, int] | None:
        """(run time in ns, runs) the kernel accounted to the translator's own program on `host` so far
        (it counts while kernel.bpf_stats_enabled is 1); None for a translator the kernel does not account
        this way (a user-space one: read its processes' CPU times)."""
        return None


def whole_address_ces(role: MapBrRole, implementation: str) -> tuple[MapCe, ...]:
    """The CEs a BR serves when it maps whole IPv4 addresses (one EAM per CE, no port sets); ValueError when
    two CEs share an IPv4 address, which such a BR cannot tell apart."""
    ces = role.served_ces()
    addresses = [ce.ipv4_address for ce in ces]
    if len(set(addresses)) != len(addresses):
        raise ValueError(f"the {implementation} BR maps whole IPv4 addresses (one EAM per CE): it can serve "
                         f"only one CE per IPv4 address, got {addresses}")
    return tuple(ces)
