"""The secrecy campaign in short (``make audit`` runs 1,000 hands): no down card's value in any
watch stream, sampled view, observer's hand history, service log or metric."""

from __future__ import annotations

from pathlib import Path

import pytest

from table.secrecy import campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def test_short_secrecy_campaign(tmp_path: Path) -> None:
    played, capture = await campaign(hands=30, n_tables=2, seed=3, work=tmp_path)
    assert played >= 30
    assert capture.secret_cards > 0  # folded and unshown hands were there to leak
    assert sum(len(r) for r in capture.watch.values()) > 0 and capture.views
    assert capture.leaks == []
