"""The dealer's openings and headers come from a hand's Merkle tree made once
(``dealer.fair.card_opening``, ``deal_header``; issue 35): byte for byte what the scheme's own
``FairDeck.opening`` and ``FairDeck.header`` give, so every player's check is unchanged."""

from __future__ import annotations

import random

from dealer.fair import card_opening, deal_header
from studkit.cardproof import FairDeck


def deck(rng: random.Random, hand: int) -> FairDeck:
    base = list(range(52))
    rng.shuffle(base)
    return FairDeck(table_id="t1", hand_number=hand, base=tuple(base),
                    salts=tuple(rng.randbytes(32) for _ in range(52)),
                    dealer_seed=rng.randbytes(32))


def test_openings_and_headers_are_the_schemes_own() -> None:
    rng = random.Random(11)
    for hand in range(1, 6):
        d = deck(rng, hand)
        leaves = d.leaves()
        root = d.root()
        for card in range(52):
            opening = card_opening(d, card)
            assert opening == d.opening(d.position_of(card), leaves)
            assert opening.card == card and opening.opens(root)
        for seeds in ((), (("bob", "b" * 64), ("ann", "a" * 64))):
            assert deal_header(d, seeds) == d.header(seeds)
        again = FairDeck(table_id=d.table_id, hand_number=hand, base=d.base, salts=d.salts,
                         dealer_seed=d.dealer_seed)  # read again from the store: equal
        assert card_opening(again, d.base[0]) == d.opening(0)
