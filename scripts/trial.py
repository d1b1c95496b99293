"""The one thing a search sees: a trial at a rate for a duration, and its result.

`TrialResult` and `Measurer` are the contract of docs/ARCHITECTURE.md; `result_from_xlatperf` turns the
tester's JSON document into a `TrialResult` for every measurer that runs the real tester.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

# The paper's acceptance criterion: at most one query in 10 000 lost (0.01 %).
DEFAULT_LOSS_RATIO = 1e-4


@dataclass(frozen=True)
class TrialResult:
    """Outcome of one trial.

    rate_qps: asked query rate, queries/s.
    duration_s: asked trial duration, s.
    sent: queries sent, count.
    valid: valid answers received within the timeout, count.
    loss_ratio: 1 - valid / sent, fraction (1.0 when nothing was sent).
    tester_limited: True when the tester could not offer the asked rate; never DUT loss.
    reasons: why the trial is tester-limited (empty otherwise).
    achieved_rate_qps: rate the tester really offered, queries/s.
    raw: the tester's JSON document, or None (fake DUTs).
    dut_stats: what the DUT side did during the trial, or None: {"cpu_s": {dut: CPU-seconds of its translator
        processes}, "counters": {hop: {counter: increase}}, "conntrack_entries": {dut: entries in its
        namespace's conntrack right after the trial, count; emulated chains}} (ChainMeasurer).
    host_steal_pct: per CPU of the host running the suite ("0", "1", ...), % of the trial's time the
        hypervisor gave that CPU to another guest (/proc/stat steal), or None when not measured (fake DUTs,
        older stores). In emulation that host is the whole testbed; on a real testbed it is the controller.
    tester_shortfall: queries the tester's own shortfall can account for (tester_shortfall()), count; None
        when unknown (then a tester-limited trial is taken as the tester's, as before).
    warnings: xlatperf's `warnings` (what the server or the path did that makes the loss mean less: a
        case-rewriting server, replies on unbound AF_XDP queues, most replies failing their checksum), each
        one line; empty for fake DUTs and older records.
    """

    rate_qps: float
    duration_s: float
    sent: int
    valid: int
    loss_ratio: float
    tester_limited: bool = False
    reasons: tuple[str, ...] = ()
    achieved_rate_qps: float = 0.0
    raw: dict[str, Any] | None = field(default=None, compare=False)
    dut_stats: dict[str, Any] | None = field(default=None, compare=False)
    host_steal_pct: dict[str, float] | None = field(default=None, compare=False)
    tester_shortfall: int | None = field(default=None, compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def lost(self) -> int:
        """Queries without a valid answer in time, count."""
        return max(0, self.sent - self.valid)

    def passed(self, loss_ratio: float = DEFAULT_LOSS_RATIO) -> bool:
        """True when the DUT met the criterion; False for DUT loss. Meaningless if tester_limited."""
        return not self.tester_limited and self.sent > 0 and self.loss_ratio <= loss_ratio

    def to_dict(self, with_raw: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["reasons"] = list(self.reasons)
        data["warnings"] = list(self.warnings)
        if not with_raw:
            data.pop("raw")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        return cls(
            rate_qps=float(data["rate_qps"]),
            duration_s=float(data["duration_s"]),
            sent=int(data["sent"]),
            valid=int(data["valid"]),
            loss_ratio=float(data["loss_ratio"]),
            tester_limited=bool(data.get("tester_limited", False)),
            reasons=tuple(data.get("reasons", ())),
            achieved_rate_qps=float(data.get("achieved_rate_qps", 0.0)),
            raw=data.get("raw"),
            dut_stats=data.get("dut_stats"),
            host_steal_pct=data.get("host_steal_pct"),
            tester_shortfall=data["tester_shortfall"] if data.get("tester_shortfall") is not None
            else tester_shortfall(data["raw"], float(data["rate_qps"])) if data.get("raw") else None,
            warnings=tuple(data["warnings"]) if data.get("warnings") is not None
            else tester_warnings(data["raw"]) if data.get("raw") else (),
        )


class Measurer(Protocol):
    """Runs one trial; the searches never know how."""

    def measure(self, duration_s: float, rate_qps: float) -> TrialResult: ...


class TesterOutputError(RuntimeError):
    """The tester's JSON is missing or lacks a field the suite relies on."""

    __test__ = False  # a name pytest would otherwise try to collect


def result_from_xlatperf(doc: dict[str, Any], rate_qps: float, duration_s: float) -> TrialResult:
    """Build a TrialResult from xlatperf's JSON (fields of docs/ARCHITECTURE.md).

    The tester's verdict alone says whether the trial is tester-limited (it compares what it sent with its
    schedule, its send window, its own socket drops): the suite takes it as it is and never guesses one.
    """
    try:
        totals = doc["totals"]
        sent = int(totals["sent"])
        valid = int(totals["valid"])
        achieved = float(doc.get("send", {}).get("achieved_rate_qps", 0.0))
    except (KeyError, TypeError, ValueError) as err:
        raise TesterOutputError(f"xlatperf JSON lacks a required field ({err!r}); "
                                "is the tester up to date?") from None
    limited, reasons = tester_judgement(doc)
    loss = 1.0 - valid / sent if sent > 0 else 1.0
    shortfall = tester_shortfall(doc, rate_qps)
    warnings = tester_warnings(doc)
    return TrialResult(
        rate_qps=rate_qps,
        duration_s=duration_s,
        sent=sent,
        valid=valid,
        loss_ratio=float(doc.get("loss_ratio", loss)) if sent > 0 else 1.0,
        tester_limited=limited,
        reasons=reasons,
        achieved_rate_qps=achieved,
        raw=doc,
        tester_shortfall=shortfall,
        warnings=warnings,
    )


def tester_shortfall(doc: dict[str, Any], rate_qps: float) -> int | None:
    """Queries whose loss the tester's own shortfall can account for, from xlatperf's JSON: every loss it
    attributes to itself. Those it never sent (totals.unsent), dropped on its way out (tester_egress_drops)
    or on its own receive path (tester_receive_drops), replies it left unread at its end (unread_at_end),
    replies that reached an AF_XDP queue it had not bound (unbound_queue_replies), queries whose ring slot a
    later one took while they were in flight (send.ring_overruns), and those due during its longest send
    stall (rate x send.max_lag_s: sent late, in a burst the DUT may rightly drop).

    Documents of schema version 1 name the receive drops tester_buffer_drops and say only whether replies
    were left unread (receive.final_drain_cut): when they were, or when an AF_XDP run had receive queues
    unbound and passed frames to the kernel, the tester's share is unknown (None), as it is when the
    document lacks the totals (an older tester)."""
    totals = doc.get("totals") if isinstance(doc, dict) else None
    if not isinstance(totals, dict) or "unsent" not in totals:
        return None
    send = doc.get("send") if isinstance(doc.get("send"), dict) else {}
    if "tester_receive_drops" not in totals and _v1_share_unknown(doc):
        return None
    late = math.ceil(rate_qps * max(0.0, float(send.get("max_lag_s") or 0.0)))
    counted = ("unsent", "tester_egress_drops", "unread_at_end", "unbound_queue_replies")
    own_drops = totals.get("tester_receive_drops", totals.get("tester_buffer_drops"))
    return (sum(int(totals.get(name) or 0) for name in counted) + int(own_drops or 0)
            + int(send.get("ring_overruns") or 0) + late)


def _v1_share_unknown(doc: dict[str, Any]) -> bool:
    """A version-1 document whose tester lost replies it did not count: its final read was cut, or its
    AF_XDP program passed frames while the interface had receive queues without a socket."""
    receive = doc.get("receive") if isinstance(doc.get("receive"), dict) else {}
    io = doc.get("io") if isinstance(doc.get("io"), dict) else {}
    program = io.get("program") if isinstance(io.get("program"), dict) else {}
    unbound = (io.get("mode") == "xdp" and int(io.get("interface_queues") or 0) > int(io.get("queues") or 1)
               and int(program.get("passed") or 0) > 0)
    return bool(receive.get("final_drain_cut")) or unbound


def tester_warnings(doc: dict[str, Any]) -> tuple[str, ...]:
    """xlatperf's `warnings`, each one line (an absent or malformed list: none)."""
    warnings = doc.get("warnings") if isinstance(doc, dict) else None
    if not isinstance(warnings, list):
        return ()
    return tuple(" ".join(w.split()) for w in warnings if isinstance(w, str) and w.strip())


def tester_judgement(doc: dict[str, Any]) -> tuple[bool, tuple[str, ...]]:
    """(tester-limited, reasons) from xlatperf's `verdict` (dnsperf/schema/result.schema.json): "ok" with no
    reasons or "tester-limited" with at least one. Anything else is a TesterOutputError, never a guess."""
    verdict = doc.get("verdict") if isinstance(doc, dict) else None
    status = verdict.get("status") if isinstance(verdict, dict) else None
    reasons = verdict.get("reasons") if isinstance(verdict, dict) else None
    if status not in ("ok", "tester-limited"):
        raise TesterOutputError(f"xlatperf JSON has no readable verdict (verdict.status {status!r} is "
                                "neither 'ok' nor 'tester-limited'); is the tester up to date?")
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise TesterOutputError(f"xlatperf verdict.reasons {reasons!r} is not a list of strings; "
                                "is the tester up to date?")
    if (status == "tester-limited") != bool(reasons):
        raise TesterOutputError(f"xlatperf verdict {status!r} with {len(reasons)} reason(s) contradicts its "
                                "schema (tester-limited needs a reason, ok has none)")
    return status == "tester-limited", tuple(reasons)
