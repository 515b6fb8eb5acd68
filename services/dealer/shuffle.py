"""Fresh randomness for each hand: the deck order, the reshuffle key, the salts and the dealer's
seed, all from the operating system's CSPRNG (``secrets``). This is the only module of the
project that draws random numbers, and it has no seed: tests can only observe its outputs
(the deterministic simulator hands the dealer an :class:`Entropy` of its own).

The shuffle is Fisher–Yates with unbiased draws: 64-bit words of one read of the CSPRNG
(``secrets.token_bytes``), each draw below ``n`` taken from a word below the largest multiple
of ``n`` under ``2**64`` (a word above it is rejected, never reduced), so each of the 52!
orders is equally likely. It is ``secrets.randbelow``'s method over one read instead of a read
per draw (issue 35: 51 reads of the operating system a hand, 110 us; the 52 card salts are one
read too).
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from rules import DECK_SIZE
from studkit.cardproof import SALT_BYTES as CARD_SALT_BYTES
from studkit.cardproof import SEED_BYTES, permutation_from_draws
from studkit.deckproof import SALT_BYTES

__all__ = ["CSPRNG", "Entropy", "card_salts", "fisher_yates_draws", "new_salt", "new_seed",
           "permutation_from_draws", "shuffled"]


_WORD_BITS: Final = 64


def _words(count: int) -> Iterator[int]:
    """Uniform 64-bit words from the CSPRNG, ``count`` (and a few spare) a read."""
    batch = count + 4
    unpack = struct.Struct(f">{batch}Q").unpack
    while True:
        yield from unpack(secrets.token_bytes(batch * _WORD_BITS // 8))


def fisher_yates_draws(size: int) -> tuple[int, ...]:
    """One uniform draw per Fisher–Yates step: the k-th draw (k = 0..size-2) is in
    ``[0, size - 1 - k]``: a CSPRNG word below ``2**64 - 2**64 % n`` (``n = size - k``,
    a multiple of ``n``: else the next word), reduced modulo ``n``."""
    words = _words(max(size - 1, 0))
    draws = []
    for top in range(size - 1, 0, -1):
        n = top + 1
        limit = (1 << _WORD_BITS) - (1 << _WORD_BITS) % n
        word = next(words)
        while word >= limit:  # probability below n / 2**64
            word = next(words)
        draws.append(word % n)
    return tuple(draws)


def shuffled(size: int = DECK_SIZE) -> tuple[int, ...]:
    """A uniformly random permutation of ``range(size)`` from the CSPRNG."""
    return permutation_from_draws(size, fisher_yates_draws(size))


def new_salt() -> bytes:
    """A fresh 32-byte salt for a commitment."""
    return secrets.token_bytes(SALT_BYTES)


def card_salts(count: int = DECK_SIZE) -> tuple[bytes, ...]:
    """A fresh salt for each position of a per-card commitment (one read of the CSPRNG,
    cut in ``count`` salts)."""
    block = secrets.token_bytes(count * CARD_SALT_BYTES)
    return tuple(block[i:i + CARD_SALT_BYTES]
                 for i in range(0, count * CARD_SALT_BYTES, CARD_SALT_BYTES))


def new_seed() -> bytes:
    """The dealer's seed for one hand's deal order."""
    return secrets.token_bytes(SEED_BYTES)


@dataclass(frozen=True, slots=True)
class Entropy:
    """Where a dealer draws its randomness: the CSPRNG in production (:data:`CSPRNG`); the
    deterministic simulator (``sim/``) gives one drawn from its seed, so a run repeats."""

    shuffled: Callable[[], tuple[int, ...]] = shuffled
    new_salt: Callable[[], bytes] = new_salt
    card_salts: Callable[[], tuple[bytes, ...]] = card_salts
    new_seed: Callable[[], bytes] = new_seed


CSPRNG: Final = Entropy()
"""The operating system's CSPRNG, the only entropy a dealer uses outside the simulator."""
