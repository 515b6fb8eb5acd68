"""End-to-end support: the tests that start ``make run`` take one lock between them, so that
under ``make test``'s worker processes two rooms never reach for the usual ports (50051-50053)
at the same moment (both find a port free, and the second to bind it fails)."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

MAKE_RUN_MODULES = ("test_make_run", "test_make_run_demo", "test_make_run_safety",
                    "test_make_run_web")


@pytest.fixture(autouse=True)
def one_make_run_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.path.stem not in MAKE_RUN_MODULES:
        yield
        return
    with open(Path(tempfile.gettempdir()) / "stud-hilo-make-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
