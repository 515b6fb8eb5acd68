"""The commitment to a hand's deck: SHA-256 over a canonical encoding, published in the table's
stream (``HandStarted.deck_commitment``) before any card is dealt.

Encoding, version 1 (all fields fixed-length or free of ``|``, so it is unambiguous)::

    b"stud-hilo-deck-v1|" + table_id (ASCII) + b"|" + hand_number (decimal ASCII) + b"|"
      + salt (32 bytes) + b"|" + order (52 bytes) + b"|" + reshuffle_key (52 bytes)

where ``order`` and ``reshuffle_key`` are one byte per card, the card's index (``2c`` = 0 ..
``As`` = 51), top card first. The commitment is the lowercase hex SHA-256 of that. Binding
the table and hand number means a deck committed for one hand cannot be passed off for another;
the secret random salt means the commitment reveals nothing about the order.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

from dealer.deck import HandDeck
from dealer.shuffle import SALT_BYTES

DOMAIN: Final = b"stud-hilo-deck-v1"


def encode(deck: HandDeck) -> bytes:
    """The canonical bytes the commitment hashes."""
    if len(deck.salt) != SALT_BYTES:
        raise ValueError(f"the salt must be {SALT_BYTES} bytes")
    return b"|".join((
        DOMAIN,
        deck.table_id.encode("ascii"),
        str(deck.hand_number).encode("ascii"),
        deck.salt,
        bytes(deck.order),
        bytes(deck.reshuffle_key),
    ))


def commit(deck: HandDeck) -> str:
    """The commitment: hex SHA-256 of :func:`encode`."""
    return hashlib.sha256(encode(deck)).hexdigest()


def verify_commitment(deck: HandDeck, commitment: str) -> bool:
    """Whether ``commitment`` is the commitment of ``deck`` (constant-time compare)."""
    try:
        expected = commit(deck)
    except ValueError:
        return False
    return hmac.compare_digest(expected, commitment.strip().lower())
