"""How a hand's cards are chosen and opened: the one seam between the dealer's use cases and
its deck. :class:`HonestDealing` is the only implementation in the service, and ``python -m
dealer`` always uses it; no setting chooses another (a test-only setting makes the process
refuse to start, :mod:`dealer.__main__`).

Whoever builds a :class:`~dealer.app.DealerApp` in process may pass another :class:`Dealing`:
the test support's rigged dealer (``studtest/rigged_dealer.py``: stacked decks for known
hands, and a deliberately dishonest dealer that the players' own checks must catch) does, and
no image contains it (``tests/unit/deploy/test_image_files.py``)."""

from __future__ import annotations

from typing import Final, Protocol

from dealer.store import StoredHand
from studkit.cardproof import CardOpening
from studkit.deckproof import Draw, HandDeck


class Dealing(Protocol):
    """What the dealer asks at each step where a rigged dealer would differ."""

    def stacked_order(self, table_id: str, hand_number: int) -> tuple[int, ...] | None:
        """A deck order to deal as it is (no card commitment), instead of a shuffle."""
        ...

    def dealing_deck(self, stored: StoredHand) -> HandDeck:
        """The deck the hand's streets are dealt from."""
        ...

    def opening(self, stored: StoredHand, draw: Draw, honest: CardOpening
                ) -> CardOpening | None:
        """The opening given to the player of a down card (``honest``: the committed one;
        None: none is given)."""
        ...

    def takes_seed(self, table_id: str, hand_number: int, player_id: str) -> bool:
        """Whether a seed opening that opens the player's commitment is taken."""
        ...


class HonestDealing:
    """The production dealer: shuffles every deck, deals the committed order and gives every
    opening as committed."""

    def stacked_order(self, table_id: str, hand_number: int) -> tuple[int, ...] | None:
        return None

    def dealing_deck(self, stored: StoredHand) -> HandDeck:
        return stored.dealing_deck()

    def opening(self, stored: StoredHand, draw: Draw, honest: CardOpening
                ) -> CardOpening | None:
        return honest

    def takes_seed(self, table_id: str, hand_number: int, player_id: str) -> bool:
        return True


HONEST: Final[Dealing] = HonestDealing()
