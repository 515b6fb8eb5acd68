"""Invariants shared by the rules property tests and the stateful machine: chips, cards,
phases and pot settlement (RULES 9, 11.5, 14)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from rules import Card, best_high, best_low, evolve, queries
from rules.betting import WAGERS, ActionKind, LegalActions, legal_actions_for
from rules.config import TableConfig
from rules.events import (
    ChipsAdded,
    CommunityCardDealt,
    DownCardDealt,
    Event,
    HandStarted,
    PlayerLeft,
    PlayerSeated,
    PotAwarded,
    Share,
    UpCardDealt,
)
from rules.showdown import hand_pots
from rules.state import HandState, Phase, TableState
from rules.streets import bet_size

WAITING = frozenset({Phase.DEALING, Phase.BETTING, Phase.REVEAL, Phase.SHOWDOWN,
                     Phase.COMPLETE})


def bought_in(events: list[Event]) -> int:
    """Chips brought to the table minus chips taken away."""
    total = 0
    for e in events:
        if isinstance(e, PlayerSeated):
            total += e.stack
        elif isinstance(e, ChipsAdded):
            total += e.amount
        elif isinstance(e, PlayerLeft):
            total -= e.stack
    return total


def chips_on_table(state: TableState) -> int:
    """Every stack (the live one for players in the hand) plus chips committed and not yet
    awarded."""
    stacks = sum(state.stack(n) for n, s in enumerate(state.seats, start=1) if s is not None)
    committed = state.hand.pot_total if state.hand_in_progress and state.hand else 0
    return stacks + committed


def cards_in(value: object) -> Iterator[Card]:
    """Every card inside an event (any field, tuples included)."""
    if isinstance(value, Card):
        yield value
    elif isinstance(value, tuple | list | frozenset):
        for item in value:
            yield from cards_in(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from cards_in(getattr(value, f.name))


def dealt_cards(events: list[Event] | tuple[Event, ...]) -> list[Card]:
    """Card values dealt by these events, in order (down cards only when known)."""
    cards: list[Card] = []
    for e in events:
        if isinstance(e, DownCardDealt | UpCardDealt | CommunityCardDealt) and e.card:
            cards.append(e.card)
    return cards


def chips_by_seat(awards: list[PotAwarded]) -> dict[int, int]:
    """Chips received per seat (seats receiving nothing left out)."""
    received: dict[int, int] = {}
    for a in awards:
        received[a.seat] = received.get(a.seat, 0) + a.amount
    return {s: v for s, v in received.items() if v}


def expected_split(hand: HandState, amount: int, eligible: tuple[int, ...]) -> dict[int, int]:
    """What each eligible seat receives from a pot by RULES 14, worked out from the cards:
    best high takes the high half (the whole pot without a qualifying low), best low the low
    half; tied winners share, odd chips going by highest own card, rank then suit."""
    values = {}
    for p in hand.players:
        if p.seat in eligible:
            own = tuple(c for c in p.own_cards() if c is not None)
            cards = own + ((hand.community,) if hand.community else ())
            values[p.seat] = (best_high(cards), best_low(cards), max(c.key for c in own))
    received = dict.fromkeys(eligible, 0)

    def share(chips: int, winners: list[int]) -> None:
        winners.sort(key=lambda s: values[s][2], reverse=True)
        base, odd = divmod(chips, len(winners))
        for i, seat in enumerate(winners):
            received[seat] += base + (1 if i < odd else 0)

    top = max(v[0] for v in values.values())
    high_winners = [s for s, v in values.items() if v[0] == top]
    lows = [v[1] for v in values.values() if v[1] is not None]
    if not lows:
        share(amount, high_winners)
    else:
        best = max(lows)
        share(amount - amount // 2, high_winners)
        share(amount // 2, [s for s, v in values.items() if v[1] == best])
    return {s: v for s, v in received.items() if v}


def check_table(state: TableState, log: list[Event], hand_start: int,
                dealt: list[Card] | None = None) -> None:
    """Checks after every command: chips conserved and never negative, a waiting phase
    that agrees with the queries, no card dealt twice (and, given the dealer's ``dealt``
    cards, exactly those), every player still in holding the cards of the street.
    ``hand_start`` is the index of the current hand's HandStarted in ``log``."""
    assert chips_on_table(state) == bought_in(log)
    assert all(s.stack >= 0 for s in state.seats if s)
    hand = state.hand
    if hand is None:
        return
    assert hand.phase in WAITING
    for p in hand.players:
        assert p.stack >= 0 and p.hand_total >= 0 and p.street_total >= 0
    if not hand.is_over:
        assert state.config is not None
        assert hand.pot_total == sum(p.hand_total for p in hand.players)
        assert (queries.pending_deal(state) is None) == (hand.phase != Phase.DEALING)
        legal = legal_actions_for(hand, state.config)
        assert (legal is not None) == (hand.phase == Phase.BETTING)
        if legal is not None:
            check_legal(hand, state.config, legal)
        elif hand.phase != Phase.DEALING or hand.street is not None:
            # a betting round is over: no uncalled excess is left in (RULES 9.2)
            totals = sorted((p.street_total for p in hand.players), reverse=True)
            assert len(totals) < 2 or totals[0] == totals[1], totals
    else:
        assert hand.pot_total == 0
    hand_events = log[hand_start:]
    cards = dealt_cards(hand_events)
    assert len(set(cards)) == len(cards), "a card was dealt twice"
    if dealt is not None and hand_events and isinstance(hand_events[0], HandStarted):
        assert cards == dealt
    known = [c for p in hand.players for c in (*p.down, *p.up) if c is not None]
    if hand.community is not None:
        known.append(hand.community)
    assert len(set(known)) == len(known)
    assert hand.dealt + hand.burned <= 52
    if hand.street is not None and hand.phase != Phase.COMPLETE:
        want = int(hand.street) - (1 if hand.community is not None else 0)
        assert all(len(p.down) + len(p.up) == want for p in hand.players if not p.folded)


def check_legal(hand: HandState, config: TableConfig, legal: LegalActions) -> None:
    """The legal actions have the shapes of RULES 6-7: the player to act is able to act;
    fold never beside check; a call puts in what is missing or all the chips; a wager goes
    to exactly L + S or all-in for less; the bring-in player posts or completes."""
    p = hand.player(legal.seat)
    assert p.able and legal.seat == hand.to_act
    kinds = [a.kind for a in legal.actions]
    assert len(kinds) == len(set(kinds))
    if hand.bring_in_pending:
        assert kinds[0] == ActionKind.BRING_IN and set(kinds) <= {ActionKind.BRING_IN,
                                                                   ActionKind.COMPLETE}
        assert legal.actions[0].amount == min(config.bring_in, p.stack)
        assert (ActionKind.COMPLETE in kinds) == (p.stack > config.bring_in)
    else:
        missing = hand.target - p.street_total
        assert (ActionKind.CHECK in kinds) == (missing <= 0) != (ActionKind.FOLD in kinds)
        call = legal.get(ActionKind.CALL)
        assert (call is not None) == (missing > 0)
        if call is not None:
            assert call.amount == min(missing, p.stack)
    capped = hand.full_wagers >= config.cap and not hand.cap_lifted
    assert hand.full_wagers <= config.cap or hand.cap_lifted
    step = bet_size(config, hand.street) if hand.street else 0
    for a in legal.actions:
        assert 0 <= a.amount <= p.stack and a.to == p.street_total + a.amount
        assert a.all_in == (a.amount == p.stack)
        if a.kind in WAGERS and not hand.bring_in_pending:
            assert not capped and a.to > hand.target
            assert a.to == hand.level + step or (a.all_in and a.to < hand.level + step)


def check_settlement(before: TableState, events: tuple[Event, ...]) -> None:
    """Each pot (as built right before the awards) is awarded exactly: the hi and lo
    shares add up to it, and each seat gets what RULES 14 gives it from the cards of
    every hand eligible, shown or mucked (11.5)."""
    state = before
    for e in events:
        if isinstance(e, PotAwarded):
            break
        state = evolve(state, e)
    hand = state.hand
    assert hand is not None
    pots = hand_pots(hand)
    awards = [e for e in events if isinstance(e, PotAwarded)]
    assert sum(a.amount for a in awards) == sum(p.hand_total for p in hand.players)
    assert {a.pot for a in awards} == set(range(len(pots)))
    in_hand = [p for p in hand.players if not p.folded]
    for index, pot in enumerate(pots):
        mine = [a for a in awards if a.pot == index]
        assert sum(a.amount for a in mine) == pot.amount
        assert all(a.seat in pot.eligible and a.amount >= 0 for a in mine)
        shares = {a.share for a in mine}
        assert shares in ({Share.WHOLE}, {Share.HIGH, Share.LOW})
        if shares == {Share.HIGH, Share.LOW}:
            half = pot.amount // 2
            assert sum(a.amount for a in mine if a.share == Share.LOW) == half
            assert sum(a.amount for a in mine if a.share == Share.HIGH) == pot.amount - half
        if len(in_hand) == 1:
            assert [(a.seat, a.share) for a in mine] == [(pot.eligible[0], Share.WHOLE)]
            continue
        assert chips_by_seat(mine) == expected_split(hand, pot.amount, pot.eligible)
