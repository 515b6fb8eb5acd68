"""Hand values: the best high hand, the eight-or-better low and the ranking of boards.

RULES.md 12 (high), 13 (low) and 8.1 (boards). Evaluation is table driven so that a
showdown or a simulation can afford millions of calls: each card maps to one bit, a hand is
the OR of its cards' bits (four 13-bit rank masks, one per suit), and a few bit operations on
those masks plus lookups in tables indexed by a rank mask give its value, all on integers
under 2**52. The result is a value object holding one integer sort key;
the five cards and the description are worked out only when asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Final, Self

from rules.cards import DECK, Card, card_from_index, format_cards
from rules.errors import Reason, RuleViolation

# --- Layout: one bit per card ------------------------------------------------------------
# A hand is the OR of its cards' bits: 13 per suit (clubs first), bit r - 2 of a suit's 13 for
# rank r. The four suits' 13-bit rank masks give everything else with a few bit operations on
# small integers (under 2**52, so machine words once compiled): the ranks present (OR), those
# held twice or more, three times or more, four times; and a flush is a suit mask of 5 bits or
# more. Tables indexed by a 13-bit rank mask give the packed ranks a key is built from.
_SUIT_MASK: Final = 0x1FFF
_CARD_BIT_BY_ID: Final[dict[int, int]] = {
    id(card): 1 << 13 * card.suit.order + card.rank - 2 for card in DECK}
"""Keyed by id(): cards are interned and DECK keeps them alive, so an id never changes owner,
and id() is much cheaper than the dataclass hash. Other Card objects take the slow path."""
_RANK_BIT: Final = tuple(0 if r < 2 else 1 << r - 2 for r in range(15))
"""The bit of rank ``r`` in a 13-bit rank mask (indexed by rank, 2..14)."""


def _nibbles(ranks: Sequence[int]) -> int:
    """Up to five ranks packed left-aligned, four bits each, first rank highest."""
    packed = 0
    for i, rank in enumerate(ranks[:5]):
        packed |= rank << 16 - 4 * i
    return packed


def _straight_top(compact: int) -> int:
    """Top rank of the best straight in a rank mask (5 for the wheel), or 0."""
    for top in range(14, 5, -1):
        window = 0x1F << top - 6
        if compact & window == window:
            return top
    wheel = 0x100F  # A, 2, 3, 4, 5
    return 5 if compact & wheel == wheel else 0


def _straight_nibbles(top: int) -> int:
    return _nibbles([5, 4, 3, 2, 14] if top == 5 else [top - i for i in range(5)])


def _tables() -> tuple[list[int], list[int], list[int], list[int]]:
    top: list[int] = []
    straight: list[int] = []
    count: list[int] = []
    low: list[int] = []
    for compact in range(1 << 13):
        ranks = [r for r in range(14, 1, -1) if compact >> (r - 2) & 1]
        top.append(_nibbles(ranks))
        high = _straight_top(compact)
        straight.append(_straight_nibbles(high) if high else 0)
        count.append(len(ranks))
        lows = [r for r in range(1, 9) if compact & _RANK_BIT[14 if r == 1 else r]]  # ace = 1
        # The five lowest ranks, written highest first; a smaller list is a better low.
        low.append(_LOW_FLIP - _nibbles(lows[4::-1]) if len(lows) >= 5 else 0)
    return top, straight, count, low


_LOW_FLIP: Final = 0xFFFFF
_TOP, _STRAIGHT, _COUNT, _LOW = _tables()
"""By 13-bit rank mask: its (up to) five highest ranks packed by :func:`_nibbles`; the packed
ranks of its best straight, or 0; its number of ranks; the low sort key of its ranks A, 2..8
(greater is better), or 0 if fewer than five of them."""


# --- Values --------------------------------------------------------------------------------


@unique
class HighCategory(StrEnum):
    """Category of a high hand (RULES 12.1), best first."""

    STRAIGHT_FLUSH = "straight_flush"
    FOUR_OF_A_KIND = "four_of_a_kind"
    FULL_HOUSE = "full_house"
    FLUSH = "flush"
    STRAIGHT = "straight"
    THREE_OF_A_KIND = "three_of_a_kind"
    TWO_PAIR = "two_pair"
    ONE_PAIR = "one_pair"
    HIGH_CARD = "high_card"

    @property
    def strength(self) -> int:
        """0 for high card up to 8 for a straight flush."""
        return _CATEGORIES.index(self)


_CATEGORIES: Final = tuple(reversed(HighCategory))
"""Index = the category number stored in bits 20.. of a high sort key."""
# Category numbers, as stored in a key.
_PAIR: Final = 1
_TWO_PAIR: Final = 2
_TRIPS: Final = 3
_STRAIGHT_CAT: Final = 4
_FLUSH: Final = 5
_FULL: Final = 6
_QUADS: Final = 7
_STRAIGHT_FLUSH: Final = 8


@unique
class LowCategory(StrEnum):
    """A low named by its highest card: ``5-4-3-2-A`` is a five low."""

    FIVE_LOW = "five_low"
    SIX_LOW = "six_low"
    SEVEN_LOW = "seven_low"
    EIGHT_LOW = "eight_low"


_NAMES: Final[tuple[str, ...]] = (
    *("-", "ace", "two", "three", "four", "five", "six", "seven"),
    *("eight", "nine", "ten", "jack", "queen", "king", "ace"),
)
"""Rank -> name; the ace is both 1 and 14."""


def _plural(rank: int) -> str:
    return _NAMES[rank] + ("es" if rank == 6 else "s")


def _unpack(packed: int) -> tuple[int, ...]:
    return tuple(packed >> shift & 15 for shift in (16, 12, 8, 4, 0))


def _pick(source: Sequence[Card], ranks: Sequence[int]) -> tuple[Card, ...]:
    """One card per entry of ``ranks``, never the same card twice, higher suits first."""
    pool = sorted(source, key=lambda c: -c.key[1])
    picked: list[Card] = []
    for rank in ranks:
        card = next(c for c in pool if c.rank == rank)
        pool.remove(card)
        picked.append(card)
    return tuple(picked)


@dataclass(frozen=True, slots=True, eq=False, init=False)
class _Value:
    """A hand value: compared, equal and hashed by ``key`` alone, and only with its own kind.

    ``source`` is the cards the value was computed from; equal values may come from
    different cards (suits never break a tie).
    """

    key: int
    source: tuple[Card, ...]

    def __init__(self, key: int, source: tuple[Card, ...]) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "source", source)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Value) and type(other) is type(self):
            return self.key == other.key
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __lt__(self, other: Self) -> bool:
        if type(other) is type(self):
            return self.key < other.key
        return NotImplemented

    def __le__(self, other: Self) -> bool:
        if type(other) is type(self):
            return self.key <= other.key
        return NotImplemented

    def __gt__(self, other: Self) -> bool:
        if type(other) is type(self):
            return self.key > other.key
        return NotImplemented

    def __ge__(self, other: Self) -> bool:
        if type(other) is type(self):
            return self.key >= other.key
        return NotImplemented


@dataclass(frozen=True, slots=True, eq=False, repr=False, init=False)
class HighValue(_Value):
    """The value of a high hand; a better hand compares greater, suits never count.

    ``key`` packs the category and the five ranks in display order.
    """

    @property
    def category(self) -> HighCategory:
        """The category, e.g. :attr:`HighCategory.FLUSH`."""
        return _CATEGORIES[self.key >> 20]

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks of the five cards in display order (ace 14, 1 nowhere)."""
        return _unpack(self.key)

    @property
    def cards(self) -> tuple[Card, ...]:
        """The five cards played: groups first (biggest, then highest), else high to low."""
        pool: Sequence[Card] = self.source
        if self.key >> 20 in (_FLUSH, _STRAIGHT_FLUSH):
            suits = [c.suit for c in pool]
            flush_suit = max(suits, key=suits.count)
            pool = [c for c in pool if c.suit == flush_suit]
        return _pick(pool, self.ranks)

    @property
    def description(self) -> str:
        """Words for the hand, e.g. ``"Two pair, sevens and fives"``."""
        first, second = self.ranks[0], self.ranks[3]
        match self.key >> 20:
            case 8:
                return f"Straight flush, {_NAMES[first]} high"
            case 7:
                return f"Four of a kind, {_plural(first)}"
            case 6:
                return f"Full house, {_plural(first)} full of {_plural(second)}"
            case 5:
                return f"Flush, {_NAMES[first]} high"
            case 4:
                return f"Straight, {_NAMES[first]} high"
            case 3:
                return f"Three of a kind, {_plural(first)}"
            case 2:
                return f"Two pair, {_plural(first)} and {_plural(self.ranks[2])}"
            case 1:
                return f"One pair, {_plural(first)}"
            case _:
                return f"High card, {_NAMES[first]}"

    def __repr__(self) -> str:
        return f"<HighValue {self.description}: {format_cards(self.cards)}>"


@dataclass(frozen=True, slots=True, eq=False, repr=False, init=False)
class LowValue(_Value):
    """The value of a qualifying eight-or-better low; a better low compares greater.

    ``key`` is ``0xFFFFF`` minus the five ranks (ace = 1) packed highest first, so that the
    wheel ``5-4-3-2-A`` has the greatest key.
    """

    @property
    def ranks(self) -> tuple[int, ...]:
        """The five ranks, highest first, ace as 1: ``(5, 4, 3, 2, 1)`` for the wheel."""
        return _unpack(_LOW_FLIP - self.key)

    @property
    def category(self) -> LowCategory:
        """The low named by its highest card, e.g. :attr:`LowCategory.EIGHT_LOW`."""
        return tuple(LowCategory)[self.ranks[0] - 5]

    @property
    def cards(self) -> tuple[Card, ...]:
        """The five cards played, highest first, the ace last."""
        return _pick(self.source, [14 if r == 1 else r for r in self.ranks])

    @property
    def description(self) -> str:
        """The ranks written highest first, e.g. ``"8-7-6-5-4"`` or ``"5-4-3-2-A"``."""
        return "-".join("A" if r == 1 else str(r) for r in self.ranks)

    def __repr__(self) -> str:
        return f"<LowValue {self.description}: {format_cards(self.cards)}>"


# --- Evaluation ----------------------------------------------------------------------------


def _interned(cards: Sequence[Card]) -> tuple[Card, ...]:
    """The DECK objects equal to ``cards`` (for Card objects built outside ``rules.cards``)."""
    try:
        return tuple(card_from_index(card.index) for card in cards)
    except (AttributeError, KeyError, TypeError):
        raise RuleViolation(Reason.MALFORMED_CARD, f"not cards: {cards!r}") from None


def _masked(cards: Sequence[Card], low: int, high: int) -> tuple[int, tuple[Card, ...]]:
    """The OR of the cards' bits, after checking the number of cards and duplicates."""
    count = len(cards)
    if not low <= count <= high:
        raise RuleViolation(Reason.INVALID_COMMAND, f"need {low} to {high} cards, got {count}")
    source = tuple(cards)
    items: tuple[object, ...] = source  # anything: a card that is not one is refused below
    bits = _CARD_BIT_BY_ID
    mask = 0
    try:
        for item in items:
            mask |= bits[id(item)]
    except KeyError:
        source = _interned(source)
        mask = 0
        for card in source:
            mask |= bits[id(card)]
    held = _COUNT  # bits set per 13-bit mask: a card given twice sets its bit once
    if (held[mask & _SUIT_MASK] + held[mask >> 13 & _SUIT_MASK] + held[mask >> 26 & _SUIT_MASK]
            + held[mask >> 39]) != count:
        raise RuleViolation(Reason.DUPLICATE_CARD, f"a card repeats: {format_cards(source)}")
    return mask, source


def best_high(cards: Sequence[Card]) -> HighValue:
    """The best five-card high hand among 5 to 7 cards (RULES 12).

    >>> from rules.cards import parse_cards
    >>> best_high(parse_cards("Kh 8h 5c 4h 3h 2s Ah"))
    <HighValue Flush, ace high: Ah Kh 8h 4h 3h>
    >>> best_high(parse_cards("Qc Kd Ah 2s 3c 9d 7h")).description
    'High card, ace'
    >>> best_high(parse_cards("Ah Kh Qh Jh"))
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_command: need 5 to 7 cards, got 4
    """
    mask, source = _masked(cards, 5, 7)
    clubs, diamonds = mask & _SUIT_MASK, mask >> 13 & _SUIT_MASK
    hearts, spades = mask >> 26 & _SUIT_MASK, mask >> 39
    count = _COUNT
    # With at most seven cards one suit at most has five, and a flush rules out quads and
    # full houses.
    flush = (clubs if count[clubs] >= 5 else diamonds if count[diamonds] >= 5
             else hearts if count[hearts] >= 5 else spades if count[spades] >= 5 else 0)
    if flush:
        straight = _STRAIGHT[flush]
        if straight:
            return HighValue(_STRAIGHT_FLUSH << 20 | straight, source)
        return HighValue(_FLUSH << 20 | _TOP[flush], source)
    top = _TOP
    low_both, high_both = clubs & diamonds, hearts & spades
    low_any, high_any = clubs | diamonds, hearts | spades
    present = low_any | high_any
    straight = _STRAIGHT[present]
    paired = low_both | high_both | low_any & high_any  # held twice or more
    if not paired:
        if straight:
            return HighValue(_STRAIGHT_CAT << 20 | straight, source)
        return HighValue(top[present], source)
    tripled = low_both & high_any | high_both & low_any  # three times or more
    if not tripled:
        if straight:
            return HighValue(_STRAIGHT_CAT << 20 | straight, source)
        pairs = top[paired]
        high = pairs >> 16
        if paired & (paired - 1):  # two pairs or more: the best two and a kicker
            second = pairs >> 12 & 15
            kicker = top[present ^ _RANK_BIT[high] ^ _RANK_BIT[second]] >> 16
            key = _TWO_PAIR << 20 | high * 0x11000 | second * 0x110 | kicker
        else:
            key = _PAIR << 20 | high * 0x11000 | top[present ^ paired] >> 8
        return HighValue(key, source)
    quads = low_both & high_both
    if quads:
        rank = top[quads] >> 16
        kicker = top[present ^ _RANK_BIT[rank]] >> 16
        return HighValue(_QUADS << 20 | rank * 0x11110 | kicker, source)
    trips = top[tripled] >> 16
    others = paired ^ _RANK_BIT[trips]
    if others:
        pair = top[others] >> 16
        return HighValue(_FULL << 20 | trips * 0x11100 | pair * 0x11, source)
    if straight:
        return HighValue(_STRAIGHT_CAT << 20 | straight, source)
    key = _TRIPS << 20 | trips * 0x11100 | top[present ^ _RANK_BIT[trips]] >> 12
    return HighValue(key, source)


def best_low(cards: Sequence[Card]) -> LowValue | None:
    """The best eight-or-better low among 5 to 7 cards, or None if none qualifies (RULES 13).

    >>> from rules.cards import parse_cards
    >>> best_low(parse_cards("Kh 8h 5c 4h 3h 2s Ah"))
    <LowValue 5-4-3-2-A: 5c 4h 3h 2s Ah>
    >>> best_low(parse_cards("9s 7d 5c 4h 4d As Kh")) is None
    True
    >>> best_low(parse_cards("Ah 2h 3h 4h 5h 6h 7h 8h"))
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_command: need 5 to 7 cards, got 8
    """
    mask, source = _masked(cards, 5, 7)
    key = _LOW[(mask | mask >> 13 | mask >> 26 | mask >> 39) & _SUIT_MASK]
    return LowValue(key, source) if key else None


def board_value(cards: Sequence[Card]) -> tuple[int, ...]:
    """The rank of 0 to 4 up cards for first to act (RULES 8.1); a greater tuple is higher.

    The tuple is the category (4 four of a kind, 3 three of a kind, 2 two pair, 1 one pair,
    0 high card) followed by the rank of each group, biggest group first, then highest.

    >>> from rules.cards import parse_cards
    >>> board_value(parse_cards("Kh Ks 9c")) > board_value(parse_cards("Kc Kd 2h"))
    True
    >>> board_value(parse_cards("9h 8h 7h 6h")), board_value(())
    ((0, 9, 8, 7, 6), (0,))
    >>> board_value(parse_cards("Ah Kh Qh Jh Th"))
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_command: need 0 to 4 cards, got 5
    """
    mask, source = _masked(cards, 0, 4)
    clubs, diamonds = mask & _SUIT_MASK, mask >> 13 & _SUIT_MASK
    hearts, spades = mask >> 26 & _SUIT_MASK, mask >> 39
    low_both, high_both = clubs & diamonds, hearts & spades
    low_any, high_any = clubs | diamonds, hearts | spades
    # the value depends on how many times each rank is held alone
    ranks = (low_any | high_any | (low_both | high_both | low_any & high_any) << 13
             | (low_both & high_any | high_both & low_any) << 26 | (low_both & high_both) << 39)
    value = _BOARD_BY_RANKS.get(ranks)
    if value is None:
        value = _BOARD_BY_RANKS[ranks] = _board_value(source)
    return value


_BOARD_BY_RANKS: Final[dict[int, tuple[int, ...]]] = {}
""":func:`board_value` by the ranks held once or more, twice or more, three and four times
(at most a few thousand boards)."""


def _board_value(source: tuple[Card, ...]) -> tuple[int, ...]:
    sizes: dict[int, int] = {}
    for card in source:
        sizes[card.rank] = sizes.get(card.rank, 0) + 1
    groups = sorted(((size, rank) for rank, size in sizes.items()), reverse=True)
    shape = [size for size, _ in groups]
    if shape[:1] == [4]:
        category = 4
    elif shape[:1] == [3]:
        category = 3
    elif shape[:2] == [2, 2]:
        category = 2
    elif shape[:1] == [2]:
        category = 1
    else:
        category = 0
    return (category, *(rank for _, rank in groups))
