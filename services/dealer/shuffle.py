"""Fresh randomness for each hand: the deck order, the reshuffle key, the salts and the dealer's
seed, all from the operating system's CSPRNG (``secrets``). This is the only module of the
project that draws random numbers, and it has no seed: tests can only observe its outputs
(the deterministic simulator hands the dealer an :class:`Entropy` of its own).

The shuffle is Fisher–Yates with ``secrets.randbelow``, which is unbiased (it rejects rather
than reduces modulo), so each of the 52! orders is equally likely.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from rules import DECK_SIZE
from studkit.cardproof import SALT_BYTES as CARD_SALT_BYTES
from studkit.cardproof import SEED_BYTES, permutation_from_draws
from studkit.deckproof import SALT_BYTES

__all__ = ["CSPRNG", "Entropy", "card_salts", "fisher_yates_draws", "new_salt", "new_seed",
           "permutation_from_draws", "shuffled"]


def fisher_yates_draws(size: int) -> tuple[int, ...]:
    """One uniform draw per Fisher–Yates step: the k-th draw (k = 0..size-2) is in
    ``[0, size - 1 - k]``."""
    return tuple(secrets.randbelow(top + 1) for top in range(size - 1, 0, -1))


def shuffled(size: int = DECK_SIZE) -> tuple[int, ...]:
    """A uniformly random permutation of ``range(size)`` from the CSPRNG."""
    return permutation_from_draws(size, fisher_yates_draws(size))


def new_salt() -> bytes:
    """A fresh 32-byte salt for a commitment."""
    return secrets.token_bytes(SALT_BYTES)


def card_salts(count: int = DECK_SIZE) -> tuple[bytes, ...]:
    """A fresh salt for each position of a per-card commitment."""
    return tuple(secrets.token_bytes(CARD_SALT_BYTES) for _ in range(count))


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
