"""Fixtures for the emulation tests: a prefix of our own, chains that always come down, the tester."""

from __future__ import annotations

import os
import secrets
import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from trials import run_trial

from xlatbench.paths import tester_binary
from xlatbench.setups.backends.registry import EMULATION_DEFAULT
from xlatbench.setups.emulation import EmulatedChain, EmulationConfig, down, leftovers
from xlatbench.setups.plan import BackendChoice


def _random_prefix() -> str:
    # Other developers run namespace tests on this machine at the same time: a prefix per session.
    return "xbt" + "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(4))


@pytest.fixture(scope="session")
def prefix() -> Iterator[str]:
    value = _random_prefix()
    # The end-of-session check (tests/conftest.py) looks for anything of this prefix left behind.
    os.environ["XLATBENCH_TEST_PREFIXES"] = f"{os.environ.get('XLATBENCH_TEST_PREFIXES', '')} {value}".strip()
    yield value
    down(value)


@pytest.fixture
def chain_factory(prefix: str) -> Iterator:
    """Bring chains up with the session prefix; whatever happens, take them down after the test."""

    def make(topology: str, backend: str | None = None, variants: dict[str, str] | None = None,
             **options: object) -> EmulatedChain:
        """`backend` and `variants` as text, parsed here (the tests' edge) into the chain's backends."""
        if backend is not None or variants is not None:
            options["backends"] = BackendChoice.parse(backend or EMULATION_DEFAULT, variants)
        return EmulatedChain.up(EmulationConfig(topology, prefix=prefix, **options))  # type: ignore[arg-type]

    yield make
    down(prefix)
    assert leftovers(prefix) == []


@pytest.fixture
def tester() -> Path:
    return tester_binary()  # not built is a failure, not a skip: `make test` builds it first


@pytest.fixture
def trial(tester: Path):
    """trial(chain, rate, duration, ...) runs one xlatperf trial in the client namespace -> its JSON."""

    def run(chain: EmulatedChain, *args: object, **kwargs: object) -> dict:
        return run_trial(chain, tester, *args, **kwargs)  # type: ignore[arg-type]

    return run
