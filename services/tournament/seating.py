"""Seating and balancing for stud (the TDA stud-only rule), pure functions of a layout.

A layout maps each open table (in the order the tables were opened) to its seats: seat ``n``
is item ``n - 1``, holding the entry seated there or ``None`` when it is empty. A seat whose
entry has busted but is not yet unseated is not empty (nobody may be seated there yet), and it
does not count as a player of the table.

- **The first draw** spreads the field over ``ceil(field / seats)`` tables, within one player
  of each other, at seats drawn from the draw's seed.
- **A late entry** takes the last open seat (the highest-numbered empty one) at the table with
  the fewest players (the first opened at equal counts).
- **Breaking**: as soon as the players still in fit on one fewer table, the table with the
  fewest players (the last opened at equal counts) breaks; each of its players in turn moves
  to the last open seat at the table with the fewest players.
- **Balancing**: when two tables differ by more than one player, one player moves from the
  table with the most players (the first opened at equal counts) to the last open seat at the
  table with the fewest. Who moves goes by position: the player sitting in the seat with the
  same number as that open seat, else the next occupied seat after it (seat numbers wrapping).
- Players move only between hands: the planner says what should move; the decide step waits
  until the source table is held and between hands before anyone leaves it.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

Layout = Mapping[str, Sequence[str | None]]


@dataclass(frozen=True, slots=True)
class Move:
    entry: str
    from_table: str
    from_seat: int
    to_table: str
    to_seat: int


@dataclass(frozen=True, slots=True)
class BreakTable:
    table_id: str


def tables_needed(players: int, seats: int) -> int:
    return max(1, -(-players // seats))


def first_draw(entries: Sequence[str], table_ids: Sequence[str], seats: int,
               seed: int) -> list[tuple[str, str, int]]:
    """(entry, table, seat) for every entry: the entries shuffled by ``seed`` are dealt round
    the tables in turn, each table's seats shuffled by the same draw."""
    if len(entries) > len(table_ids) * seats:
        raise ValueError("not enough seats for the field")
    rng = random.Random(seed)
    order = list(entries)
    rng.shuffle(order)
    seat_orders = {t: rng.sample(range(1, seats + 1), seats) for t in table_ids}
    out = []
    for i, entry in enumerate(order):
        table = table_ids[i % len(table_ids)]
        out.append((entry, table, seat_orders[table][i // len(table_ids)]))
    return out


def counts(layout: Layout, alive: Collection[str]) -> dict[str, int]:
    """Players still in at each table."""
    return {t: sum(1 for e in seats if e is not None and e in alive)
            for t, seats in layout.items()}


def last_open_seat(seats: Sequence[str | None]) -> int | None:
    for n in range(len(seats), 0, -1):
        if seats[n - 1] is None:
            return n
    return None


def shortest(layout: Layout, alive: Collection[str], *, skip: str = "") -> str | None:
    """The table with the fewest players and an empty seat (the first opened at equals)."""
    c = counts(layout, alive)
    open_tables = [t for t in layout if t != skip and last_open_seat(layout[t]) is not None]
    return min(open_tables, key=lambda t: c[t], default=None)


def late_seat(layout: Layout, alive: Collection[str]) -> tuple[str, int] | None:
    """Where a late entry sits, or None when every seat is taken (a new table is needed)."""
    table = shortest(layout, alive)
    if table is None:
        return None
    seat = last_open_seat(layout[table])
    assert seat is not None
    return table, seat


def mover(seats: Sequence[str | None], alive: Collection[str], seat: int) -> int:
    """The seat of the player who moves for an open seat numbered ``seat`` elsewhere: that
    seat, else the next occupied one (by a player still in) after it."""
    n = len(seats)
    for k in range(n):
        s = (seat - 1 + k) % n + 1
        entry = seats[s - 1]
        if entry is not None and entry in alive:
            return s
    raise ValueError("the table has nobody to move")


def plan(layout: Layout, alive: Collection[str], seats: int) -> BreakTable | Move | None:
    """The next step towards a balanced field, or None when it is balanced."""
    c = counts(layout, alive)
    players = sum(c.values())
    if len(layout) > 1 and players <= (len(layout) - 1) * seats:
        order = list(layout)
        return BreakTable(min(reversed(order), key=lambda t: c[t]))
    if len(layout) < 2:
        return None
    longest = max(layout, key=lambda t: c[t])
    target = shortest(layout, alive, skip=longest)
    if target is None or c[longest] - c[target] <= 1:
        return None
    to_seat = last_open_seat(layout[target])
    assert to_seat is not None
    from_seat = mover(layout[longest], alive, to_seat)
    entry = layout[longest][from_seat - 1]
    assert entry is not None
    return Move(entry, longest, from_seat, target, to_seat)


def break_move(layout: Layout, alive: Collection[str], breaking: str) -> Move | None:
    """The next player to leave the breaking table, or None once it is empty of players."""
    seats = layout[breaking]
    for s, entry in enumerate(seats, start=1):
        if entry is not None and entry in alive:
            target = shortest(layout, alive, skip=breaking)
            if target is None:
                return None
            to_seat = last_open_seat(layout[target])
            assert to_seat is not None
            return Move(entry, breaking, s, target, to_seat)
    return None


def spread(layout: Layout, alive: Collection[str]) -> int:
    """The difference between the most and the fewest players at a table."""
    c = list(counts(layout, alive).values())
    return max(c) - min(c) if c else 0
