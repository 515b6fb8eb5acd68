"""The secrecy campaign in short (``make audit`` runs 1,000 hands): no down card's value in any
watch stream, sampled view, observer's hand history, service log or metric, and every
capture made (a scrape that fails fails the run); every opening a player received searched
for other players' hidden cards."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaigns.secrecy import campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def test_short_secrecy_campaign(tmp_path: Path) -> None:
    played, capture, tally = await campaign(hands=30, n_tables=2, seed=3, work=tmp_path)
    assert capture.failures == [], capture.failures
    assert capture.leaks == []
    assert played >= 30 and tally.actions > 0
    assert capture.secret_cards > 0  # folded and unshown hands were there to leak
    assert capture.own_openings > 0  # players' card openings were captured and searched
    assert sum(len(r) for r in capture.watch.values()) > 0 and capture.views
