"""The shuffle: Fisher–Yates is a bijection from draw sequences to orders, and the orders the
CSPRNG produces look uniform to chi-square tests at a strict significance level.

The statistical tests only observe ``shuffled()``: nothing seeds the CSPRNG. Critical values
come from the Wilson–Hilferty approximation (no scipy); the level is 1e-6 on each side with
thousands of degrees of freedom, so a correct shuffle fails about once in 250,000 runs.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from statistics import NormalDist

import pytest

from dealer.shuffle import (
    card_salts,
    fisher_yates_draws,
    new_salt,
    permutation_from_draws,
    shuffled,
)
from rules import DECK_SIZE
from studkit.cardproof import SALT_BYTES as CARD_SALT_BYTES
from studkit.deckproof import SALT_BYTES

SHUFFLES = 40_000
ALPHA = 1e-6


def chi2_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of chi-square with ``df`` degrees of freedom (Wilson–Hilferty)."""
    z = NormalDist().inv_cdf(p)
    h = 2.0 / (9.0 * df)
    return df * (1.0 - h + z * math.sqrt(h)) ** 3


def assert_chi2_plausible(statistic: float, df: int) -> None:
    low, high = chi2_quantile(ALPHA, df), chi2_quantile(1.0 - ALPHA, df)
    assert low < statistic < high, f"chi-square {statistic:.1f} outside ({low:.1f}, {high:.1f})"


@pytest.fixture(scope="module")
def decks() -> list[tuple[int, ...]]:
    return [shuffled() for _ in range(SHUFFLES)]


class TestFisherYates:
    @pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 6])
    def test_every_draw_sequence_gives_a_different_order(self, size: int) -> None:
        """All draw sequences map to distinct permutations: each order has exactly one way
        to be drawn, so uniform draws give uniform orders."""
        ranges = [range(top + 1) for top in range(size - 1, 0, -1)]
        orders = {permutation_from_draws(size, draws) for draws in itertools.product(*ranges)}
        assert len(orders) == math.factorial(size)
        assert all(sorted(order) == list(range(size)) for order in orders)

    def test_refuses_a_draw_out_of_range(self) -> None:
        """A draw outside [0, top] is an error, not silently reduced."""
        with pytest.raises(ValueError):
            permutation_from_draws(3, (3, 0))
        with pytest.raises(ValueError):
            permutation_from_draws(3, (0,))

    def test_draws_are_within_their_ranges(self) -> None:
        """The k-th CSPRNG draw lies in [0, size - 1 - k]."""
        for _ in range(200):
            draws = fisher_yates_draws(DECK_SIZE)
            assert len(draws) == DECK_SIZE - 1
            assert all(0 <= d <= DECK_SIZE - 1 - k for k, d in enumerate(draws))

    def test_a_word_past_the_last_whole_range_is_rejected_not_reduced(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The draws come from 64-bit CSPRNG words (one read a shuffle): a word at or above
        ``2**64 - 2**64 % n`` would favour the low draws if reduced, so it is skipped and the
        next word taken (2**64 % 52 == 16)."""
        words = [2**64 - 1, 2**64 - 16, 53] + [0] * 60
        reads: list[int] = []

        def token_bytes(n: int) -> bytes:
            reads.append(n)
            return b"".join(w.to_bytes(8, "big") for w in words[:n // 8])

        monkeypatch.setattr("dealer.shuffle.secrets.token_bytes", token_bytes)
        draws = fisher_yates_draws(DECK_SIZE)
        assert draws[0] == 53 % 52 and draws[1:] == (0,) * (DECK_SIZE - 2)
        assert len(reads) == 1
        assert 2**64 % 52 == 16

    def test_the_card_salts_are_distinct_and_whole(self) -> None:
        """One read cut in 52 salts of 32 bytes."""
        salts = card_salts()
        assert len(salts) == DECK_SIZE and {len(s) for s in salts} == {CARD_SALT_BYTES}
        assert len(set(salts)) == DECK_SIZE

    def test_a_shuffle_is_a_permutation_of_the_deck(self) -> None:
        """Every shuffled deck holds each of the 52 cards once."""
        assert sorted(shuffled()) == list(range(DECK_SIZE))


class TestUniformity:
    def test_each_card_is_equally_likely_at_each_position(
        self, decks: list[tuple[int, ...]]
    ) -> None:
        """The 52 x 52 table of (card, position) counts passes chi-square.

        For uniform permutations the Pearson statistic over the table is asymptotically
        n/(n-1) times chi-square with (n-1)^2 degrees of freedom (the covariance of a random
        permutation matrix is (P (x) P)/(n-1), P the centring projection), so it is scaled by
        (n-1)/n before the comparison."""
        n = DECK_SIZE
        counts = [[0] * n for _ in range(n)]
        for deck in decks:
            for position, card in enumerate(deck):
                counts[card][position] += 1
        expected = len(decks) / n
        pearson = sum((o - expected) ** 2 / expected for row in counts for o in row)
        assert_chi2_plausible(pearson * (n - 1) / n, (n - 1) ** 2)

    def test_the_first_two_cards_are_an_equally_likely_ordered_pair(
        self, decks: list[tuple[int, ...]]
    ) -> None:
        """The (top card, second card) pairs, 52 x 51 equally likely outcomes, pass
        chi-square: the cards are not correlated with their neighbours."""
        pairs = Counter((deck[0], deck[1]) for deck in decks)
        cells = DECK_SIZE * (DECK_SIZE - 1)
        expected = len(decks) / cells
        observed = [pairs.get((a, b), 0) for a in range(DECK_SIZE) for b in range(DECK_SIZE)
                    if a != b]
        pearson = sum((o - expected) ** 2 / expected for o in observed)
        assert_chi2_plausible(pearson, cells - 1)

    def test_a_biased_shuffle_fails_the_position_test(self) -> None:
        """The test has teeth: the classic naive shuffle (swap each card with any card),
        whose bias is well known, fails it."""
        import secrets

        n = DECK_SIZE
        shuffles = 10_000
        counts = [[0] * n for _ in range(n)]
        for _ in range(shuffles):
            deck = list(range(n))
            for i in range(n):
                j = secrets.randbelow(n)
                deck[i], deck[j] = deck[j], deck[i]
            for position, card in enumerate(deck):
                counts[card][position] += 1
        expected = shuffles / n
        pearson = sum((o - expected) ** 2 / expected for row in counts for o in row)
        assert pearson * (n - 1) / n > chi2_quantile(1 - ALPHA, (n - 1) ** 2)


class TestSalt:
    def test_salts_are_fresh_32_byte_values(self) -> None:
        """Each salt is 32 bytes and no two are alike."""
        salts = {new_salt() for _ in range(100)}
        assert len(salts) == 100 and all(len(s) == SALT_BYTES for s in salts)
