"""Properties of the per-card commitment: every opening verifies, every change is caught."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from studkit.cardproof import CardOpening, FairDeck, deal_order

decks = st.builds(
    lambda base, salts, seed: FairDeck(table_id="t1", hand_number=3, base=tuple(base),
                                       salts=tuple(salts), dealer_seed=seed),
    st.permutations(list(range(52))),
    st.lists(st.binary(min_size=32, max_size=32), min_size=52, max_size=52),
    st.binary(min_size=32, max_size=32))
positions = st.integers(0, 51)


@given(decks, positions)
def test_every_opening_verifies(deck: FairDeck, position: int) -> None:
    """The opening of any position proves that position's card under the root."""
    opening = deck.opening(position)
    assert opening.card == deck.base[position] and opening.opens(deck.root())


@given(decks, positions, st.integers(0, 51), positions, st.binary(min_size=32, max_size=32))
def test_a_changed_card_salt_or_position_never_verifies(deck: FairDeck, position: int,
                                                         card: int, other: int,
                                                         salt: bytes) -> None:
    """Another card, salt or position under the same path fails."""
    good = deck.opening(position)
    root = deck.root()
    if card != good.card:
        assert not CardOpening(position=position, card=card, salt=good.salt,
                               path=good.path).opens(root)
    if salt != good.salt:
        assert not CardOpening(position=position, card=good.card, salt=salt,
                               path=good.path).opens(root)
    if other != position:
        assert not CardOpening(position=other, card=good.card, salt=good.salt,
                               path=good.path).opens(root)


@given(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32),
       st.binary(min_size=32, max_size=32))
def test_a_changed_seed_changes_the_order(dealer: bytes, seed: bytes, other: bytes) -> None:
    """Any change of one player's seed gives another deal order."""
    if seed != other:
        assert deal_order("t1", 1, dealer, [("p1", seed)]) != deal_order(
            "t1", 1, dealer, [("p1", other)])
