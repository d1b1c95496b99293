"""Append-only JSON Lines results store: one record (data/records.py) per line, each fsync'ed before
the next trial starts. The one reader and writer of stores: the campaign, its replay and analysis/ use it.

Every record carries a unique "key"; a resumed campaign reads the keys already stored and never writes a
finished trial twice. A line cut short by a kill (no newline at the end) is an unfinished record: readers
skip it, and a campaign moves it aside to FILE.torn-N and goes on from the last complete line.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

from .records import Record, RecordError, record_from_json


class StoreError(RuntimeError):
    """The store cannot be read or written; the message names the file and line."""


PROBE_BYTES = 64 << 10  # room a store must have before a campaign starts


def _reason(err: OSError) -> str:
    return f"{err.strerror or err}, {errno.errorcode.get(err.errno or 0, '?')}"


PROBE_BYTES = 64 << 10  # room a store must have before a campaign starts


def _reason(err: OSError) -> str:
    return f"{err.strerror or err}, {errno.errorcode.get(err.errno or 0, '?')}"


class ResultStore:
    """path: the .jsonl file (created with its directory on first append)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def records(self) -> Iterator[Record]:
        """Every complete record, in order, typed (a records.Record subclass per type)."""
        for number, line in self._lines():
            try:
                data = json.loads(line)
            except json.JSONDecodeError as err:
                raise StoreError(f"{self.path}:{number}: not a JSON record ({err.msg}); the store is "
                                 "damaged: mend or delete that line, or pick another with --store") from None
            if not isinstance(data, dict) or "key" not in data:
                raise StoreError(f"{self.path}:{number}: not an xlatbench record (no key): is this a "
                                 "results store? pick another with --store")
            try:
                yield record_from_json(data)
            except RecordError as err:
                raise StoreError(f"{self.path}:{number}: {err}") from None

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        if not self.path.exists():
            return
        try:
            with open(self.path, "rb") as handle:
                for number, line in enumerate(handle, start=1):
                    if not line.endswith(b"\n"):
                        return  # a torn tail: not a finished record
                    if line.strip():
                        yield number, line
        except OSError as err:
            raise StoreError(f"cannot read the results store {self.path}: {err.strerror}") from None

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

    def append(self, record: Record) -> None:
        """Write one record durably (flush + fsync) before returning.

        On a write error (a disk filled up) the file is cut back to the records before this one, so that
        every record in it stays whole, and StoreError says what happened."""
        line = json.dumps(record.to_json(), separators=(",", ":"), allow_nan=False) + "\n"
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
            raise StoreError(f"store {self.path}: cannot write record {record.key!r} ({_reason(err)}); "
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
