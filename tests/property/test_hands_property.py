"""The table-driven hand evaluator against a slow reference that tries all 21 five-card
choices (RULES.md 12 and 13)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rules import DECK, Card, best_high, best_low, board_value

# The reference is slow (21 choices per hand) but so is nothing else here: ask for more
# examples than the default profile, without lowering a longer profile's count.
EXAMPLES = max(300, settings().max_examples)


@st.composite
def narrow_hands(draw: st.DrawFn) -> list[Card]:
    """5-7 cards from a few neighbouring ranks and suits: straights, flushes, sets, quads."""
    lowest = draw(st.integers(2, 10))
    ranks = range(lowest, min(lowest + draw(st.integers(3, 6)), 15))
    suits = draw(st.sets(st.integers(0, 3), min_size=1, max_size=4))
    pool = [c for c in DECK if c.rank in ranks or (c.rank == 14 and lowest <= 3)]
    pool = [c for c in pool if c.suit.order in suits] or pool
    size = min(draw(st.integers(5, 7)), len(pool))
    if size < 5:
        pool = list(DECK)
        size = 5
    return draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size, unique=True))


hands = st.one_of(
    st.lists(st.sampled_from(DECK), min_size=5, max_size=7, unique=True),
    narrow_hands(),
)


def reference_high(five: Sequence[Card]) -> tuple[int, ...]:
    """Category number (8 straight flush .. 0 high card) then the ranks that decide ties."""
    ranks = sorted((c.rank for c in five), reverse=True)
    groups = sorted(((n, r) for r, n in Counter(ranks).items()), reverse=True)
    group_ranks = tuple(r for _, r in groups)
    shape = [n for n, _ in groups]
    flush = len({c.suit for c in five}) == 1
    top = 0
    if len(set(ranks)) == 5 and ranks[0] - ranks[4] == 4:
        top = ranks[0]
    elif ranks == [14, 5, 4, 3, 2]:
        top = 5
    if top and flush:
        return (8, top)
    if shape == [4, 1]:
        return (7, *group_ranks)
    if shape == [3, 2]:
        return (6, *group_ranks)
    if flush:
        return (5, *ranks)
    if top:
        return (4, top)
    if shape[0] == 3:
        return (3, *group_ranks)
    if shape[:2] == [2, 2]:
        return (2, *group_ranks)
    if shape[0] == 2:
        return (1, *group_ranks)
    return (0, *ranks)


def reference_low(five: Sequence[Card]) -> tuple[int, ...] | None:
    """The five ranks highest first (ace 1) if they make a low, else None; smaller is better."""
    ranks = sorted((1 if c.rank == 14 else c.rank for c in five), reverse=True)
    if len(set(ranks)) == 5 and ranks[0] <= 8:
        return tuple(ranks)
    return None


def best_reference_high(cards: Sequence[Card]) -> tuple[int, ...]:
    return max(reference_high(five) for five in combinations(cards, 5))


def best_reference_low(cards: Sequence[Card]) -> tuple[int, ...] | None:
    lows = [low for five in combinations(cards, 5) if (low := reference_low(five)) is not None]
    return min(lows, default=None)


def sign(a: Any, b: Any) -> int:
    """-1, 0 or 1 as ``a`` is less than, equal to or greater than ``b``."""
    return int(a > b) - int(a < b)


class TestHighAgainstReference:
    @settings(max_examples=EXAMPLES)
    @given(hands)
    def test_category_and_cards_are_a_best_hand(self, cards: list[Card]) -> None:
        """The category is the best one and the five cards shown make the best hand."""
        value = best_high(cards)
        best = best_reference_high(cards)
        assert value.category.strength == best[0]
        assert len(set(value.cards)) == 5
        assert set(value.cards) <= set(cards)
        assert reference_high(value.cards) == best

    @settings(max_examples=EXAMPLES)
    @given(hands, hands)
    def test_two_hands_compare_as_the_reference_says(
        self, first: list[Card], second: list[Card]
    ) -> None:
        """Better, equal and worse agree with the brute-force comparison."""
        ours = sign(best_high(first), best_high(second))
        assert ours == sign(best_reference_high(first), best_reference_high(second))

    @settings(max_examples=EXAMPLES)
    @given(hands, st.randoms(use_true_random=False))
    def test_order_of_the_cards_does_not_matter(
        self, cards: list[Card], rng: random.Random
    ) -> None:
        """Shuffling the cards changes neither the high nor the low value."""
        shuffled = list(cards)
        rng.shuffle(shuffled)
        assert best_high(shuffled) == best_high(cards)
        assert best_low(shuffled) == best_low(cards)


class TestLowAgainstReference:
    @settings(max_examples=EXAMPLES)
    @given(hands)
    def test_low_qualifies_exactly_when_some_five_cards_do(self, cards: list[Card]) -> None:
        """A low exists iff some five cards qualify, and its five cards make the best low."""
        value = best_low(cards)
        best = best_reference_low(cards)
        if best is None:
            assert value is None
            return
        assert value is not None
        assert value.ranks == best
        assert set(value.cards) <= set(cards)
        assert reference_low(value.cards) == best

    @settings(max_examples=EXAMPLES)
    @given(hands, hands)
    def test_two_lows_compare_as_the_reference_says(
        self, first: list[Card], second: list[Card]
    ) -> None:
        """A better low (smaller ranks) compares greater; equal lows are equal."""
        ours, theirs = best_low(first), best_low(second)
        ref_first, ref_second = best_reference_low(first), best_reference_low(second)
        if ours is None or theirs is None:
            assert (ours is None, theirs is None) == (ref_first is None, ref_second is None)
            return
        assert sign(ours, theirs) == sign(ref_second, ref_first)


class TestBoardProperties:
    @settings(max_examples=EXAMPLES)
    @given(st.lists(st.sampled_from(DECK), max_size=4, unique=True), st.data())
    def test_board_value_depends_only_on_the_ranks(
        self, cards: list[Card], data: st.DataObject
    ) -> None:
        """Changing the suits or the order of the up cards never changes the board's value."""
        others = [
            data.draw(st.sampled_from([c for c in DECK if c.rank == card.rank])) for card in cards
        ]
        if len(set(others)) == len(others):
            assert board_value(others[::-1]) == board_value(cards)
