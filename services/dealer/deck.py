"""One hand's deck and the cards drawn from it, as pure values: what the dealer stores, what it
deals next for a :class:`rules.DealPlan`, and the replay that both the dealer and the audit use.

Cards are ``rules.Card.index`` values (0 = ``2c`` .. 51 = ``As``). ``order`` is the shuffled
deck, top card first. Every card taken from the deck (dealt or burned) gets the next *draw
number*, 0, 1, 2, ... for the whole hand. With burns on, the burned cards may be shuffled
back into the stub before 7th street (RULES 10.4); the new order of those cards is their order
in ``reshuffle_key``, a second random permutation fixed and committed at hand start, so the
whole hand is decided by committed data and can be replayed by an auditor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from rules import DealPlan, Street

DECK_SIZE = 52
COMMUNITY_SEAT = 0
"""The seat number of the community card (as in :class:`rules.DealSlot`)."""


class DeckInconsistent(RuntimeError):
    """Raised when stored draws do not follow from the stored deck (tampering or a bug); the
    dealer refuses to deal from such a hand."""


def is_permutation(cards: Sequence[int]) -> bool:
    """Whether ``cards`` holds each of the 52 card indexes exactly once."""
    return len(cards) == DECK_SIZE and set(cards) == set(range(DECK_SIZE))


@dataclass(frozen=True, slots=True, kw_only=True)
class HandDeck:
    """The secret of one hand, fixed at hand start."""

    table_id: str
    hand_number: int
    order: tuple[int, ...]
    """The shuffled deck, top card first."""
    reshuffle_key: tuple[int, ...]
    """Second permutation: the order of cards reshuffled into the stub (RULES 10.4)."""
    salt: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not is_permutation(self.order) or not is_permutation(self.reshuffle_key):
            raise ValueError("order and reshuffle_key must be permutations of the 52 cards")

    def __repr__(self) -> str:  # never print a deck by accident
        return f"HandDeck(table_id={self.table_id!r}, hand_number={self.hand_number})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Draw:
    """One card taken from the deck: its draw number, the card, and where it went (seat 0 =
    the community card)."""

    index: int
    card: int
    seat: int
    up: bool

    def __repr__(self) -> str:  # no card value in a repr
        return f"Draw(index={self.index}, seat={self.seat}, up={self.up})"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreetDeal:
    """The cards drawn for one street, as the dealer recorded them."""

    street: Street
    cards: tuple[Draw, ...]
    burn: int | None = None
    """The burned card (by index), if one was burned before the street."""
    burn_index: int | None = None
    reshuffled: bool = False

    def matches(self, plan: DealPlan) -> bool:
        """Whether this deal delivers exactly ``plan``."""
        return (
            self.street == plan.street
            and tuple((d.seat, d.up) for d in self.cards)
            == tuple((s.seat, s.up) for s in plan.slots)
            and (self.burn is not None) == plan.burn
            and self.reshuffled == plan.reshuffle_burns
        )

    def __repr__(self) -> str:
        return f"StreetDeal(street={int(self.street)}, cards={len(self.cards)})"


@dataclass(frozen=True, slots=True)
class Pile:
    """Where the deck stands: the stub (top first), the burned cards and the draws so far."""

    stub: tuple[int, ...]
    burned: tuple[int, ...] = ()
    drawn: int = 0

    def take(self) -> tuple[int, Pile]:
        """The top card and the pile without it."""
        if not self.stub:
            raise DeckInconsistent("the stub is empty")
        return self.stub[0], replace(self, stub=self.stub[1:], drawn=self.drawn + 1)

    def burn(self) -> tuple[int, Pile]:
        """Burn the top card."""
        card, pile = self.take()
        return card, replace(pile, burned=(*pile.burned, card))

    def reshuffle(self, key: Sequence[int]) -> Pile:
        """Shuffle the burned cards into the stub: stub and burns in ``key`` order."""
        rank = {card: position for position, card in enumerate(key)}
        return replace(self, stub=tuple(sorted((*self.stub, *self.burned), key=rank.__getitem__)),
                       burned=())


def fresh_pile(deck: HandDeck) -> Pile:
    """The pile before any card is drawn."""
    return Pile(stub=deck.order)


def replay(deck: HandDeck, deals: Iterable[StreetDeal]) -> Pile:
    """The pile after ``deals``, checking that each recorded card is the card the deck gives
    at that point; raises :class:`DeckInconsistent` otherwise."""
    pile = fresh_pile(deck)
    for deal in deals:
        if deal.reshuffled:
            pile = pile.reshuffle(deck.reshuffle_key)
        if deal.burn is not None:
            if deal.burn_index != pile.drawn:
                raise DeckInconsistent(f"{deal.street.label}: burn at the wrong draw")
            card, pile = pile.burn()
            if card != deal.burn:
                raise DeckInconsistent(f"{deal.street.label}: burned card differs from the deck")
        for draw in deal.cards:
            if draw.index != pile.drawn:
                raise DeckInconsistent(f"{deal.street.label}: draw {draw.index} out of order")
            card, pile = pile.take()
            if card != draw.card:
                raise DeckInconsistent(f"{deal.street.label}: draw {draw.index} differs "
                                       "from the deck")
    return pile


def deal_street(deck: HandDeck, deals: Sequence[StreetDeal], plan: DealPlan) -> StreetDeal:
    """The cards for ``plan`` after the recorded ``deals``."""
    pile = replay(deck, deals)
    if plan.reshuffle_burns:
        pile = pile.reshuffle(deck.reshuffle_key)
    burn: int | None = None
    burn_index: int | None = None
    if plan.burn:
        burn_index = pile.drawn
        burn, pile = pile.burn()
    draws = []
    for slot in plan.slots:
        index = pile.drawn
        card, pile = pile.take()
        draws.append(Draw(index=index, card=card, seat=slot.seat, up=slot.up))
    return StreetDeal(street=plan.street, cards=tuple(draws), burn=burn, burn_index=burn_index,
                      reshuffled=plan.reshuffle_burns)


def seat_draws(deals: Iterable[StreetDeal], seat: int) -> tuple[Draw, ...]:
    """Every card dealt to ``seat``, in dealing order."""
    return tuple(d for deal in deals for d in deal.cards if d.seat == seat)


def down_cards(deals: Iterable[StreetDeal], seat: int) -> tuple[int, ...]:
    """The face-down cards of ``seat``, in dealing order."""
    return tuple(d.card for d in seat_draws(deals, seat) if not d.up)
