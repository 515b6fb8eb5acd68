"""The per-card commitment scheme (studkit.cardproof): Merkle proofs, seeds, the deal order."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from rules import DECK_SIZE
from studkit.cardproof import (
    CardOpening,
    DealHeader,
    FairDeck,
    MerkleTree,
    deal_order,
    derive_permutation,
    leaf,
    merkle_path,
    merkle_root,
    root_from_path,
    seed_commitment,
    shuffle_key,
)


def deck(rng: random.Random) -> FairDeck:
    base = list(range(52))
    rng.shuffle(base)
    return FairDeck(table_id="t1", hand_number=7, base=tuple(base),
                    salts=tuple(rng.randbytes(32) for _ in range(52)),
                    dealer_seed=rng.randbytes(32))


class TestMerkle:
    def test_every_path_of_every_size_leads_to_the_root(self) -> None:
        """For 1..52 leaves, each leaf's path leads to the tree's root, and to no root from
        another index."""
        for size in range(1, 53):
            leaves = [bytes([i]) * 32 for i in range(size)]
            root = merkle_root(leaves)
            for i in range(size):
                path = merkle_path(leaves, i)
                assert root_from_path(leaves[i], i, size, path) == root
                if size > 1:
                    assert root_from_path(leaves[i], (i + 1) % size, size, path) != root

    def test_the_tree_made_once_gives_every_root_and_path(self) -> None:
        """MerkleTree (a dealer's, made once per hand): for 1..64 leaves the root and each
        path are merkle_root's and merkle_path's, byte for byte."""
        rng = random.Random(5)
        for size in range(1, 65):
            leaves = [rng.randbytes(32) for _ in range(size)]
            tree = MerkleTree(leaves)
            assert tree.root == merkle_root(leaves)
            assert [tree.path(i) for i in range(size)] == [merkle_path(leaves, i)
                                                           for i in range(size)]
            for wrong in (-1, size):
                with pytest.raises(ValueError):
                    tree.path(wrong)
        with pytest.raises(ValueError):
            MerkleTree([])

    def test_a_path_is_at_most_six_hashes(self) -> None:
        """52 leaves: no path is longer than six siblings."""
        leaves = [bytes([i]) * 32 for i in range(52)]
        assert max(len(merkle_path(leaves, i)) for i in range(52)) == 6

    def test_a_malformed_path_leads_nowhere(self) -> None:
        """Too short, too long or with a short hash: no root."""
        leaves = [bytes([i]) * 32 for i in range(52)]
        path = merkle_path(leaves, 5)
        assert root_from_path(leaves[5], 5, 52, path[:-1]) is None
        assert root_from_path(leaves[5], 5, 52, (*path, path[0])) is None
        assert root_from_path(leaves[5], 5, 52, (b"x", *path[1:])) is None
        assert root_from_path(leaves[5], 52, 52, path) is None


class TestOpenings:
    def test_every_card_opens_under_the_root(self) -> None:
        """Each position's opening proves its card under the deck's root."""
        d = deck(random.Random(1))
        root = d.root()
        leaves = d.leaves()
        for position in range(52):
            opening = d.opening(position, leaves)
            assert opening.card == d.base[position]
            assert opening.opens(root)

    @pytest.mark.parametrize("change", ["card", "salt", "position", "path", "root"])
    def test_any_change_is_detected(self, change: str) -> None:
        """A changed card, salt, position, path or root does not open."""
        d = deck(random.Random(2))
        root = d.root()
        good = d.opening(10)
        bad = {
            "card": CardOpening(position=10, card=(good.card + 1) % 52, salt=good.salt,
                                path=good.path),
            "salt": CardOpening(position=10, card=good.card, salt=bytes(32), path=good.path),
            "position": CardOpening(position=11, card=good.card, salt=good.salt,
                                    path=good.path),
            "path": CardOpening(position=10, card=good.card, salt=good.salt,
                                path=(bytes(32), *good.path[1:])),
            "root": good,
        }[change]
        assert not bad.opens(root if change != "root" else deck(random.Random(3)).root())

    def test_an_opening_holds_no_other_salt_nor_card(self) -> None:
        """What a player receives for one card (its salt and six sibling hashes) holds no
        other position's salt, and no guess of another card with any salt in it gives a
        sibling: the siblings are salted hashes of cards the player never sees."""
        d = deck(random.Random(4))
        opening = d.opening(0)
        blob = opening.salt + b"".join(opening.path)
        for position in range(1, 52):
            assert d.salts[position] not in blob
        siblings = set(opening.path)
        for position, card in itertools.product(range(52), range(52)):
            assert leaf(position, card, opening.salt) not in siblings or (
                position == 0 and card == opening.card)

    def test_the_repr_shows_no_card(self) -> None:
        """An opening prints its position only, a deck its table and hand only."""
        d = deck(random.Random(5))
        assert repr(d.opening(3)) == "CardOpening(position=3)"
        assert repr(d) == "FairDeck(table_id='t1', hand_number=7)"


class TestSeeds:
    def test_a_seed_commitment_binds_table_hand_and_player(self) -> None:
        """The same seed commits differently for another table, hand or player."""
        seed = bytes(range(32))
        c = seed_commitment("t1", 1, "alice", seed)
        assert len({c, seed_commitment("t2", 1, "alice", seed),
                    seed_commitment("t1", 2, "alice", seed),
                    seed_commitment("t1", 1, "bob", seed)}) == 4

    def test_the_header_binds_every_part(self) -> None:
        """Changing the root, the dealer's seed commitment or any seed commitment changes the
        card commitment."""
        d = deck(random.Random(6))
        header = d.header([("alice", "a" * 64), ("bob", "b" * 64)])
        others = [
            DealHeader(table_id="t1", hand_number=7, root="0" * 64,
                       dealer_seed=header.dealer_seed, seeds=header.seeds),
            DealHeader(table_id="t1", hand_number=7, root=header.root,
                       dealer_seed="0" * 64, seeds=header.seeds),
            d.header([("alice", "a" * 64), ("bob", "c" * 64)]),
            d.header([("alice", "a" * 64)]),
            d.header([]),
        ]
        assert len({header.commitment, *(h.commitment for h in others)}) == 6

    def test_a_header_refuses_unordered_or_malformed_seeds(self) -> None:
        """Seed commitments are one per player, in player order, and hex."""
        with pytest.raises(ValueError, match="player order"):
            DealHeader(table_id="t", hand_number=1, root="0" * 64, dealer_seed="0" * 64,
                       seeds=(("b", "0" * 64), ("a", "0" * 64)))
        with pytest.raises(ValueError, match="hex"):
            DealHeader(table_id="t", hand_number=1, root="0" * 64, dealer_seed="0" * 64,
                       seeds=(("a", "0" * 63),))


class TestDealOrder:
    def test_the_order_is_a_permutation_fixed_by_the_seeds(self) -> None:
        """Both permutations hold each position once; the same seeds give the same order."""
        one = deal_order("t1", 1, bytes(32), [("alice", bytes(32))])
        assert sorted(one.deal) == sorted(one.reshuffle) == list(range(DECK_SIZE))
        assert one == deal_order("t1", 1, bytes(32), [("alice", bytes(32))])
        assert one.deal != one.reshuffle

    def test_any_one_seed_changes_the_order(self) -> None:
        """Another dealer seed, another player's seed, a withheld seed or a seed moved to
        another player each give another order."""
        a, b = bytes(32), bytes([1]) * 32
        base = deal_order("t1", 1, a, [("alice", a), ("bob", b)]).deal
        assert base != deal_order("t1", 1, b, [("alice", a), ("bob", b)]).deal
        assert base != deal_order("t1", 1, a, [("alice", a), ("bob", a)]).deal
        assert base != deal_order("t1", 1, a, [("alice", a), ("bob", None)]).deal
        assert base != deal_order("t1", 1, a, [("alice", b), ("bob", a)]).deal

    def test_seed_order_does_not_matter(self) -> None:
        """Seeds are taken in player order whatever order they are given in."""
        a, b = bytes(32), bytes([1]) * 32
        assert shuffle_key("t", 1, a, [("bob", b), ("alice", a)]) == shuffle_key(
            "t", 1, a, [("alice", a), ("bob", b)])

    def test_the_derived_order_is_the_specified_one(self) -> None:
        """Known answers (docs/dealer.md's Fisher-Yates over the SHA-256 stream, as first
        implemented): one deal order, and a digest of 3,600 permutations of several sizes,
        so a faster derivation can never deal another order."""
        order = deal_order("t1", 7, bytes(range(32)), [("bob", None), ("ann", bytes(32))])
        assert order.deal[:12] == (9, 35, 30, 36, 37, 22, 44, 1, 12, 20, 50, 18)
        assert order.reshuffle[-5:] == (34, 51, 1, 4, 15)
        digest = hashlib.sha256()
        for i in range(300):
            for size in (1, 2, 3, 13, 52, 60):
                for label in (b"deal", b"reshuffle"):
                    digest.update(bytes(derive_permutation(i.to_bytes(8, "big"), label, size)))
        assert digest.hexdigest() == (
            "b03e1dd2e59bb6bf58b7d6790ac9eeaa8d4a0d429c908856aac1dee65e932939")

    def test_the_derived_order_is_uniform_enough(self) -> None:
        """Over 3,000 keys, each position is dealt first about equally often (a chi-square
        far below its 1e-6 quantile for 51 degrees of freedom, about 120)."""
        counts = [0] * 52
        trials = 3_000
        for i in range(trials):
            counts[derive_permutation(i.to_bytes(8, "big"), b"deal")[0]] += 1
        expected = trials / 52
        chi2 = sum((c - expected) ** 2 / expected for c in counts)
        assert chi2 < 120
