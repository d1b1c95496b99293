"""Append-only JSON Lines results store: one record per line, each fsync'ed before the next trial starts.

Every record carries a unique "key"; a resumed campaign reads the keys already stored and never writes a
finished trial twice. A line cut short by a kill (no newline at the end) is an unfinished record: it is
moved aside to FILE.torn-N and the store goes on from the last complete line.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STORE_SCHEMA = "xlatbench.results/1"


class StoreError(RuntimeError):
    """The store cannot be read or written; the message names the file and line."""


PROBE_BYTES = 64 << 10  # room a store must have before a campaign starts


def _reason(err: OSError) -> str:
    return f"{err.strerror or err}, {errno.errorcode.get(err.errno or 0, '?')}"


class ResultStore:
    """path: the .jsonl file (created with its directory on first append)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every complete record, in order."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.endswith(b"\n"):
                    return  # a torn tail: not a finished record
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise StoreError(f"{self.path}:{number}: not a JSON record ({err.msg}); "
                                     "the store is damaged: repair or delete that line, or pick "
                                     "another store with --store") from None
                if not isinstance(record, dict) or "key" not in record:
                    raise StoreError(f"{self.path}:{number}: not an xlatbench record (no key): is this a "
                                     "results store? pick another with --store")
                yield record

    def repair_torn_tail(self) -> int:
        """Move an unfinished last line aside (kill during a write); returns how many bytes were moved."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        cut = data.rfind(b"\n") + 1
        if cut == len(data):
            return 0
        n = 1
        while (aside := self.path.with_name(f"{self.path.name}.torn-{n}")).exists():
            n += 1
        aside.write_bytes(data[cut:])
        with open(self.path, "r+b") as handle:
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())
        return len(data) - cut

    def check_writable(self, room_bytes: int = PROBE_BYTES) -> None:
        """Fail now (StoreError, one line) when the store cannot take records: its directory cannot be made
        or written, or has not even room_bytes free (a disk full would otherwise stop a campaign after its
        first trial)."""
        probe = self.path.with_name(f".{self.path.name}.probe-{os.getpid()}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                with open(self.path, "ab"):
                    pass
            with open(probe, "wb") as handle:
                handle.write(b"\0" * room_bytes)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:
            raise StoreError(f"store {self.path}: cannot write ({_reason(err)}); "
                             "free space, fix its permissions, or pick another with --store") from None
        finally:
            probe.unlink(missing_ok=True)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably (flush + fsync) before returning.

        On a write error (a disk filled up) the file is cut back to the records before this one, so that
        every record in it stays whole, and StoreError says what happened."""
        if "key" not in record:
            raise StoreError("a record needs a key")
        line = json.dumps({"schema": STORE_SCHEMA, **record}, separators=(",", ":"), allow_nan=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new_file = not self.path.exists()
        size = self.path.stat().st_size if not new_file else 0
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:
            self._cut_back(size)
            raise StoreError(f"store {self.path}: cannot write record {record['key']!r} ({_reason(err)}); "
                             "every record before it is kept") from None
        if new_file:  # make the new directory entry durable too
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def _cut_back(self, size: int) -> None:
        """Remove a partly written last record (best effort: the next run's repair_torn_tail also does)."""
        try:
            with open(self.path, "r+b") as handle:
                handle.truncate(size)
                os.fsync(handle.fileno())
        except OSError:
            pass
