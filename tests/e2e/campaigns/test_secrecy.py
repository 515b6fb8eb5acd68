"""The secrecy campaign in short (``make audit`` runs 1,000 hands): no down card's value in any
watch stream, sampled view, observer's hand history, service log or metric, and every
capture made (a scrape that fails fails the run); every opening a player received searched
for other players' hidden cards; a sit & go railed by a player with no entry through
``stud play --tournament``'s rail, and watched by an observer, searched the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaigns.secrecy import campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


async def test_short_secrecy_campaign(tmp_path: Path) -> None:
    played, railed, capture, tally = await campaign(hands=30, n_tables=2, seed=3,
                                                    work=tmp_path, sng_wait_s=60)
    assert capture.failures == [], capture.failures
    assert capture.leaks == []
    assert played >= 30 and tally.actions > 0
    assert capture.secret_cards > 0  # folded and unshown hands were there to leak
    assert capture.own_openings > 0  # players' card openings were captured and searched
    assert sum(len(r) for r in capture.watch.values()) > 0 and capture.views
    # the rail: a tournament table watched and viewed as the public sees it, hands searched
    assert railed > 0 and capture.railed and capture.rail_events > 0 and capture.rail_views > 0
    assert all(t.startswith("rail-sng.") for t in capture.railed)
