"""The dealer, the wallet and the table start with the garbage-collector settings their
environment gives (``STUD_GC_FREEZE``, ``STUD_GC_THRESHOLD``; ``studkit.service.GcSettings``):
each says so in its ``<name>_started`` log line, read from the collector of the running
process. Asserts the settings applied, never a speed (docs/benchmarks.md measures that)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studtest import redis as test_redis_source
from studtest.processes import room_processes
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.e2e

KEYS = DevKeys.generate()


def started_line(log: str, name: str) -> dict[str, object]:
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    return next(line for line in lines if line.get("event") == f"{name}_started")


@pytest.mark.parametrize(("env", "frozen", "threshold"), [
    ({}, True, None),
    ({"STUD_GC_FREEZE": "0", "STUD_GC_THRESHOLD": "23456,15,12"}, False, [23456, 15, 12]),
])
async def test_the_services_start_with_the_gc_settings_of_their_environment(
        redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path,
        env: dict[str, str], frozen: bool, threshold: list[int] | None) -> None:
    def url_for(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else redis_url

    async with room_processes(url_for, KEYS, tmp_path, extra_env=env) as room:
        for proc in room.all:
            line = started_line(proc.logs(), proc.name)
            assert (int(line["gc_frozen"]) > 10_000) is frozen, line  # type: ignore[call-overload]
            if not frozen:
                assert line["gc_frozen"] == 0
            if threshold is not None:
                assert line["gc_threshold"] == threshold
            else:
                assert line["gc_threshold"] == [700, 10, 10]
