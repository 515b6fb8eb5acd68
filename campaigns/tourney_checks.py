"""``make tournament``'s invariants as comparisons that can come out false, on plain data (no
I/O), each unit-tested on a bad input (``tests/unit/campaigns/test_tourney_checks.py``).

An observation joins what the tables show (each seat's stack, plus what each player has put
into the hand in progress) with what the tournament's log says of the entries no table shows
(an entry being moved, unseated with a stack, or not seated yet). It is *indeterminate*, and
skipped, when the two cannot be joined: a table unreadable at that moment, a hand being
settled (stacks and pots change together), or a moving entry that its table has unseated
before the log recorded the stack.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Seat:
    player_id: str
    stack: int
    in_hand: int = 0
    """Chips this player has put into the hand in progress."""


@dataclass(frozen=True, slots=True)
class TableSeen:
    table_id: str
    seats: tuple[Seat, ...]
    settling: bool = False
    """A hand is being settled: stacks and pots move together, the sum is not taken."""


@dataclass(frozen=True, slots=True)
class EntrySeen:
    """An entry still in, as the tournament's log has it."""

    entry_id: str
    player_id: str
    chips: int
    """Its stack at the last report, or the stack it was unseated with."""
    placed: bool = True
    """The log has it at a seat or in a move (false: nowhere)."""
    moving_unrecorded: bool = False
    """It is being moved and the log does not have its unseated stack yet."""


@dataclass
class Observation:
    chips: int | None = None
    """The sum of every chip seen (None: indeterminate)."""
    problems: list[str] = field(default_factory=list)


def observe(tables: Sequence[TableSeen], alive: Sequence[EntrySeen],
            busted: Iterable[str] = ()) -> Observation:
    """The chips at the tables plus those of the entries in the log that no table shows; and
    who is seated twice, at a table though not in the field, or nowhere.

    >>> observe([TableSeen("t", (Seat("ann", 50), Seat("ann", 50)))],
    ...         [EntrySeen("e1", "ann", 100)]).problems
    ['ann seated twice: t, t']
    """
    out = Observation()
    where: dict[str, list[str]] = {}
    total = 0
    for table in tables:
        for seat in table.seats:
            where.setdefault(seat.player_id, []).append(table.table_id)
            total += seat.stack + seat.in_hand
    out_ids = set(busted)
    known = {e.player_id for e in alive}
    for player, at in where.items():
        if len(at) > 1:
            out.problems.append(f"{player} seated twice: {', '.join(at)}")
        if player not in known and player not in out_ids:
            out.problems.append(f"{player} seated at {at[0]} but not in the field")
    indeterminate = any(t.settling for t in tables)
    for entry in alive:
        if entry.player_id in where:
            continue
        if entry.moving_unrecorded:
            indeterminate = True
        elif not entry.placed:
            out.problems.append(f"{entry.player_id} ({entry.entry_id}) seated nowhere")
        else:
            total += entry.chips
    out.chips = None if indeterminate else total
    return out


def places_problems(places: Sequence[tuple[int, int]]) -> list[str]:
    """Each entry's place range (``place``, ``place_to``; ``place_to`` 0 or equal: no tie)
    must make the places 1..N a permutation: ties share a range exactly as wide as the
    entries sharing it.

    >>> places_problems([(1, 0), (1, 0)])
    ['place 1 held by 2 entries, its range 1-1 has room for 1', 'places [1] are not 1..2']
    """
    problems = []
    groups: Counter[tuple[int, int]] = Counter(
        (p, max(p, q)) for p, q in places)
    for (low, high), n in sorted(groups.items()):
        if n != high - low + 1:
            problems.append(f"place {low} held by {n} entries, its range {low}-{high} has "
                            f"room for {high - low + 1}")
    covered = sorted(i for low, high in groups for i in range(low, high + 1))
    if covered != list(range(1, len(places) + 1)):
        problems.append(f"places {covered[:20]} are not 1..{len(places)}")
    return problems


def payout_problems(prizes: Mapping[str, int], paid: Iterable[str], pool: int,
                    wallet_pool_left: int, balances: Mapping[str, int],
                    prize_of_player: Mapping[str, int]) -> list[str]:
    """Every prize due paid, once; the prizes sum to the pool; the pool account is empty;
    each player's wallet balance is exactly their prize (they held nothing else).

    >>> payout_problems({"p1": 70, "p2": 30}, ["p1", "p2"], 100, 0,
    ...                 {"ann": 140, "bob": 30}, {"ann": 70, "bob": 30})
    ['ann holds 140, won 70']
    """
    problems = []
    unpaid = sorted(set(prizes) - set(paid))
    if unpaid:
        problems.append(f"prizes never paid: {unpaid[:10]}")
    if sum(prizes.values()) != pool:
        problems.append(f"prizes sum to {sum(prizes.values())}, the pool is {pool}")
    if wallet_pool_left:
        problems.append(f"the pool account holds {wallet_pool_left} at the end")
    for player, balance in sorted(balances.items()):
        won = prize_of_player.get(player, 0)
        if balance != won:
            problems.append(f"{player} holds {balance}, won {won}")
    return problems


def enough(hands: int, moves: int, kills: int) -> list[str]:
    """A run with no hands, no moves or no kills cannot pass.

    >>> enough(10, 0, 1)
    ['no player was moved']
    """
    problems = []
    if hands < 1:
        problems.append("no hand was played")
    if moves < 1:
        problems.append("no player was moved")
    if kills < 1:
        problems.append("nothing was killed")
    return problems


def kill_problems(asked: Sequence[str], killed: Mapping[str, int]) -> list[str]:
    """Every kind of process asked for was killed at least once.

    >>> kill_problems(["tournament", "redis"], {"tournament": 2})
    ['no redis was killed']
    """
    return [f"no {kind} was killed" for kind in dict.fromkeys(asked) if not killed.get(kind)]


def hand_for_hand_state(switches: Sequence[bool]) -> str:
    """What the log's hand-for-hand switches (each ``HandForHand.on``, in order) show:
    ``never``, ``entered`` (and still on) or ``entered_and_left``.

    >>> hand_for_hand_state([True, False])
    'entered_and_left'
    """
    if True not in switches:
        return "never"
    return "entered" if switches[-1] else "entered_and_left"


def bubble_reached(entrants: int, paid: int, bust_rounds: Sequence[int]) -> bool:
    """Whether the field came down to ``paid`` + 1 left after one of the bust rounds (the
    number of entries out in each, in order); False when a round busted several and went
    from more to fewer (the bubble burst without one more to play for).

    >>> bubble_reached(12, 3, [2, 3, 2, 1]), bubble_reached(12, 3, [2, 3, 4])
    (True, False)
    """
    left = entrants
    for out in bust_rounds:
        left -= out
        if left == paid + 1:
            return True
    return False


def hand_for_hand_problems(state: str, entrants: int, paid: int, seats: int,
                           bust_rounds: Sequence[int]) -> tuple[str, list[str]]:
    """The state to report and the problems: a field whose bubble (``paid`` + 1 left) needs
    more than one table of ``seats`` and that came down to it must have gone hand for hand
    and left it when the bubble burst; a field whose bubble fits one table, or whose bubble
    a round of several busts skipped, is reported (``not_due``, ``skipped``), no problem.

    >>> hand_for_hand_problems("never", 60, 9, 8, [1] * 59)
    ('never', ['the field came down to 10 left at several tables and never went hand for hand'])
    """
    if entrants <= paid + 1 or paid + 1 <= seats:
        return ("not_due" if state == "never" else state), []
    if not bubble_reached(entrants, paid, bust_rounds):
        return ("skipped" if state == "never" else state), []
    if state == "never":
        return state, [f"the field came down to {paid + 1} left at several tables and never "
                       "went hand for hand"]
    if state == "entered":
        return state, ["hand for hand was entered and never left"]
    return state, []


def bust_rounds(rounds: Iterable[int]) -> list[int]:
    """The busts of each round, in order, from each bust's round in the log's order.

    >>> bust_rounds([1, 2, 2, 3])
    [1, 2, 1]
    """
    out: list[int] = []
    last = None
    for r in rounds:
        if out and r == last:
            out[-1] += 1
        else:
            out.append(1)
        last = r
    return out


def bot_problems(last_lines: Mapping[str, str]) -> list[str]:
    """Each bot process's last line must report ``errors=0``.

    >>> bot_problems({"bots0": "tournament=T bots=8 errors=0 phase=finished",
    ...               "bots1": "tournament=T bots=8 errors=2 phase=finished", "bots2": ""})
    ['bots1 reported errors=2', 'bots2 ended without its errors= tally']
    """
    problems = []
    for name, line in last_lines.items():
        found = [w for w in line.split() if w.startswith("errors=")]
        if not found or not found[-1].removeprefix("errors=").isdigit():
            problems.append(f"{name} ended without its errors= tally")
        elif int(found[-1].removeprefix("errors=")):
            problems.append(f"{name} reported {found[-1]}")
    return problems
