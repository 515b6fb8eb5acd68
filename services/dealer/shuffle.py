"""Fresh randomness for each hand: the deck order, the reshuffle key and the salt, all from the
operating system's CSPRNG (``secrets``). This is the only module of the project that draws
random numbers, and it has no seed: tests can only observe its outputs.

The shuffle is Fisher–Yates with ``secrets.randbelow``, which is unbiased (it rejects rather
than reduces modulo), so each of the 52! orders is equally likely.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from studkit.deckproof import DECK_SIZE, SALT_BYTES


def fisher_yates_draws(size: int) -> tuple[int, ...]:
    """One uniform draw per Fisher–Yates step: the k-th draw (k = 0..size-2) is in
    ``[0, size - 1 - k]``."""
    return tuple(secrets.randbelow(top + 1) for top in range(size - 1, 0, -1))


def permutation_from_draws(size: int, draws: Sequence[int]) -> tuple[int, ...]:
    """The Fisher–Yates permutation of ``range(size)`` for the given draws (pure; the map
    from draw sequences to permutations is a bijection, which the unit tests check).

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


def shuffled(size: int = DECK_SIZE) -> tuple[int, ...]:
    """A uniformly random permutation of ``range(size)`` from the CSPRNG."""
    return permutation_from_draws(size, fisher_yates_draws(size))


def new_salt() -> bytes:
    """A fresh 32-byte salt for a commitment."""
    return secrets.token_bytes(SALT_BYTES)
