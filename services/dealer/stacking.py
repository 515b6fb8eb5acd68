"""TEST ONLY: deck orders queued for given hands, so that tests can play known hands (RULES
§16) through the whole stack. Enabled only by ``DEALER_STACKED_DECKS=1`` together with
``STUD_ENV=test`` (:mod:`dealer.config` refuses it otherwise); a dealer without it has no
:class:`StackedDecks` at all and its shuffles are always the CSPRNG's."""

from __future__ import annotations

from collections.abc import Sequence

from rules import DECK, Card


def full_order(prefix: Sequence[Card]) -> tuple[int, ...]:
    """The deck order (card indices, top first) that starts with ``prefix`` and goes on with
    the remaining cards in rank-major order.

    >>> from rules import parse_cards
    >>> full_order(parse_cards("As 2c"))[:3]
    (51, 0, 1)
    """
    indices = [card.index for card in prefix]
    if len(set(indices)) != len(indices):
        raise ValueError("a card is stacked twice")
    chosen = set(indices)
    return (*indices, *(card.index for card in DECK if card.index not in chosen))


class StackedDecks:
    """Queued deck orders by (table, hand)."""

    def __init__(self) -> None:
        self._orders: dict[tuple[str, int], tuple[int, ...]] = {}

    def put(self, table_id: str, hand_number: int, order: tuple[int, ...]) -> None:
        """The next StartHand of ``table_id``'s hand ``hand_number`` deals ``order``."""
        self._orders[(table_id, hand_number)] = order

    def take(self, table_id: str, hand_number: int) -> tuple[int, ...] | None:
        """The queued order of that hand, if any (consumed)."""
        return self._orders.pop((table_id, hand_number), None)
