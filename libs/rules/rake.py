"""The rake (RULES 2.4): how much the house takes from a hand's pots, and from which pots."""

from __future__ import annotations

from collections.abc import Sequence

from rules.config import Rake
from rules.streets import Street


def rake_due(pots: int, rake: Rake | None, ended_on: Street | None) -> int:
    """The rake of a hand whose pots (after uncalled wagers went back) hold ``pots`` in all
    and whose latest street dealt is ``ended_on`` (None: no card dealt, or the hand was
    voided). A hand that ends on 3rd street pays none (RULES 2.4, 9.8).

    >>> rake_due(1150, Rake(500, 30), Street.FIFTH)
    30
    >>> rake_due(399, Rake(500, 30), Street.SEVENTH)
    19
    >>> rake_due(1150, Rake(500, 30), Street.THIRD), rake_due(1150, None, Street.SEVENTH)
    (0, 0)
    """
    if rake is None or ended_on is None or ended_on == Street.THIRD:
        return 0
    return rake.amount(pots)


def take_rake(pots: Sequence[int], amount: int) -> tuple[int, ...]:
    """What the rake takes from each pot: the main pot first, the rest from the side pots in
    the order they were made (RULES 2.4).

    >>> take_rake((1000, 150), 30)
    (30, 0)
    >>> take_rake((20, 150, 40), 30)
    (20, 10, 0)
    """
    if not 0 <= amount <= sum(pots):
        raise ValueError(f"a rake of {amount} does not fit pots of {sum(pots)}")
    taken = []
    left = amount
    for pot in pots:
        part = min(pot, left)
        taken.append(part)
        left -= part
    return tuple(taken)
