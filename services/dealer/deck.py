"""What the dealer deals next from a hand's deck for a :class:`rules.DealPlan`, and who got which
card, as pure functions. The deck itself, the draws and the replay that both the dealer and an
auditor use are in :mod:`studkit.deckproof`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rules import DealPlan
from studkit.deckproof import Draw, HandDeck, StreetDeal, replay


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
