"""Append-only JSON Lines results store: one record per line, each fsync'ed before the next trial starts.

Every record carries a unique "key"; a resumed campaign reads the keys already stored and never writes a
finished trial twice. A line cut short by a kill (no newline at the end) is an unfinished record: it is
moved aside to FILE.torn-N and the store goes on from the last complete line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STORE_SCHEMA = "xlatbench.results/1"


class StoreError(RuntimeError):
    """The store cannot be read or written; the message names the file and line."""


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
                                     "the store is damaged") from None
                if not isinstance(record, dict) or "key" not in record:
                    raise StoreError(f"{self.path}:{number}: not an xlatbench record (no key)")
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

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably (flush + fsync) before returning."""
        if "key" not in record:
            raise StoreError("a record needs a key")
        line = json.dumps({"schema": STORE_SCHEMA, **record}, separators=(",", ":"), allow_nan=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new_file = not self.path.exists()
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        if new_file:  # make the new directory entry durable too
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
