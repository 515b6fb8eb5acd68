"""Who gets the next cards, face up or down, and when the deck runs short (RULES §4, §10).

The rules never draw cards: :func:`deal_plan` (for a table: ``rules.pending_deal(state)``)
says what the dealer must deliver next and ``DealStreet`` brings the cards in as data."""

from __future__ import annotations

from dataclasses import dataclass

from rules.config import TableConfig
from rules.state import HandState, Phase
from rules.streets import Street, card_is_up

DECK_SIZE = 52


@dataclass(frozen=True, slots=True, kw_only=True)
class DealSlot:
    """One card to deal: to ``seat`` (0 = the community card), face up or down."""

    seat: int
    up: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DealPlan:
    """The cards of the next street, in dealing order."""

    street: Street
    slots: tuple[DealSlot, ...]
    burn: bool = False
    reshuffle_burns: bool = False
    """Shuffle the burned cards into the stub before burning and dealing (RULES 10.4)."""

    @property
    def community(self) -> bool:
        """Whether this deal is one community card (RULES 10.2)."""
        return any(s.seat == 0 for s in self.slots)


def stub_size(hand: HandState) -> int:
    """Cards left in the deck."""
    return DECK_SIZE - hand.dealt - hand.burned


def deal_plan(hand: HandState, config: TableConfig) -> DealPlan | None:
    """What must be dealt next, or None when the hand is not waiting for cards.

    In an all-in runout every card is dealt face up: the hands are already exposed.
    """
    if hand.phase != Phase.DEALING:
        return None
    street = Street.THIRD if hand.street is None else hand.street.next()
    assert street is not None
    if street == Street.THIRD:
        seats = [p.seat for p in hand.players]
        slots = tuple(
            DealSlot(seat=s, up=card_is_up(street, pass_number))
            for pass_number in range(3)
            for s in seats
        )
        return DealPlan(street=street, slots=slots)
    seats = [p.seat for p in hand.players if not p.folded]
    up = card_is_up(street) or hand.exposed
    burn = config.burn_cards
    if street != Street.SEVENTH:
        return DealPlan(street=street, slots=tuple(DealSlot(seat=s, up=up) for s in seats),
                        burn=burn)
    need = len(seats) + (1 if burn else 0)
    stub = stub_size(hand)
    reshuffle = False
    if stub < need and burn:
        reshuffle = True
        stub += hand.burned
    if stub >= need:
        return DealPlan(street=street, slots=tuple(DealSlot(seat=s, up=up) for s in seats),
                        burn=burn, reshuffle_burns=reshuffle)
    return DealPlan(street=street, slots=(DealSlot(seat=0, up=True),), burn=burn,
                    reshuffle_burns=reshuffle)
