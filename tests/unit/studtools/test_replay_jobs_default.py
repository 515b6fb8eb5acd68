"""``stud replay verify --jobs``'s default: one process per idle CPU (the CPUs this process may
use less the load average), at least one."""

from __future__ import annotations

import os

import pytest

from studtools import replay_cli


@pytest.mark.parametrize(("cpus", "load", "jobs"), [
    (4, 0.0, 4), (4, 1.4, 3), (4, 2.6, 1), (2, 16.0, 1), (2, 0.4, 2), (1, 0.0, 1)])
def test_jobs_default_to_the_idle_cpus(monkeypatch: pytest.MonkeyPatch, cpus: int,
                                       load: float, jobs: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)),
                        raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert replay_cli.idle_cpus() == jobs


def test_no_load_average_counts_every_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2},
                        raising=False)
    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert replay_cli.idle_cpus() == 3
