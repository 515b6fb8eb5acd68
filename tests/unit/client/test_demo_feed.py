"""The demo room's feed (``studclient.demo.Feed``), pure: whole hands played by the rules'
driver, seen as an observer sees them, give one line per action in the hand history's words
and a summary per hand naming who won which pot or half."""

from __future__ import annotations

import random

from rules import DECK, TableConfig
from rules.betting import ActionKind, LegalActions
from rules.commands import Call, Check, Command, Complete, PostBringIn, Raise
from rules.events import (
    BetMade,
    BringInPosted,
    Called,
    Checked,
    Completed,
    Folded,
    PlayerSeated,
    PotAwarded,
    Raised,
)
from rules.history import render_history
from rules.testing import StackedDeck, TableDriver
from rules.views import public_event
from studclient.demo import Feed

ACTIONS = (BringInPosted, Completed, BetMade, Raised, Called, Checked, Folded)


def lively(legal: LegalActions) -> Command:
    """Seat 1 raises when it can, the others call or check."""
    kinds = {a.kind for a in legal.actions}
    seat = legal.seat
    if seat == 1 and ActionKind.RAISE in kinds:
        return Raise(seat=seat)
    if ActionKind.CALL in kinds:
        return Call(seat=seat)
    if ActionKind.CHECK in kinds:
        return Check(seat=seat)
    if ActionKind.COMPLETE in kinds and ActionKind.BRING_IN not in kinds:
        return Complete(seat=seat)
    return PostBringIn(seat=seat)


def played(hands: int, seed: int) -> TableDriver:
    driver = TableDriver(TableConfig(), stacks={1: 20_000, 3: 20_000, 5: 20_000})
    rng = random.Random(seed)
    for _ in range(hands):
        cards = list(DECK)
        rng.shuffle(cards)
        driver.play_hand(StackedDeck(cards), lively)
    return driver


def test_one_line_per_action_and_a_summary_per_hand() -> None:
    driver = played(3, seed=7)
    events = [public_event(e) for e in driver.events]
    lines: list[str] = []
    feed = Feed(lines.append)
    for event in events:
        feed.event(event)
    feed.idle()
    history = render_history(events).splitlines()
    actions = [ln for ln in lines if any(
        ln.startswith(f"Seat {s} ") and verb in ln for s in (1, 3, 5)
        for verb in ("brings in", "completes", "bets", "raises", "calls", "checks", "folds"))]
    assert len(actions) == sum(isinstance(e, ACTIONS) for e in events)
    assert all(a in history for a in actions)  # the hand history's own words
    summaries = [ln for ln in lines if " wins " in ln]
    awards = [e for e in events if isinstance(e, PotAwarded)]
    assert len(summaries) == len(awards)
    names = {e.seat: e.player_id for e in events if isinstance(e, PlayerSeated)}
    for line, award in zip(summaries, awards, strict=True):
        assert line.startswith("Hand #")
        assert f"Seat {award.seat} ({names[award.seat]}) wins {award.amount:,}" in line
        if award.hand:
            assert award.hand in line
    assert not [ln for ln in lines if "down card" in ln or ln.startswith("***  Hand")]
    streets = [ln for ln in lines if ln.startswith("*** 3rd street ***")]
    assert len(streets) == 3 and all("is dealt" in ln for ln in streets)


def test_a_feed_joining_mid_hand_prints_only_what_follows() -> None:
    driver = played(1, seed=3)
    events = [public_event(e) for e in driver.events]
    seated = max(i for i, e in enumerate(events) if isinstance(e, PlayerSeated)) + 1
    cut = seated + (len(events) - seated) // 2
    lines: list[str] = []
    feed = Feed(lines.append)
    feed.seed(events[:cut])
    for event in events[cut:]:
        feed.event(event)
    later = render_history(events).splitlines()[len(render_history(events[:cut]).splitlines()):]
    assert lines and all(ln in later or "wins" in ln or ln.count(",") for ln in lines)
    assert sum(" wins " in ln for ln in lines) == sum(isinstance(e, PotAwarded) for e in events)
