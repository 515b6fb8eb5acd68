"""The failover campaign in short (``make failover`` runs the full one): three table replicas
as processes, kill -9, SIGSTOP then SIGCONT, and a rolling restart while bots play; nothing is
lost, nothing written twice, no chip lost."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from table.failover import campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def test_short_failover_campaign(tmp_path: Path) -> None:
    report = await campaign(n_tables=2, seconds_between=1.0, seed=1, work=tmp_path)
    line = report.line()
    assert re.fullmatch(r"tables=2 takeovers=\d+ max_takeover_s=[\d.]+ lost_events=0 "
                        r"duplicate_events=0 chips_lost=0 stale_appends_refused=\d+", line), line
    assert report.takeovers >= 2  # the killed and the frozen replica's tables moved
    assert report.actions > 0
    assert report.max_takeover_s < 10
