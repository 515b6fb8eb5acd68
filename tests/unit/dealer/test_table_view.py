"""The dealer's view of a table folds a batch of public events (``TableView.extend``, a run
of hand events at once through ``rules.fold``) exactly as it folds them one by one, and keeps
its notes of the latest ``HANDS_KEPT`` hands only."""

from __future__ import annotations

import random

import pytest

import dealer.tables
from dealer.tables import HandRecord, TableView
from rules import Event, LegalActions, TableConfig, card_from_index
from rules.betting import ActionKind
from rules.commands import PlayerCommand
from rules.testing import StackedDeck, TableDriver, action_command


def played(seed: int, hands: int = 4) -> list[Event]:
    """The events of a few hands (burns on: draws, reshuffles, folds and showdowns)."""
    rng = random.Random(seed)
    t = TableDriver(TableConfig(burn_cards=True), {s: 10_000 for s in range(1, 6)},
                    table_id="t1")

    def act(legal: LegalActions) -> PlayerCommand:
        kinds = [a.kind for a in legal.actions]
        calm = [k for k in kinds if k in (ActionKind.BRING_IN, ActionKind.CALL,
                                          ActionKind.CHECK)]
        if calm and rng.random() < 0.8:
            return action_command(legal.seat, calm[0])
        return action_command(legal.seat, rng.choice(kinds))

    for _ in range(hands):
        cards = list(range(52))
        rng.shuffle(cards)
        t.play_hand(StackedDeck(card_from_index(c) for c in cards), act)
    return list(t.events)


def key(view: TableView) -> tuple[object, ...]:
    return (view.version, view.state, view.seatings, view.draws, view.shown)


@pytest.mark.parametrize("seed", range(6))
def test_a_batch_folds_as_the_events_one_by_one(seed: int) -> None:
    events = played(seed)
    one = TableView("t1")
    for event in events:
        one.apply(event)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(events)), 5))
    batched = TableView("t1")
    for lo, hi in zip([0, *cuts], [*cuts, len(events)], strict=True):
        batched.extend(events[lo:hi])
    assert key(batched) == key(one)
    assert one.draws and one.shown and len(one.seatings) == 4


@pytest.mark.parametrize("kept", [1, 2, 3])
def test_a_view_keeps_the_latest_hands_only(kept: int, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """A table that deals for months costs the dealer the same as a new one: what a view
    notes per hand (seating, draws, shown) is dropped once ``HANDS_KEPT`` later hands have
    started, whether it folds one event at a time or in batches; the state is unchanged."""
    events = played(1, hands=5)
    full = TableView("t1")
    full.extend(events)
    monkeypatch.setattr(dealer.tables, "HANDS_KEPT", kept)
    one = TableView("t1")
    for event in events:
        one.apply(event)
    batched = TableView("t1")
    batched.extend(events[:40])
    batched.extend(events[40:])
    assert key(one) == key(batched)
    latest = list(range(6 - kept, 6))
    assert list(one.seatings) == latest
    assert set(one.draws) <= set(latest) and set(one.shown) <= set(latest)
    assert one.state == full.state and one.version == full.version
    for number in range(1, 6):
        expected = (HandRecord(full.seatings[number], full.draws.get(number, 0),
                               full.shown.get(number, frozenset()))
                    if number in latest else HandRecord(full.seatings[number], counted=False))
        assert one.record(number) == expected
    assert len(one.runs) == 1  # one seating all along: one run
    assert one.record(6) is None


def test_the_older_hands_seatings_are_kept_as_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A view keeps the seatings of its older hands as runs of hands dealt to one seating
    (a seating changes when a player sits down or leaves), nothing for a hand it never saw,
    and at most ``SEATING_RUNS_KEPT`` runs, the oldest going first."""
    a, b = {1: "ann", 2: "bob"}, {1: "ann", 3: "cat"}
    view = TableView("t1", seatings={1: a, 2: a, 3: b, 5: b, 6: a, 7: a})
    view._forget_before(7)
    assert list(view.seatings) == [7]
    assert [view.record(n) for n in range(1, 9)] == [
        HandRecord(a, counted=False), HandRecord(a, counted=False),
        HandRecord(b, counted=False), None, HandRecord(b, counted=False),
        HandRecord(a, counted=False), HandRecord(a), None]
    assert view.runs == ((1, a), (3, b), (4, None), (5, b), (6, a))
    monkeypatch.setattr(dealer.tables, "SEATING_RUNS_KEPT", 2)
    view.seatings.update({8: b, 9: b})
    view._forget_before(10)
    assert view.runs == ((6, a), (8, b)) and view.runs_end == 9
    assert [view.record(n) for n in (5, 6, 7, 8, 9)] == [
        None, HandRecord(a, counted=False), HandRecord(a, counted=False),
        HandRecord(b, counted=False), HandRecord(b, counted=False)]
