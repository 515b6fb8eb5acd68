"""Verifying a finished hand (pure): the revealed deck matches the commitment published at hand
start, the dealer's log follows from that deck, and every card of the table's public record
(up cards, the community card, shown, exposed and mucked hands) came from that deck in dealing
order, with burns and the reshuffle of burns (RULES 10.4) replayed as well.

Problems are described by draw number, seat and street only, never by card value, so a report
may be logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dealer.commitment import verify_commitment
from dealer.deck import DeckInconsistent, HandDeck, Pile, StreetDeal, fresh_pile, replay
from rules import Card, Event
from rules.events import (
    BurnsReshuffled,
    CardBurned,
    CommunityCardDealt,
    DownCardDealt,
    HandEnded,
    HandExposed,
    HandMucked,
    HandShown,
    HandStarted,
    TableOpened,
    UpCardDealt,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HandAudit:
    """What an auditor obtains from the dealer after a hand: the deck with its salt and
    reshuffle key, the published commitment and the dealer's log of draws."""

    deck: HandDeck
    commitment: str
    deals: tuple[StreetDeal, ...] = ()


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of :func:`verify_hand`."""

    problems: tuple[str, ...]
    cards_checked: int
    """Public cards compared with the deck (up, community, shown, exposed, mucked)."""
    draws: int
    """Cards taken from the deck according to the public record (burns included)."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def hand_events(events: Iterable[Event], hand_number: int) -> list[Event]:
    """The events of hand ``hand_number`` (from its ``HandStarted`` to its ``HandEnded``) out
    of a table's whole stream."""
    out: list[Event] = []
    inside = False
    for event in events:
        if isinstance(event, HandStarted):
            inside = event.hand_number == hand_number
        if inside:
            out.append(event)
            if isinstance(event, HandEnded):
                inside = False
    return out


@dataclass
class _Replay:
    pile: Pile
    problems: list[str]
    down: dict[int, list[int]]
    draws: list[tuple[int, int, bool]]
    """(draw number, seat, up) of each public draw."""
    checked: int = 0

    def take(self, seat: int, up: bool, card: Card | None, where: str) -> None:
        index = self.pile.drawn
        try:
            drawn, self.pile = self.pile.take()
        except DeckInconsistent:
            self.problems.append(f"{where}: the deck is exhausted at draw {index}")
            return
        self.draws.append((index, seat, up))
        if not up and seat != 0:
            self.down.setdefault(seat, []).append(drawn)
        if card is not None:
            self.checked += 1
            if card.index != drawn:
                self.problems.append(f"{where}: draw {index} is not the deck's card")

    def burn(self) -> None:
        index = self.pile.drawn
        try:
            _card, self.pile = self.pile.burn()
        except DeckInconsistent:
            self.problems.append(f"burn: the deck is exhausted at draw {index}")
            return
        self.draws.append((index, -1, False))

    def shown(self, seat: int, down: Sequence[Card], what: str) -> None:
        if not down:
            return
        self.checked += len(down)
        if tuple(c.index for c in down) != tuple(self.down.get(seat, ())):
            self.problems.append(f"seat {seat}: {what} down cards are not the cards dealt")


def _log_draws(deals: Sequence[StreetDeal]) -> list[tuple[int, int, bool]]:
    out: list[tuple[int, int, bool]] = []
    for deal in deals:
        if deal.burn_index is not None:
            out.append((deal.burn_index, -1, False))
        out.extend((d.index, d.seat, d.up) for d in deal.cards)
    return out


def verify_hand(audit: HandAudit, events: Iterable[Event]) -> Verification:
    """Check a hand against its commitment and its public record. ``events`` is the table's
    public stream (whole, or only the hand's events)."""
    deck = audit.deck
    problems: list[str] = []
    if not verify_commitment(deck, audit.commitment):
        problems.append("the deck, salt and reshuffle key do not match the commitment")
    all_events = list(events)
    opened = [e for e in all_events if isinstance(e, TableOpened)]
    if opened and opened[0].table_id != deck.table_id:
        problems.append("the deck belongs to another table")
    hand = hand_events(all_events, deck.hand_number)
    if not hand:
        problems.append(f"hand {deck.hand_number} is not in the public record")
        return Verification(tuple(problems), 0, 0)
    started = hand[0]
    assert isinstance(started, HandStarted)
    if started.deck_commitment != audit.commitment:
        problems.append("the commitment published at hand start differs")
    try:
        replay(deck, audit.deals)
    except DeckInconsistent as exc:
        problems.append(f"the dealer's log does not follow from the deck ({exc})")
    run = _Replay(pile=fresh_pile(deck), problems=problems, down={}, draws=[])
    for event in hand:
        match event:
            case BurnsReshuffled():
                run.pile = run.pile.reshuffle(deck.reshuffle_key)
            case CardBurned():
                run.burn()
            case DownCardDealt(seat=seat, street=street, card=card):
                run.take(seat, False, card, f"{street.label}, seat {seat}")
            case UpCardDealt(seat=seat, street=street, card=card):
                run.take(seat, True, card, f"{street.label}, seat {seat}")
            case CommunityCardDealt(card=card):
                run.take(0, True, card, "community card")
            case HandExposed(seat=seat, down=down):
                run.shown(seat, down, "exposed")
            case HandShown(seat=seat, down=down):
                run.shown(seat, down, "shown")
            case HandMucked(seat=seat, down=down):
                run.shown(seat, down, "mucked")
            case _:
                pass
    logged = _log_draws(audit.deals)
    if run.draws != logged[: len(run.draws)]:
        problems.append("the dealer's log and the public record disagree on who got which draw")
    return Verification(tuple(problems), run.checked, len(run.draws))
