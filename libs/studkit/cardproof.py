"""The per-card commitment (scheme ``stud-hilo-cards-v2``), pure and free of I/O: salted card
leaves under a Merkle root, the seeds' commitments, the deal order derived from the seeds,
and the openings that prove one card without showing any other. docs/fairness.md says what it
proves; docs/dealer.md gives the exact encodings, repeated here.

Leaves and the root
-------------------

The dealer shuffles a *base deck* ``base`` (52 card indexes, ``2c`` = 0 .. ``As`` = 51) and
draws a 32-byte salt per position. Position ``i``'s leaf is
``SHA-256(0x00 | "stud-hilo-card-v2" | i | base[i] | salt[i])`` (``i`` and the card one byte
each). The tree over the 52 leaves is RFC 6962's (a node is ``SHA-256(0x01 | left | right)``;
a list of ``n`` leaves splits at the largest power of two below ``n``), so a path has at most
six hashes.

Seeds
-----

The dealer draws a 32-byte seed and publishes ``SHA-256("stud-hilo-dealer-seed-v2|" table "|"
hand "|" seed)``; a player's seed commitment is ``SHA-256("stud-hilo-seed-v2|" table "|" hand
"|" player "|" seed)``. The hand's *card commitment*, published in ``HandStarted`` before the
first card, is the hex SHA-256 of the ASCII text
``stud-hilo-deal-v2|<table>|<hand>|<root hex>|<dealer seed commitment hex>|<seeds>`` where
``<seeds>`` is ``player:commitment`` pairs in player order joined by ``,`` (empty without
seeds).

The deal order
--------------

The shuffle key is ``SHA-256("stud-hilo-shuffle-v2|" table "|" hand "|" <dealer seed hex> "|"
<openings>)``, ``<openings>`` being ``player:seed-hex`` (``player:-`` for a seed committed but
not opened in time) for every committed seed, in player order, joined by ``,``. Two
permutations of the 52 positions follow from it by Fisher–Yates driven by the byte stream
``SHA-256(key | label | counter)`` (counter 8 bytes big-endian, from 0), each draw below
``n`` an unsigned 64-bit big-endian integer, rejected when not below ``2**64 - 2**64 % n``:
``deal`` (label ``b"deal"``: the position dealt at each draw number) and ``reshuffle``
(``b"reshuffle"``: the order of RULES 10.4's reshuffle of the burned cards).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from rules.cards import DECK_SIZE

SCHEME: Final = "stud-hilo-cards-v2"
SALT_BYTES: Final = 32
"""A card's salt (256 bits: 52 possible cards are never guessable from a leaf)."""
SEED_BYTES: Final = 32
HASH_BYTES: Final = 32
MAX_PATH: Final = 6
"""The longest Merkle path of a 52-leaf tree."""
WITHHELD: Final = "-"

_LEAF: Final = b"\x00stud-hilo-card-v2"
_NODE: Final = b"\x01"


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _is_hex(text: str, size: int = HASH_BYTES) -> bool:
    if len(text) != 2 * size:
        return False
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return text == text.lower()


# --- leaves and the Merkle tree --------------------------------------------------------------


def leaf(position: int, card: int, salt: bytes) -> bytes:
    """The leaf of ``card`` at base position ``position`` with its salt."""
    if not 0 <= position < DECK_SIZE or not 0 <= card < DECK_SIZE:
        raise ValueError("position and card must be 0..51")
    if len(salt) != SALT_BYTES:
        raise ValueError(f"a card's salt is {SALT_BYTES} bytes")
    return _sha(_LEAF + bytes((position, card)) + salt)


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The RFC 6962 root of ``leaves`` (at least one)."""
    if not leaves:
        raise ValueError("no leaves")
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _sha(_NODE + merkle_root(leaves[:k]) + merkle_root(leaves[k:]))


def merkle_path(leaves: Sequence[bytes], index: int) -> tuple[bytes, ...]:
    """The audit path of leaf ``index``: sibling hashes from the leaf up to the root."""
    if not 0 <= index < len(leaves):
        raise ValueError("no such leaf")
    if len(leaves) == 1:
        return ()
    k = _split(len(leaves))
    if index < k:
        return (*merkle_path(leaves[:k], index), merkle_root(leaves[k:]))
    return (*merkle_path(leaves[k:], index - k), merkle_root(leaves[:k]))


class MerkleTree:
    """Every node of the RFC 6962 tree of ``leaves``, computed once: its :attr:`root` is
    :func:`merkle_root`'s and :meth:`path` is :func:`merkle_path`'s, without hashing the tree
    again for each path (a dealer gives each player the paths of their down cards)."""

    __slots__ = ("_nodes", "root", "size")

    def __init__(self, leaves: Sequence[bytes]) -> None:
        if not leaves:
            raise ValueError("no leaves")
        self.size = len(leaves)
        self._nodes: dict[tuple[int, int], bytes] = {}
        self.root: bytes = self._build(leaves, 0, len(leaves))

    def _build(self, leaves: Sequence[bytes], lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            node = leaves[lo]
        else:
            k = _split(hi - lo)
            node = _sha(_NODE + self._build(leaves, lo, lo + k) + self._build(leaves, lo + k, hi))
        self._nodes[(lo, hi)] = node
        return node

    def path(self, index: int) -> tuple[bytes, ...]:
        """The audit path of leaf ``index``, as :func:`merkle_path` gives it."""
        if not 0 <= index < self.size:
            raise ValueError("no such leaf")
        siblings: list[bytes] = []
        lo, hi = 0, self.size
        while hi - lo > 1:
            k = _split(hi - lo)
            if index < lo + k:
                siblings.append(self._nodes[(lo + k, hi)])
                hi = lo + k
            else:
                siblings.append(self._nodes[(lo, lo + k)])
                lo += k
        return tuple(reversed(siblings))


def root_from_path(leaf_hash: bytes, index: int, size: int, path: Sequence[bytes]
                   ) -> bytes | None:
    """The root that ``path`` leads to from ``leaf_hash`` at ``index`` of ``size`` leaves, or
    None when the path has the wrong shape (RFC 9162 section 2.1.3.2)."""
    if not 0 <= index < size or any(len(p) != HASH_BYTES for p in path):
        return None
    fn, sn, node = index, size - 1, leaf_hash
    for sibling in path:
        if sn == 0:
            return None
        if fn % 2 == 1 or fn == sn:
            node = _sha(_NODE + sibling + node)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            node = _sha(_NODE + node + sibling)
        fn >>= 1
        sn >>= 1
    return node if sn == 0 else None


# --- seeds and the card commitment ----------------------------------------------------------


def _seed_bytes(seed: bytes) -> bytes:
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a seed is {SEED_BYTES} bytes")
    return seed


def dealer_seed_commitment(table_id: str, hand_number: int, seed: bytes) -> str:
    """The dealer's published commitment to its seed (hex)."""
    return hashlib.sha256(f"stud-hilo-dealer-seed-v2|{table_id}|{hand_number}|".encode()
                          + _seed_bytes(seed)).hexdigest()


def seed_commitment(table_id: str, hand_number: int, player_id: str, seed: bytes) -> str:
    """A player's commitment to their seed for one hand (hex); it names the player, so one
    player's commitment cannot be copied by another."""
    return hashlib.sha256(f"stud-hilo-seed-v2|{table_id}|{hand_number}|{player_id}|".encode()
                          + _seed_bytes(seed)).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class DealHeader:
    """What the card commitment binds: the Merkle root, the dealer's seed commitment and the
    players' seed commitments (``(player, commitment)`` in player order), all hex."""

    table_id: str
    hand_number: int
    root: str
    dealer_seed: str
    seeds: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        players = [p for p, _c in self.seeds]
        if players != sorted(set(players)):
            raise ValueError("seed commitments must be one per player, in player order")
        if not all(_is_hex(h) for h in (self.root, self.dealer_seed,
                                         *(c for _p, c in self.seeds))):
            raise ValueError("hashes are 64 lowercase hex digits")

    def encode(self) -> bytes:
        """The canonical text the card commitment hashes."""
        seeds = ",".join(f"{p}:{c}" for p, c in self.seeds)
        return (f"stud-hilo-deal-v2|{self.table_id}|{self.hand_number}|{self.root}|"
                f"{self.dealer_seed}|{seeds}").encode()

    @property
    def commitment(self) -> str:
        """The card commitment (hex), as published in ``HandStarted.card_commitment``."""
        return hashlib.sha256(self.encode()).hexdigest()

    def seed_of(self, player_id: str) -> str | None:
        """``player_id``'s seed commitment, if listed."""
        return next((c for p, c in self.seeds if p == player_id), None)


def same(a: str, b: str) -> bool:
    """Constant-time equality of two hex digests."""
    return hmac.compare_digest(a.encode(), b.encode())


# --- the deal order -------------------------------------------------------------------------


def shuffle_key(table_id: str, hand_number: int, dealer_seed: bytes,
                seeds: Sequence[tuple[str, bytes | None]]) -> bytes:
    """The key both permutations come from: the dealer's seed and every committed player's
    seed (None: committed but not opened in time), in player order."""
    ordered = sorted(seeds, key=lambda s: s[0])
    if len({p for p, _s in ordered}) != len(ordered):
        raise ValueError("one seed per player")
    text = ",".join(f"{p}:{WITHHELD if s is None else _seed_bytes(s).hex()}"
                    for p, s in ordered)
    return _sha(f"stud-hilo-shuffle-v2|{table_id}|{hand_number}|"
                f"{_seed_bytes(dealer_seed).hex()}|{text}".encode())


_WORDS: Final = struct.Struct(">4Q")
"""A SHA-256 block as four unsigned 64-bit big-endian integers."""


def _below(key: bytes, label: bytes) -> Iterator[int]:
    prefix = key + label
    counter = 0
    while True:
        yield from _WORDS.unpack(_sha(prefix + counter.to_bytes(8, "big")))
        counter += 1


_LIMITS: Final = tuple(2**64 - 2**64 % n if n else 0 for n in range(DECK_SIZE + 1))
"""``2**64 - 2**64 % n``, the rejection bound of a draw below ``n``, for a deck's sizes."""


def permutation_from_draws(size: int, draws: Sequence[int]) -> tuple[int, ...]:
    """The Fisher–Yates permutation of ``range(size)`` for the given draws (the k-th draw in
    ``[0, size - 1 - k]``; the map from draw sequences to permutations is a bijection).

    >>> permutation_from_draws(3, (0, 0))
    (1, 2, 0)
    >>> permutation_from_draws(3, (3, 0))
    Traceback (most recent call last):
    ...
    ValueError: draw 0 must be in [0, 2], got 3
    """
    if len(draws) != max(size - 1, 0):
        raise ValueError(f"{size} items need {max(size - 1, 0)} draws, got {len(draws)}")
    items = list(range(size))
    for step, top in enumerate(range(size - 1, 0, -1)):
        pick = draws[step]
        if not 0 <= pick <= top:
            raise ValueError(f"draw {step} must be in [0, {top}], got {pick}")
        items[top], items[pick] = items[pick], items[top]
    return tuple(items)


def derive_permutation(key: bytes, label: bytes, size: int = DECK_SIZE) -> tuple[int, ...]:
    """A uniformly distributed permutation of ``range(size)`` determined by ``key`` and
    ``label`` (Fisher–Yates with unbiased draws from a SHA-256 stream)."""
    stream = _below(key, label)
    items = list(range(size))
    for top in range(size - 1, 0, -1):  # permutation_from_draws, the draws taken as they come
        n = top + 1
        limit = _LIMITS[n] if n <= DECK_SIZE else 2**64 - 2**64 % n
        x = next(stream)
        while x >= limit:
            x = next(stream)
        pick = x % n
        items[top], items[pick] = items[pick], items[top]
    return tuple(items)


@dataclass(frozen=True, slots=True)
class DealOrder:
    """The two permutations of base positions a hand is dealt by."""

    deal: tuple[int, ...]
    """``deal[k]``: the base position dealt at draw ``k`` (before any reshuffle)."""
    reshuffle: tuple[int, ...]
    """The order of RULES 10.4's reshuffle, over base positions."""


def deal_order(table_id: str, hand_number: int, dealer_seed: bytes,
               seeds: Sequence[tuple[str, bytes | None]]) -> DealOrder:
    """The deal order that follows from the opened seeds."""
    key = shuffle_key(table_id, hand_number, dealer_seed, seeds)
    return DealOrder(deal=derive_permutation(key, b"deal"),
                     reshuffle=derive_permutation(key, b"reshuffle"))


# --- openings -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CardOpening:
    """The proof of one card: its base position, its value, its salt and its Merkle path."""

    position: int
    card: int
    salt: bytes = field(repr=False)
    path: tuple[bytes, ...] = field(repr=False)

    def __repr__(self) -> str:  # a down card's opening is as secret as the card
        return f"CardOpening(position={self.position})"

    def root(self) -> bytes | None:
        """The root this opening leads to, or None when malformed."""
        if len(self.path) > MAX_PATH:
            return None
        try:
            node = leaf(self.position, self.card, self.salt)
        except ValueError:
            return None
        return root_from_path(node, self.position, DECK_SIZE, self.path)

    def opens(self, root_hex: str) -> bool:
        """Whether this opening proves its card at its position under ``root_hex``."""
        got = self.root()
        return got is not None and same(got.hex(), root_hex)


@dataclass(frozen=True, slots=True, kw_only=True)
class FairDeck:
    """The dealer's secret of one hand under this scheme: the base deck, a salt per position
    and the dealer's seed."""

    table_id: str
    hand_number: int
    base: tuple[int, ...]
    salts: tuple[bytes, ...] = field(repr=False)
    dealer_seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if sorted(self.base) != list(range(DECK_SIZE)):
            raise ValueError("the base deck must hold the 52 cards once each")
        if len(self.salts) != DECK_SIZE or any(len(s) != SALT_BYTES for s in self.salts):
            raise ValueError(f"one {SALT_BYTES}-byte salt per position")
        _seed_bytes(self.dealer_seed)

    def __repr__(self) -> str:  # never print a deck by accident
        return f"FairDeck(table_id={self.table_id!r}, hand_number={self.hand_number})"

    def leaves(self) -> tuple[bytes, ...]:
        """The 52 leaves, by base position."""
        return tuple(leaf(i, c, s) for i, (c, s) in enumerate(zip(self.base, self.salts,
                                                                   strict=True)))

    def root(self) -> str:
        """The Merkle root (hex)."""
        return merkle_root(self.leaves()).hex()

    def header(self, seeds: Sequence[tuple[str, str]] = ()) -> DealHeader:
        """The header of this deck with the players' seed commitments ``seeds``."""
        return DealHeader(table_id=self.table_id, hand_number=self.hand_number,
                          root=self.root(),
                          dealer_seed=dealer_seed_commitment(self.table_id, self.hand_number,
                                                             self.dealer_seed),
                          seeds=tuple(sorted(seeds)))

    def position_of(self, card: int) -> int:
        """The base position of ``card``."""
        return self.base.index(card)

    def opening(self, position: int, leaves: Sequence[bytes] | None = None) -> CardOpening:
        """The opening of the card at base ``position`` (pass ``leaves`` to reuse them)."""
        leaves = self.leaves() if leaves is None else leaves
        return CardOpening(position=position, card=self.base[position],
                           salt=self.salts[position], path=merkle_path(leaves, position))

    def dealing(self, order: DealOrder) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The cards in dealing order and the reshuffle order as cards: what the dealer deals
        from once the seeds are in (the v1 deck's ``order`` and ``reshuffle_key``)."""
        return (tuple(self.base[p] for p in order.deal),
                tuple(self.base[p] for p in order.reshuffle))
