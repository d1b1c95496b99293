"""One thread in another network namespace (setns), so a test's sockets can live in a namespace it created.

A socket stays in the namespace it was created in, whatever thread uses it later: `in_netns` creates
sockets inside a namespace and returns the thread to its own; `enter_netns` moves a thread for good (a peer's
serving thread, whose raw socket is made on first use). Network namespaces are per thread, so the rest of
the test process stays where it was. Python 3.11 has no os.setns, hence libc's.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000  # linux/sched.h

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def enter_netns(name: str) -> None:
    """Moves the calling thread into the named namespace (/run/netns/NAME, as `ip netns` keeps it)."""
    _setns(f"/run/netns/{name}")


@contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Runs the block in the named namespace and returns the thread to its own after it (None: stay)."""
    if name is None:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter_netns(name)
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the test's own namespace failed")
    finally:
        os.close(own)
