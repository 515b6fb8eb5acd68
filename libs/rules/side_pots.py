"""Side pots, the hi/lo split and odd chips, in integers only (RULES §9.3-9.5, §14)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rules.cards import Card
from rules.events import Share
from rules.hands import HighValue, LowValue


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Pot:
    """A pot: ``amount`` chips that the ``eligible`` seats may win."""

    amount: int
    level: int
    eligible: tuple[int, ...]

    def __init__(self, *, amount: int, level: int, eligible: tuple[int, ...]) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "amount", amount)
        object.__setattr__(self, "level", level)
        object.__setattr__(self, "eligible", eligible)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Contribution:
    """A player's whole-hand contribution and standing, for pot building."""

    seat: int
    total: int
    in_hand: bool
    all_in: bool

    def __init__(self, *, seat: int, total: int, in_hand: bool, all_in: bool) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "in_hand", in_hand)
        object.__setattr__(self, "all_in", all_in)


def build_pots(contributions: Sequence[Contribution]) -> tuple[Pot, ...]:
    """Main and side pots from whole-hand totals (RULES 9.3-9.4); empty pots are dropped.

    >>> c = [Contribution(seat=5, total=70, in_hand=True, all_in=True)] + [
    ...     Contribution(seat=s, total=90, in_hand=True, all_in=False) for s in (1, 6, 7)]
    >>> [(p.amount, p.eligible) for p in build_pots(c)]
    [(280, (1, 5, 6, 7)), (60, (1, 6, 7))]
    >>> build_pots([])
    ()
    """
    alive = [c for c in contributions if c.in_hand]
    levels = sorted({c.total for c in alive if c.all_in})
    others = [c.total for c in alive if not c.all_in]
    if others and (not levels or max(others) > levels[-1]):
        levels.append(max(others))
    pots: list[Pot] = []
    previous = 0
    for level in levels:
        amount = sum(min(c.total, level) - min(c.total, previous) for c in contributions)
        eligible = tuple(sorted(c.seat for c in alive if c.total >= level))
        if amount > 0:
            pots.append(Pot(amount=amount, level=level, eligible=eligible))
        previous = level
    return tuple(pots)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class ShowdownHand:
    """What pot settlement needs of one player's hand."""

    seat: int
    high: HighValue
    low: LowValue | None
    own_cards: tuple[Card, ...]
    """The player's own cards (never the community card), for the odd-chip order."""

    def __init__(self, *, seat: int, high: HighValue, low: LowValue | None,
                 own_cards: tuple[Card, ...]) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "own_cards", own_cards)

    @property
    def odd_chip_key(self) -> tuple[int, int]:
        """Highest own card, rank then suit: greater gets an odd chip first (RULES 14.5)."""
        return max(c.key for c in self.own_cards)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Award:
    """Chips of one pot to one seat."""

    seat: int
    amount: int
    share: Share
    hand: str

    def __init__(self, *, seat: int, amount: int, share: Share, hand: str) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "amount", amount)
        object.__setattr__(self, "share", share)
        object.__setattr__(self, "hand", hand)


def _divide(amount: int, winners: Sequence[ShowdownHand]) -> list[tuple[int, int]]:
    ordered = sorted(winners, key=lambda h: h.odd_chip_key, reverse=True)
    base, odd = divmod(amount, len(ordered))
    return [(h.seat, base + (1 if i < odd else 0)) for i, h in enumerate(ordered)]


def split_pot(pot: Pot, hands: Mapping[int, ShowdownHand]) -> tuple[Award, ...]:
    """Settle one pot among the eligible hands given (RULES 14.1-14.5).

    A pot with a single eligible hand goes to it whole without comparing anything.
    """
    contenders = [hands[s] for s in pot.eligible if s in hands]
    if not contenders:
        raise ValueError("a pot needs at least one eligible hand")
    if len(contenders) == 1:  # the others mucked: the shown hand takes the pot with its hand
        only = contenders[0]
        return (Award(seat=only.seat, amount=pot.amount, share=Share.WHOLE,
                      hand=only.high.description),)
    best_high = max(h.high for h in contenders)
    high_winners = [h for h in contenders if h.high == best_high]
    lows = [h for h in contenders if h.low is not None]
    awards: list[Award] = []
    if not lows:
        for seat, amount in _divide(pot.amount, high_winners):
            awards.append(Award(seat=seat, amount=amount, share=Share.WHOLE,
                                hand=best_high.description))
        return tuple(awards)
    best_low = max(h.low for h in lows if h.low is not None)
    low_winners = [h for h in lows if h.low == best_low]
    low_half = pot.amount // 2
    for seat, amount in _divide(pot.amount - low_half, high_winners):
        awards.append(Award(seat=seat, amount=amount, share=Share.HIGH,
                            hand=best_high.description))
    for seat, amount in _divide(low_half, low_winners):
        awards.append(Award(seat=seat, amount=amount, share=Share.LOW,
                            hand=best_low.description))
    return tuple(awards)
