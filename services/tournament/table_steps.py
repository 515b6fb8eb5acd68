"""The process manager's table steps for one tournament: each reads the model's intent from
the folded log, makes the table match it with a command id derived from the log, and records
the outcome as a command of the tournament, so a crash between the two is carried on by the
next round (the table answers the repeat from its own log).

- every open tournament table exists, with the level's stakes (from its next hand);
- a table that has dealt no hand is paused until every seat the log gave it is filled
  (``seating``: it is opened, then paused before the first ``SeatEntrant``, and resumed by
  the round that finds its whole draw seated), so hand 1 is dealt to the whole draw;
- dealing is paused exactly while the model holds the table (break, balance, breaking, hand
  for hand) or it waits for its draw; under hand for hand a table is let deal one hand only
  (``one_hand``: the table pauses itself as that hand starts, so it deals no second one even
  while this service is down), and a started hand is reported before the pause is
  compared, so the hold that report adds is never undone by a second release;
- a hand in progress is reported started as soon as a round sees it (so hand for hand holds
  the table again and no move starts there), and each finished hand's stacks at its start
  and end, as the table recorded them, are reported (busts and places follow);
- each assigned seat is taken (``SeatEntrant`` with the entry's stack), each busted entry's
  seat emptied (``UnseatEntrant``: 0 chips);
- a move: unseated at its table (refused while that seat is in a hand: the next round tries
  again), then seated with the same stack at the other;
- a closed table is closed.
"""

from __future__ import annotations

import structlog

from tournament import commands as c
from tournament.app import Writer
from tournament.clients import Refused, Unavailable, key
from tournament.conduct import H4H
from tournament.state import RUNNING, Table, Tournament
from tournament.tables import TableClient, TableState

log = structlog.get_logger("tournament.table_steps")

SEATING = "seating"
"""The pause of a table that has dealt no hand while a seat its draw gave it is not filled."""


def _awaits_draw(t: Tournament, k: str, table: Table, state: TableState) -> bool:
    """Whether table ``k`` must wait for its draw before it deals (RULES 2.5: every entrant
    is dealt in): it has dealt no hand yet, and an entry the log seated there (its first
    draw, a late entry, a move in flight to it) is not confirmed seated. From the log and
    the table's own count only, so a round after a crash decides the same."""
    if state.hands_started or table.last_hand or table.in_hand:
        return False
    if any(e is not None and not t.entries[e].seated for e in table.seats):
        return True
    return t.move is not None and t.move.to_table == k


class TableSteps:
    def __init__(self, app: Writer, tables: TableClient) -> None:
        self._app = app
        self._tables = tables
        self._closed: set[str] = set()

    async def round(self, tid: str) -> int:
        """One round of every table's steps. A table whose call is refused or unanswered
        waits for the next round, and only it: its seats and a move to or from it wait
        with it, while every other table goes on (one stuck table never stalls the
        others)."""
        t = await self._app.load(tid)
        done = await self._close(tid, t)
        if t.phase != RUNNING:
            return done
        waiting: set[str] = set()
        done += await self._tables_now(tid, t, waiting)
        t = await self._app.load(tid)
        done += await self._seats(tid, t, waiting)
        t = await self._app.load(tid)
        m = t.move
        if m is not None and {m.from_table, m.to_table} & waiting:
            return done
        return done + await self._move(tid, t)

    async def _close(self, tid: str, t: Tournament) -> int:
        done = 0
        for k in sorted(t.closed - self._closed):
            await self._tables.close(k, key(tid, "close", k))
            self._closed.add(k)
            done += 1
        return done

    async def _tables_now(self, tid: str, t: Tournament, waiting: set[str] | None = None
                          ) -> int:
        done = 0
        for k in list(t.tables):
            # ``t`` is the log as of this table's turn: the reports of the table before may
            # have moved it on (a level, a table closed), and a key and what it stands for
            # must come from one state (the stakes of level N under the key of level N).
            if k not in t.tables:
                continue
            try:
                done += await self._table_now(tid, k, t)
            except (Refused, Unavailable) as exc:
                if waiting is None:
                    raise
                waiting.add(k)
                log.info("tournament_table_waits", tournament_id=tid, table_id=k,
                         error=str(exc))
            t = await self._app.load(tid)
        return done

    async def _table_now(self, tid: str, k: str, t: Tournament) -> int:
        """Table ``k`` made to match the log: it exists with the level's stakes, its hands
        are reported, and it deals exactly when nothing holds it."""
        done = 0
        level = t.cfg.structure.level(t.level)
        state = await self._tables.state(k)
        if not state.exists:
            await self._tables.open(tid, k, t.cfg.seats, level, key(tid, "open", k),
                                    t.cfg.pace)
            state = await self._tables.state(k)
            done += 1
        await self._tables.stakes(k, level, key(tid, "stakes", k, t.level))
        done += await self._hands(tid, k, t.tables[k], state)
        t = await self._app.load(tid)
        table = t.tables.get(k)
        if table is None:
            return done
        holds = table.holds | ({SEATING} if _awaits_draw(t, k, table, state) else set())
        want = bool(holds)
        if want != state.paused:
            one_hand = not want and t.hand_for_hand
            reason = ",".join(sorted(holds)) or (H4H if one_hand else "deal")
            await self._tables.pause(k, want, reason, key(tid, "pause", k, want, t.version),
                                     one_hand=one_hand)
            done += 1
        return done

    async def _hands(self, tid: str, k: str, table: Table, state: TableState) -> int:
        """Report each hand the table started or finished since the log's last report."""
        done = 0
        for n in range(table.last_hand + 1, state.hands_started + 1):
            stacks = await self._tables.hand(k, n)
            if stacks is None:  # in progress: say so as soon as it is seen
                if table.in_hand != n and not table.in_hand:
                    now = tuple(sorted((s, chips) for s, (_, chips) in state.seats.items()
                                       if chips > 0))
                    await self._app.execute(tid, c.ReportHandStarted(k, n, now),
                                            f"hs.{k}.{n}")
                    done += 1
                break
            if table.in_hand != n:  # not seen in progress (a repeat is a no-op)
                await self._app.execute(tid, c.ReportHandStarted(k, n, stacks.start),
                                        f"hr.{k}.{n}")
            await self._app.execute(tid, c.ReportHandEnded(k, n, stacks.end, stacks.start),
                                    f"he.{k}.{n}")
            done += 1
        return done

    async def _seats(self, tid: str, t: Tournament, waiting: set[str] | None = None) -> int:
        """Each assigned seat taken and each busted entry's seat emptied; a table that
        waits (``waiting``: its steps were refused this round) is left for the next round,
        and a refused seat makes its table wait."""
        done = 0
        waiting = set() if waiting is None else waiting
        moving = t.move.entry_id if t.move is not None else ""
        for e in t.field():
            if e.table_id in t.tables and not e.seated and e.bust is None \
                    and e.entry_id != moving and e.table_id not in waiting:
                try:
                    await self._seat(tid, e.table_id, e.seat, e.player_id, e.entry_id,
                                     e.chips)
                except (Refused, Unavailable) as exc:
                    waiting.add(e.table_id)
                    log.info("tournament_table_waits", tournament_id=tid,
                             table_id=e.table_id, error=str(exc))
                    continue
                await self._app.execute(tid, c.ConfirmSeat(e.entry_id),
                                        f"seated.{e.entry_id}.{e.table_id}.{e.seat}")
                done += 1
        for k, table in t.tables.items():
            for s, entry in enumerate(table.seats, start=1):
                if entry is None or t.entries[entry].bust is None or k in waiting:
                    continue
                player = t.entries[entry].player_id
                try:
                    await self._tables.unseat(k, s, player, key(tid, "bust", entry))
                except Refused as refused:
                    # unseated already (by a move's step that raced the hand's bust): the
                    # seat is empty, and the model assigns it to nobody until it is freed
                    if refused.reason != "not_that_players_seat":
                        waiting.add(k)
                        log.info("tournament_table_waits", tournament_id=tid, table_id=k,
                                 error=str(refused))
                        continue
                except Unavailable as exc:
                    waiting.add(k)
                    log.info("tournament_table_waits", tournament_id=tid, table_id=k,
                             error=str(exc))
                    continue
                await self._app.execute(tid, c.ConfirmSeatFreed(k, s), f"freed.{k}.{s}.{entry}")
                done += 1
        return done

    async def _seat(self, tid: str, table_id: str, seat: int, player: str, entry: str,
                    chips: int) -> None:
        """Seat ``entry`` at the table. If the table already seated it under this key (the
        process died before the log confirmed the seat) and has dealt it hands since, the
        stack the log now holds differs from the first request's and the table refuses the
        retry as ``command_id_reused``: the seat is done when the table shows the player
        there."""
        try:
            await self._tables.seat(table_id, seat, player, chips,
                                    key(tid, "seat", entry, table_id, seat))
        except Refused as refused:
            if refused.reason != "command_id_reused":
                raise
            state = await self._tables.state(table_id)
            if state.seats.get(seat, ("", 0))[0] != player:
                raise

    async def _move(self, tid: str, t: Tournament) -> int:
        m = t.move
        if m is None:
            return 0
        player = t.entries[m.entry_id].player_id
        if t.move_stack < 0:
            try:
                stack = await self._tables.unseat(m.from_table, m.from_seat, player,
                                                  key(tid, m.move_id, "off"))
            except Refused as refused:
                if refused.reason == "hand_in_progress":
                    return 0  # paused: the hand ends, the next round unseats
                raise
            if stack == 0:
                return 0  # busted in the hand just ended: its report cancels the move
            await self._app.execute(tid, c.ConfirmUnseated(m.move_id, stack),
                                    f"off.{m.move_id}")
            t = await self._app.load(tid)
        await self._tables.seat(m.to_table, m.to_seat, player, t.move_stack,
                                key(tid, m.move_id, "on"))
        await self._app.execute(tid, c.ConfirmReseated(m.move_id), f"on.{m.move_id}")
        return 1
