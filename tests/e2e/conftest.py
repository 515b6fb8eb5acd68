"""End-to-end support: the tests that start ``make run`` (``python -m studtools.devrun``) take
one lock between them, so that under ``make test``'s worker processes two rooms never reach
for the usual ports (50051-50055, the gateway's 8080 and 8443) at the same moment (both find
a port free, and the second to bind it fails).

A module that starts ``make run`` in a module-scoped fixture (one room its tests share) holds
the lock for the whole module: that fixture starts before the first of its tests and stops
after the last, outside any one test, so a lock taken per test would not cover its start.
The lock's fixture is module-scoped and autouse, which pytest sets up before the module's
other module-scoped fixtures (autouse ones first within a scope). The other modules take the
lock per test, so that a worker waits for one test of the other's, not for a whole module."""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

MAKE_RUN_MODULES = ("test_make_run", "test_make_run_demo", "test_make_run_safety",
                    "test_make_run_web", "test_make_observe_traces")
"""The modules whose tests start ``make run``."""
MODULE_SCOPED_STARTS = ("test_make_run_safety",)
"""Those of them that also start it in a module-scoped fixture (``running``): they hold the
lock from before that fixture starts until after it stops."""


@contextlib.contextmanager
def make_run_lock() -> Iterator[None]:
    """The lock between the worker processes (``flock``: released if the worker dies)."""
    with open(Path(tempfile.gettempdir()) / "stud-hilo-make-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module", autouse=True)
def one_make_run_at_a_time_in_module(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.path.stem not in MODULE_SCOPED_STARTS:
        yield
        return
    with make_run_lock():
        yield


@pytest.fixture(autouse=True)
def one_make_run_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    stem = request.path.stem
    if stem not in MAKE_RUN_MODULES or stem in MODULE_SCOPED_STARTS:
        yield  # not a make run module, or its module holds the lock already
        return
    with make_run_lock():
        yield
