"""``stud replay verify --jobs``'s default: one process per idle CPU (the CPUs this process may
use less the load average, this process's own share of it not counted), at least one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from studtools import replay_cli


@pytest.mark.parametrize(("cpus", "load", "jobs"), [
    (4, 0.0, 4), (4, 1.4, 3), (4, 2.6, 1), (2, 16.0, 1), (2, 0.4, 2), (1, 0.0, 1)])
def test_jobs_default_to_the_idle_cpus(monkeypatch: pytest.MonkeyPatch, cpus: int,
                                       load: float, jobs: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)),
                        raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(replay_cli, "own_load", lambda: 0.0)
    assert replay_cli.idle_cpus() == jobs


def test_this_process_own_load_is_not_another_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """A benchmark that has kept one CPU busy for a minute sees a load of about 1 on an
    otherwise idle machine of 2 CPUs: both are idle to it."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.1, 1.0, 0.9))
    monkeypatch.setattr(replay_cli, "own_load", lambda: 0.95)
    assert replay_cli.idle_cpus() == 2
    monkeypatch.setattr(replay_cli, "own_load", lambda: 0.0)
    assert replay_cli.idle_cpus() == 1


def test_own_load_is_small_for_a_process_just_started() -> None:
    """A command just started has added next to nothing to the minute's average (its import
    a second of CPU at most: under 0.02)."""
    done = subprocess.run([sys.executable, "-c", "from studtools.replay_cli import own_load; "
                           "print(own_load())"], capture_output=True, text=True, check=True)
    assert 0.0 <= float(done.stdout) < 0.05


def test_no_load_average_counts_every_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2},
                        raising=False)
    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert replay_cli.idle_cpus() == 3
