"""The fault campaign in short (``make chaos`` runs 300 hands and 12 kills): a table replica,
the dealer, the wallet and Redis each killed with SIGKILL and restarted while the bots play;
then no chip lost, no hand settled twice, every hand played verified in full by
``stud replay verify --all``."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaigns.chaos import campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


async def test_short_chaos_campaign(tmp_path: Path) -> None:
    out = await campaign(hands=20, kills=5, n_tables=2, seed=5, work=tmp_path)
    assert out.problems == [], out.problems
    assert out.kills == 5 and out.hands >= 20
    assert out.replay.in_full == out.hands
    assert (out.chips_lost, out.duplicate_settlements, out.unverified) == (0, 0, 0)
