"""``stud replay tournament --id T``: a tournament's history from its live log (entrants,
levels and breaks, moves, busts with places, payouts), verified against the tables' logs and
the wallet's pool record:

- each move's stack (``MoveUnseated``) is the stack the table's ``PlayerLeft`` took off that
  seat, and each bust's unseat took off 0 (the unseats of a seat, in order);
- each bust is a 0 stack at that seat at the end of the table's hand it names;
- the places, recomputed from the busts alone (the later round the better, then the larger
  stack at the start of that hand; equal ones share), are a permutation of 1..field and agree
  with every prize's place;
- every money fact, whatever the phase (a cancelled tournament's too): each refund and prize
  due is paid, they sum to the buy-ins charged once it is over, and against the wallet's pool
  record every entry it charged is in the log, its refunds and prizes are the log's, its
  balance is what they leave, and an empty pool once it is over (``check_money``).

It reads Redis directly, as the rest of ``stud replay`` does (``REDIS_URL`` or make run's),
and a tournament whose stream the archiver moved to PostgreSQL there (``STUD_SUPPORT_DSN`` or
``STUD_AUDITOR_DSN``, make run's by default), with the same output: one reader of either
store, the archiver's own (:func:`studhistory.tournament_archive.read_raw`). The last line
is ``entrants=… levels=… moves=… busts=… payouts=… verified=yes|no``, exit status 1 when a
check fails and 2 when the tournament cannot be read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

import psycopg
from redis.exceptions import ResponseError

from rules.events import PlayerLeft
from stud.v1 import tournament_pb2 as pb
from studhistory.tournament_archive import Record as Record  # the records it reads
from studhistory.tournament_archive import read_raw, record_of
from studkit import keys
from studtools.replay_hands import split_hands
from studtools.replay_source import RedisSource, SourceError, TableLog


@dataclass
class History:
    """What the tournament's log says, by kind."""

    tournament_id: str = ""
    name: str = ""
    buy_in: int = 0
    players: dict[str, str] = field(default_factory=dict)
    """entry -> player (every entry requested)."""
    paid: list[str] = field(default_factory=list)
    withdrawn: set[str] = field(default_factory=set)
    levels: list[tuple[int, float]] = field(default_factory=list)
    breaks: list[tuple[int, float]] = field(default_factory=list)
    moves: list[tuple[pb.TournamentEvent.MoveStarted, int]] = field(default_factory=list)
    """Each move and the stack it was unseated with (-1: not unseated)."""
    busts: list[pb.TournamentEvent.Busted] = field(default_factory=list)
    prizes: list[pb.TournamentEvent.PrizeDue] = field(default_factory=list)
    refunds: list[pb.TournamentEvent.RefundDue] = field(default_factory=list)
    paid_out: set[str] = field(default_factory=set)
    tables: list[str] = field(default_factory=list)
    unseats: dict[tuple[str, int], list[tuple[str, int]]] = field(
        default_factory=lambda: defaultdict(list))
    """(table, seat) -> what the tournament unseated there, in log order: (what, stack)."""
    finished: str = ""
    cancelled: str = ""

    def field_entries(self) -> list[str]:
        return [e for e in self.paid if e not in self.withdrawn]


def history_of(records: Sequence[Record]) -> History:
    """Fold the tournament's records into a :class:`History` (pure)."""
    h = History()
    moving: dict[str, int] = {}
    for r in records:
        e = r.event
        kind = e.WhichOneof("kind")
        body: Any = getattr(e, kind) if kind else None
        if kind == "created":
            h.tournament_id, h.name = body.tournament_id, body.config.name
            h.buy_in = body.config.buy_in
        elif kind == "entry_requested":
            h.players[body.entry_id] = body.player_id
        elif kind == "entry_paid":
            h.paid.append(body.entry_id)
        elif kind in ("entry_withdrawn", "entry_dropped"):
            h.withdrawn.add(body.entry_id)
        elif kind == "level_started":
            h.levels.append((body.level, r.seconds))
        elif kind == "break_started":
            h.breaks.append((body.after_level, r.seconds))
        elif kind == "table_opened":
            h.tables.append(body.table_id)
        elif kind == "move_started":
            moving[body.move_id] = len(h.moves)
            h.moves.append((body, -1))
        elif kind == "move_unseated" and body.move_id in moving:
            i = moving[body.move_id]
            move = h.moves[i][0]
            h.moves[i] = (move, body.stack)
            h.unseats[(move.from_table, move.from_seat)].append(
                (f"move {body.move_id}", body.stack))
        elif kind == "seat_freed":
            h.unseats[(body.table_id, body.seat)].append(("a bust", 0))
        elif kind == "busted":
            h.busts.append(body)
        elif kind == "prize_due":
            h.prizes.append(body)
        elif kind == "refund_due":
            h.refunds.append(body)
        elif kind == "payment_made":
            h.paid_out.add(body.payment_id)
        elif kind == "finished":
            h.finished = body.winner
        elif kind == "cancelled":
            h.cancelled = body.reason
    return h


def places(h: History) -> dict[str, tuple[int, int]]:
    """Each field entry's place (from, to) from the busts alone; the entries still in share
    1..alive."""
    busted = {b.entry_id: b for b in h.busts}
    alive = [e for e in h.field_entries() if e not in busted]
    out = {e: (1, len(alive)) for e in alive}
    ranked = sorted((b for b in h.busts if b.entry_id in set(h.field_entries())),
                    key=lambda b: (-b.round, -b.start_stack))
    place, i = len(alive) + 1, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and (ranked[j].round, ranked[j].start_stack) == (
                ranked[i].round, ranked[i].start_stack):
            j += 1
        out.update({b.entry_id: (place, place + j - i - 1) for b in ranked[i:j]})
        place, i = place + j - i, j
    return out


def check_tables(h: History, tables: Mapping[str, TableLog]) -> list[str]:
    """Moves' and busts' stacks against the tables' logs; the problems found."""
    problems: list[str] = []
    left: dict[tuple[str, int], list[int]] = defaultdict(list)
    end_stacks: dict[tuple[str, int], dict[int, int]] = {}
    for table_id, log in tables.items():
        for item in log.events:
            if isinstance(item.event, PlayerLeft):
                left[(table_id, item.event.seat)].append(item.event.stack)
        hands, _ = split_hands(table_id, log.events, log.start)
        for hand in hands:
            if hand.complete:
                state = hand.after()
                end_stacks[(table_id, hand.number)] = {
                    i + 1: s.stack for i, s in enumerate(state.seats) if s is not None}
    for b in h.busts:
        stacks = end_stacks.get((b.table_id, b.hand_number))
        if stacks is None:
            problems.append(f"bust of {b.entry_id}: table {b.table_id} has no finished hand "
                            f"{b.hand_number}")
        elif stacks.get(b.seat, 0) != 0:
            problems.append(f"bust of {b.entry_id}: seat {b.seat} of {b.table_id} ended hand "
                            f"{b.hand_number} with {stacks[b.seat]}")
    for (table_id, seat), wanted in h.unseats.items():
        # The table's unseats of that seat, in order, begin with the tournament's (closing
        # the table at the end may unseat the winner after them).
        got = left.get((table_id, seat), [])[:len(wanted)]
        if got != [stack for _, stack in wanted]:
            problems.append(f"{', '.join(w for w, _ in wanted)}: table {table_id} seat "
                            f"{seat} recorded unseats of {got}, the tournament "
                            f"{[stack for _, stack in wanted]}")
    return problems


def check_money(h: History, pool: Mapping[str, str] | None) -> list[str]:
    """Every money fact, whatever the phase (a cancelled tournament's as much as a finished
    one's: issue 29, G2, where a cancelled one without prizes was not looked at): each refund
    and prize due has its payment; the refunds and prizes never exceed the buy-ins charged
    and, once it is over, are exactly those; and against the wallet's pool record (when
    readable): every entry it charged is one the log took, each refund the log made was
    refunded there and none other, the prizes it paid are those the log made, its balance is
    what its entries and prizes leave, and once every payment is made the pool is empty. The
    problems found."""
    problems: list[str] = []
    due: list[tuple[str, int, str]] = [(r.payment_id, r.buy_in, r.player_id)
                                       for r in h.refunds]
    due += [(p.payment_id, p.amount, p.player_id) for p in h.prizes]
    problems += [f"payment {k} ({amount:,} to {player}) is due and not paid"
                 for k, amount, player in due if k not in h.paid_out]
    charged = h.buy_in * len(h.paid)
    refunds = sum(r.buy_in for r in h.refunds)
    prizes = sum(p.amount for p in h.prizes)
    if refunds + prizes > charged:
        problems.append(f"refunds {refunds:,} and prizes {prizes:,} due exceed the buy-ins "
                        f"charged, {charged:,}")
    elif (h.finished or h.cancelled) and refunds + prizes != charged:
        problems.append(f"the tournament is over with buy-ins of {charged:,} charged and "
                        f"{refunds + prizes:,} due back (refunds {refunds:,}, prizes "
                        f"{prizes:,})")
    if pool is None:
        return problems
    entries = {k.partition(":")[2]: json.loads(v) for k, v in pool.items()
               if k.startswith("entry:")}
    log_paid = set(h.paid)
    for entry_id, w in entries.items():
        if entry_id not in log_paid or h.players.get(entry_id) != w["player"]:
            problems.append(f"the wallet charged entry {entry_id} ({w['player']}), which the "
                            "log never took")
    problems += [f"entry {e} is paid in the log, the wallet never charged it"
                 for e in h.paid if e not in entries]
    refunded_in_log = {r.entry_id for r in h.refunds if r.payment_id in h.paid_out}
    owed = {r.entry_id for r in h.refunds}
    for entry_id, w in entries.items():
        if int(w["refunded"]) == 1 and entry_id not in owed:
            problems.append(f"the wallet refunded entry {entry_id}, the log owes it no refund")
        if entry_id in refunded_in_log and int(w["refunded"]) != 1:
            problems.append(f"refund/{entry_id} is paid in the log, the wallet has not "
                            "refunded it")
    paid = sorted(int(json.loads(v)["amount"]) for k, v in pool.items()
                  if k.startswith("prize:"))
    made = sorted(p.amount for p in h.prizes if p.payment_id in h.paid_out)
    if paid != made:
        problems.append(f"the wallet paid prizes {paid}, the tournament recorded {made}")
    if "balance" in pool:
        balance = int(pool["balance"])
        held = sum(int(w["buy_in"]) for w in entries.values() if int(w["refunded"]) != 1)
        if balance != held - sum(paid):
            problems.append(f"the wallet's pool balance is {balance:,}, its entries and "
                            f"prizes leave {held - sum(paid):,}")
        if (h.finished or h.cancelled) and balance != 0:
            problems.append(f"the tournament is over and the pool still holds {balance:,}")
    return problems


def check_places(h: History) -> list[str]:
    problems: list[str] = []
    ranks = places(h)
    if h.finished:
        # each range once (entries tied on a range share it), and only if exactly as many
        # entries share it as it is wide
        covered = sorted(p for a, b in set(ranks.values()) for p in range(a, b + 1)
                         if b - a + 1 == sum(1 for v in ranks.values() if v == (a, b)))
        if covered != list(range(1, len(ranks) + 1)):
            problems.append(f"places are not 1..{len(ranks)}: {sorted(ranks.values())}")
    for p in h.prizes:
        if p.place and ranks.get(p.entry_id) != (p.place, p.place_to or p.place):
            problems.append(f"prize {p.payment_id}: place {p.place}-{p.place_to}, the busts "
                            f"say {ranks.get(p.entry_id)}")
    return problems


# --- reading -----------------------------------------------------------------------------

async def read_records(source: RedisSource, tournament_id: str) -> list[Record]:
    """The tournament's records from Redis, else from PostgreSQL (the source's archive DSN);
    :class:`SourceError` when neither has it."""
    try:
        raws, _ = await read_raw(source.client, tournament_id, source.history_dsn)
    except psycopg.Error as exc:
        raise SourceError(f"tournament {tournament_id}: PostgreSQL: {exc}") from None
    if not raws:
        where = "" if source.history_dsn else (
            " in Redis (a finished tournament the archiver moved to PostgreSQL needs "
            "STUD_SUPPORT_DSN)")
        raise SourceError(f"no tournament {tournament_id!r}{where}")
    return [record_of(raw) for _, raw in raws]


async def read_pool(source: RedisSource, tournament_id: str) -> dict[str, str] | None:
    """The wallet's record of the pool (its hash: ``entry:<id>``, ``prize:<key>``, ...) and
    the pool account's balance (``balance``, left out when this user may not read the
    balances); None when this Redis user may not read the pool."""
    try:
        raw = await source.client.hgetall(keys.wallet_key(f"pool:{tournament_id}"))
    except ResponseError:  # an ACL refusal (NOPERM): the check is skipped, and said so
        return None
    out = {(k.decode() if isinstance(k, bytes) else k):
           (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}
    try:
        balance = await source.client.hget(keys.wallet_key("balances"), f"pool:{tournament_id}")
    except ResponseError:
        return out
    out["balance"] = balance.decode() if isinstance(balance, bytes) else str(balance or 0)
    return out


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")


def report(h: History, problems: Sequence[str], pool_read: bool, out: TextIO) -> None:
    ranks = places(h)
    print(f"tournament {h.tournament_id} ({h.name}): {len(h.field_entries())} entrants, "
          f"tables {', '.join(h.tables)}", file=out)
    for e in h.field_entries():
        print(f"entrant {e} {h.players.get(e, '?')}", file=out)
    for level, at in h.levels:
        print(f"level {level} at {_time(at)}", file=out)
    for after, at in h.breaks:
        print(f"break after level {after} at {_time(at)}", file=out)
    for move, stack in h.moves:
        print(f"move {move.move_id} {move.entry_id} ({h.players.get(move.entry_id, '?')}) "
              f"{move.from_table} seat {move.from_seat} -> {move.to_table} seat "
              f"{move.to_seat} " + (f"stack {stack}" if stack >= 0 else "(cancelled)"),
              file=out)
    for b in h.busts:
        a, z = ranks.get(b.entry_id, (0, 0))
        print(f"bust {b.entry_id} ({h.players.get(b.entry_id, '?')}) {b.table_id} seat "
              f"{b.seat} hand {b.hand_number}: place {a if a == z else f'{a}-{z}'}", file=out)
    for p in h.prizes:
        print(f"payout {p.entry_id} ({p.player_id}) place {p.place}: {p.amount}"
              f"{'' if p.payment_id in h.paid_out else ' (not paid yet)'}", file=out)
    for r in h.refunds:
        print(f"refund {r.entry_id} ({r.player_id}): {r.buy_in + r.fee}"
              f"{'' if r.payment_id in h.paid_out else ' (not paid yet)'}", file=out)
    if not pool_read:
        print("note: the wallet's pool record is not readable with these credentials",
              file=out)
    for problem in problems:
        print(f"FAILED: {problem}", file=out)
    # A move is counted once its player was unseated with a stack (a move whose player
    # busted in the hand their table was finishing is cancelled before that).
    moved = sum(1 for _move, stack in h.moves if stack >= 0)
    print(f"entrants={len(h.field_entries())} levels={len(h.levels)} moves={moved} "
          f"busts={len(h.busts)} payouts={len(h.prizes)} "
          f"verified={'no' if problems else 'yes'}", file=out)


async def run(source: RedisSource, tournament_id: str, out: TextIO) -> int:
    h = history_of(await read_records(source, tournament_id))
    tables = {t: await source.log(t) for t in h.tables}
    pool = await read_pool(source, tournament_id)
    problems = check_tables(h, tables) + check_places(h) + check_money(h, pool)
    report(h, problems, pool is not None, out)
    return 1 if problems else 0
