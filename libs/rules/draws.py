"""The public deal rule as draws: which draw of the deck each seat gets on each street, and
which card (or deck position) that draw takes. One implementation for the dealer, who deals
with it, and for a player or an auditor, who check with it (docs/dealer.md, "The public deal
rule").

Every card taken from the deck, dealt or burned, gets the next *draw number* 0, 1, 2, ...
The streets follow :func:`rules.dealing.street_plan` (seat order, folded seats skipped, a burn
before each street from 4th on when the table burns, a community card when the deck runs
short). A :class:`Stub` holds what is left of the deck, top first: card indexes for the
dealer, deck positions for a player who knows only where each card was committed. Shuffling
the burned cards back into the stub (RULES 10.4) orders stub and burns by a *reshuffle
order* fixed with the deck.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from rules.cards import DECK, DECK_SIZE
from rules.dealing import DealPlan, street_plan
from rules.events import (
    BurnsReshuffled,
    CardBurned,
    CommunityCardDealt,
    DownCardDealt,
    Event,
    Folded,
    HandExposed,
    HandStarted,
    UpCardDealt,
)
from rules.streets import Street

BURN_SEAT: Final = -1
"""The ``seat`` of a burned draw (0 is the community card)."""


class DeckExhausted(ValueError):
    """Raised when a draw is asked of an empty stub."""


class DealRuleBroken(ValueError):
    """Raised when a hand's public record does not deal as the public deal rule says."""


@dataclass(frozen=True, slots=True)
class Stub:
    """What is left of a deck: ``items`` (card indexes or deck positions, top first), the
    burned items and the number of draws so far.

    >>> card, rest = Stub((7, 3, 9)).take()
    >>> card, rest.items, rest.drawn
    (7, (3, 9), 1)
    >>> Stub(()).take()
    Traceback (most recent call last):
    ...
    rules.draws.DeckExhausted: the stub is empty
    """

    items: tuple[int, ...]
    burned: tuple[int, ...] = ()
    drawn: int = 0

    def take(self) -> tuple[int, Stub]:
        """The top item and the stub without it."""
        if not self.items:
            raise DeckExhausted("the stub is empty")
        return self.items[0], replace(self, items=self.items[1:], drawn=self.drawn + 1)

    def burn(self) -> tuple[int, Stub]:
        """Burn the top item."""
        item, stub = self.take()
        return item, replace(stub, burned=(*stub.burned, item))

    def reshuffle(self, order: Sequence[int]) -> Stub:
        """Shuffle the burned items into the stub: stub and burns sorted by their place in
        ``order`` (RULES 10.4)."""
        rank = {item: place for place, item in enumerate(order)}
        return replace(self, items=tuple(sorted((*self.items, *self.burned),
                                                key=rank.__getitem__)), burned=())


@dataclass(frozen=True, slots=True, kw_only=True)
class Drawn:
    """One draw: its number, street, receiver (a seat, 0 for the community card,
    :data:`BURN_SEAT` for a burn), face, and the item the stub gave."""

    draw: int
    street: Street
    seat: int
    up: bool
    item: int

    def __repr__(self) -> str:  # an item may be a secret card: never in a repr
        return f"Drawn(draw={self.draw}, street={int(self.street)}, seat={self.seat})"


def deal_street(stub: Stub, plan: DealPlan, reshuffle_order: Sequence[int]
                ) -> tuple[tuple[Drawn, ...], Stub]:
    """The draws of ``plan`` from ``stub`` (the burn first, if any) and the stub after them.

    >>> from rules.dealing import DealSlot
    >>> plan = DealPlan(street=Street.FOURTH, slots=(DealSlot(seat=2, up=True),), burn=True)
    >>> draws, rest = deal_street(Stub((5, 6, 7), drawn=21), plan, ())
    >>> [(d.draw, d.seat, d.item) for d in draws], rest.items
    ([(21, -1, 5), (22, 2, 6)], (7,))
    """
    if plan.reshuffle_burns:
        stub = stub.reshuffle(reshuffle_order)
    out: list[Drawn] = []
    if plan.burn:
        draw = stub.drawn
        item, stub = stub.burn()
        out.append(Drawn(draw=draw, street=plan.street, seat=BURN_SEAT, up=False, item=item))
    for slot in plan.slots:
        draw = stub.drawn
        item, stub = stub.take()
        out.append(Drawn(draw=draw, street=plan.street, seat=slot.seat, up=slot.up, item=item))
    return tuple(out), stub


def deal_hand(plans: Iterable[DealPlan], items: Sequence[int], reshuffle_order: Sequence[int]
              ) -> tuple[Drawn, ...]:
    """Every draw of a hand dealt by ``plans`` from a deck whose items are ``items``, top
    first: for a player, ``items`` are the deck positions in dealing order and each draw's
    ``item`` is the position its card was committed at."""
    stub = Stub(tuple(items))
    out: list[Drawn] = []
    for plan in plans:
        draws, stub = deal_street(stub, plan, reshuffle_order)
        out.extend(draws)
    return tuple(out)


_ANY: Final = DECK[0]
"""A placeholder card in an expected event (only the event's kind, seat and street count)."""
_DEAL_EVENTS: Final = (BurnsReshuffled, CardBurned, DownCardDealt, UpCardDealt,
                       CommunityCardDealt)


def hand_plans(events: Iterable[Event], burn_cards: bool) -> tuple[DealPlan, ...]:
    """The streets a hand's public record dealt (its events from ``HandStarted`` on), each
    checked against the public deal rule; raises :class:`DealRuleBroken` at the first event
    that departs from it. ``burn_cards`` is the table's option.

    >>> from rules.cards import parse_cards
    >>> up = parse_cards("Ah Kd")
    >>> third = [DownCardDealt(seat=s, street=Street.THIRD) for s in (1, 2, 1, 2)]
    >>> third += [UpCardDealt(seat=s, street=Street.THIRD, card=c) for s, c in zip((1, 2), up)]
    >>> [p.street for p in hand_plans([HandStarted(hand_number=1, seats=(1, 2)), *third],
    ...                               burn_cards=False)]
    [<Street.THIRD: 3>]
    >>> hand_plans([HandStarted(hand_number=1, seats=(1, 2)), *third[1:]], burn_cards=False)
    Traceback (most recent call last):
    ...
    rules.draws.DealRuleBroken: 3rd street, draw 0: the rule deals a down card to seat 1
    """
    dealt_in: tuple[int, ...] = ()
    folded: set[int] = set()
    exposed_seats: set[int] = set()
    street: Street | None = None
    # Cards dealt, burns so far, and burned cards not yet shuffled back (as the rules count
    # them: the stub is the deck less ``dealt`` and ``burned``).
    dealt = burns = burned = 0
    plans: list[DealPlan] = []
    queue = list(events)
    i = 0
    while i < len(queue):
        event = queue[i]
        if isinstance(event, HandStarted):
            dealt_in = event.seats
        elif isinstance(event, Folded):
            folded.add(event.seat)
        elif isinstance(event, HandExposed):
            exposed_seats.add(event.seat)
        if not isinstance(event, _DEAL_EVENTS):
            i += 1
            continue
        nxt = Street.THIRD if street is None else street.next()
        if nxt is None:
            raise DealRuleBroken("a card is dealt after 7th street")
        still_in = tuple(s for s in dealt_in if s not in folded)
        exposed = bool(still_in) and all(s in exposed_seats for s in still_in)
        plan = street_plan(nxt, dealt_in, still_in, exposed=exposed,
                           stub=DECK_SIZE - dealt - burned, burned=burned,
                           burn_cards=burn_cards)
        expected = _expected_events(plan)
        pending = queue[i:i + len(expected)]
        draw = dealt + burns
        for want, got in zip(expected, [*pending, *([None] * len(expected))], strict=False):
            if not _matches(want, got):
                raise DealRuleBroken(f"{plan.street.label}, draw {draw}: the rule "
                                     f"{_describe(want)}")
            if not isinstance(want, BurnsReshuffled):
                draw += 1
        if plan.reshuffle_burns:
            burned = 0
        if plan.burn:
            burns += 1
            burned += 1
        dealt += len(plan.slots)
        street = plan.street
        plans.append(plan)
        i += len(expected)
    return tuple(plans)


def _expected_events(plan: DealPlan) -> list[Event]:
    out: list[Event] = []
    if plan.reshuffle_burns:
        out.append(BurnsReshuffled(count=0))
    if plan.burn:
        out.append(CardBurned())
    for slot in plan.slots:
        if slot.seat == 0:
            out.append(CommunityCardDealt(card=_ANY))
        elif slot.up:
            out.append(UpCardDealt(seat=slot.seat, street=plan.street, card=_ANY))
        else:
            out.append(DownCardDealt(seat=slot.seat, street=plan.street))
    return out


def _matches(want: Event, got: Event | None) -> bool:
    if got is None or type(want) is not type(got):
        return False
    if isinstance(want, DownCardDealt | UpCardDealt):
        assert isinstance(got, DownCardDealt | UpCardDealt)
        return (want.seat, want.street) == (got.seat, got.street)
    return True


def _describe(want: Event) -> str:
    match want:
        case BurnsReshuffled():
            return "shuffles the burned cards back in"
        case CardBurned():
            return "burns a card"
        case CommunityCardDealt():
            return "deals the community card"
        case UpCardDealt(seat=seat):
            return f"deals an up card to seat {seat}"
        case DownCardDealt(seat=seat):
            return f"deals a down card to seat {seat}"
        case _:  # pragma: no cover - _expected_events makes no other event
            return "deals something else"
