"""What the dealer deals next from a hand's deck for a :class:`rules.DealPlan`, and who got which
card, as pure functions. The deck itself, the draws and the replay that both the dealer and an
auditor use are in :mod:`studkit.deckproof`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rules import DealPlan, draws
from studkit.deckproof import DeckInconsistent, Draw, HandDeck, StreetDeal, replay


def deal_street(deck: HandDeck, deals: Sequence[StreetDeal], plan: DealPlan) -> StreetDeal:
    """The cards for ``plan`` after the recorded ``deals`` (the public deal rule,
    :func:`rules.draws.deal_street`, over the deck's cards)."""
    try:
        drawn, _rest = draws.deal_street(replay(deck, deals), plan, deck.reshuffle_key)
    except draws.DeckExhausted:
        raise DeckInconsistent("the stub is empty") from None
    burn = next((d for d in drawn if d.seat == draws.BURN_SEAT), None)
    return StreetDeal(
        street=plan.street,
        cards=tuple(Draw(index=d.draw, card=d.item, seat=d.seat, up=d.up)
                    for d in drawn if d.seat != draws.BURN_SEAT),
        burn=None if burn is None else burn.item,
        burn_index=None if burn is None else burn.draw,
        reshuffled=plan.reshuffle_burns)


def seat_draws(deals: Iterable[StreetDeal], seat: int) -> tuple[Draw, ...]:
    """Every card dealt to ``seat``, in dealing order."""
    return tuple(d for deal in deals for d in deal.cards if d.seat == seat)


def down_cards(deals: Iterable[StreetDeal], seat: int) -> tuple[int, ...]:
    """The face-down cards of ``seat``, in dealing order."""
    return tuple(d.card for d in seat_draws(deals, seat) if not d.up)
