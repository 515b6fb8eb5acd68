"""The payout table by field size, prizes from the pool, places shared by ties, and the
cancellation split (pure integer arithmetic: no chip of the pool is created or lost).

**The payout table** (shares in basis points of the pool, first place first):

=========  ===============================================================
field      shares
=========  ===============================================================
2-9        6500 3500
10-17      5000 3000 2000
18-27      4000 2500 2000 1500
28-36      3500 2400 1800 1300 1000
37-54      3000 2000 1500 1200 900 800 600
55-72      2800 1800 1300 1000 800 700 600 550 450
73+        15 % of the field paid (rounded down, at least 10), the share of place
           ``i`` proportional to ``1 / (i + 1)``, in whole basis points rounded
           down, what rounding leaves over to first place
=========  ===============================================================

**Prizes.** Place ``i`` gets ``floor(pool * share_i / 10000)``; the chips the floors leave
over go to first place, so the prizes sum to the pool exactly.

**Ties.** Entries that share places ``p..p+k-1`` (they busted in the same round with the same
stack at its start) split the sum of those places' prizes: ``floor(S / k)`` each, and the
``S mod k`` odd chips one each to the tied entries in the order they entered (the earliest
entry first).

**Cancellation** (an operator's cancel, never a crash): before any bust, every entry gets its
buy-in and fee back. After a bust, each entry already out in a paid place whose place is final
(registration closed) gets that place's prize; what is left of the pool is split among the
entries still in, in proportion to their chips, rounded down, and the odd chips one each to
the largest stacks (at equal stacks, the earliest entry first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BASIS = 10_000

_TABLE: tuple[tuple[int, tuple[int, ...]], ...] = (
    (9, (6500, 3500)),
    (17, (5000, 3000, 2000)),
    (27, (4000, 2500, 2000, 1500)),
    (36, (3500, 2400, 1800, 1300, 1000)),
    (54, (3000, 2000, 1500, 1200, 900, 800, 600)),
    (72, (2800, 1800, 1300, 1000, 800, 700, 600, 550, 450)),
)


def shares(field: int) -> tuple[int, ...]:
    """The shares in basis points of places 1, 2, ... for a field of ``field`` entries; they
    sum to 10,000, never rise, and never pay more places than the field."""
    if field < 2:
        raise ValueError("a tournament field has at least two entries")
    for upto, table in _TABLE:
        if field <= upto:
            return table
    paid = max(10, field * 15 // 100)
    weights = [1_000_000 // (i + 1) for i in range(1, paid + 1)]
    total = sum(weights)
    out = [w * BASIS // total for w in weights]
    out[0] += BASIS - sum(out)
    return tuple(out)


def paid_places(field: int) -> int:
    return len(shares(field))


def prizes(pool: int, field: int) -> tuple[int, ...]:
    """The prize of each paid place, in chips of the pool, summing to ``pool``."""
    if pool < 0:
        raise ValueError("a pool is never negative")
    out = [pool * s // BASIS for s in shares(field)]
    out[0] += pool - sum(out)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Standing:
    """One entry's finish: it holds places ``place..place_to`` (equal when not tied)."""

    entry: str
    place: int
    place_to: int


def split_places(pool: int, field: int, standings: Sequence[Standing],
                 order: Sequence[str]) -> dict[str, int]:
    """The amount each entry wins: tied entries split their places' summed prizes, the odd
    chips one each in ``order`` (the entries in the order they entered). Entries out of the
    money are left out of the result."""
    table = prizes(pool, field)
    rank = {e: i for i, e in enumerate(order)}
    groups: dict[tuple[int, int], list[str]] = {}
    for s in standings:
        groups.setdefault((s.place, s.place_to), []).append(s.entry)
    won: dict[str, int] = {}
    for (first, last), entries in groups.items():
        total = sum(table[p - 1] for p in range(first, last + 1) if p <= len(table))
        if total == 0:
            continue
        base, odd = divmod(total, len(entries))
        for i, entry in enumerate(sorted(entries, key=lambda e: rank[e])):
            won[entry] = base + (1 if i < odd else 0)
    return won


def split_by_chips(amount: int, stacks: Sequence[tuple[str, int]]) -> dict[str, int]:
    """``amount`` shared among ``stacks`` (entry, chips, in entry order) in proportion to the
    chips, rounded down; the odd chips one each to the largest stacks, the earliest entry first
    at equal stacks."""
    chips = sum(c for _, c in stacks)
    if chips <= 0:
        raise ValueError("a split by chips needs chips in play")
    out = {e: amount * c // chips for e, c in stacks}
    odd = amount - sum(out.values())
    by_size = sorted(range(len(stacks)), key=lambda i: (-stacks[i][1], i))
    for i in by_size[:odd]:
        out[stacks[i][0]] += 1
    return out
