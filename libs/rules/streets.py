"""Streets of a hand (3rd to 7th), the bet size of each, and what each deals (RULES §5)."""

from __future__ import annotations

from enum import IntEnum, unique
from typing import Final

from rules.config import TableConfig


@unique
class Street(IntEnum):
    """A street; the value is the number of cards each player holds after it is dealt."""

    THIRD = 3
    FOURTH = 4
    FIFTH = 5
    SIXTH = 6
    SEVENTH = 7

    @property
    def label(self) -> str:
        """Human name, e.g. ``"3rd street"``."""
        return _LABELS[self]

    def next(self) -> Street | None:
        """The following street, or None after 7th."""
        return _NEXT[self]


# Looked up, not computed: ``Street(n)`` and ``Street.SEVENTH`` go through the enum's
# metaclass (interpreted, several times a dict look-up), ``self.value`` through a property.
_THIRD, _FOURTH, _SEVENTH = Street.THIRD, Street.FOURTH, Street.SEVENTH
_NEXT: Final[dict[Street, Street | None]] = {
    s: (Street(s + 1) if s < _SEVENTH else None) for s in Street}
_LABELS: Final[dict[Street, str]] = {
    s: {3: "3rd", 4: "4th", 5: "5th", 6: "6th", 7: "7th"}[int(s)] + " street" for s in Street}


def bet_size(config: TableConfig, street: Street) -> int:
    """The street bet S: small bet on 3rd and 4th street, big bet from 5th on (RULES 5.1)."""
    return config.small_bet if street <= _FOURTH else config.big_bet


def card_is_up(street: Street, pass_number: int = 0) -> bool:
    """Whether a card of this street is dealt face up. On 3rd street passes 0 and 1 are down
    and pass 2 is up; 4th to 6th are up; 7th is down (RULES 4.2-4.3)."""
    if street == _THIRD:
        return pass_number == 2
    return street != _SEVENTH
