"""``stud play`` in a tournament: the lobby's text (list, register, unregister) and
:class:`TournamentPlayApp`, the table screen that follows the player's seat.

The app follows the tournament with :meth:`~studclient.tournament.TournamentClient.follow`:
when the tournament seats the player, and again each time it moves them, the table screen
switches to the new table (a line ``Moved: table A seat 2 -> table B seat 5`` in the dealer
log); the title shows the level, its stakes and the clock (``Level 2 · 150/300, ante 25 ·
next 300/600 in 1:23``, or ``Break · play resumes in 0:45``); a bust and, at the end, the
player's place and prize are written to the log. The player does not sit down or leave in a
tournament: the tournament seats them (so ``s``, ``t`` and ``l`` are refused by the table).

A player who holds no entry still in rails the tournament: the screen watches a table as the
public sees it (no down card, no seat), the chip leader's by default, moving with the lead
(the tournament read again after a table opens, closes or fills, and at most every second
otherwise), or the one picked (``stud play --tournament ID --table T``, or ``n`` for the next
open table).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar, Final

from google.protobuf.timestamp_pb2 import Timestamp
from textual.binding import Binding, BindingType
from textual.widgets import Static

from stud.v1 import table_pb2
from stud.v1 import tournament_pb2 as pb
from studclient import sitgo
from studclient.client import Client
from studclient.errors import NotFound, StudError
from studclient.tournament import Seat, SeatTracker, TournamentUpdate
from studclient.tourney_bots import PHASES
from studclient.tui import text as t
from studclient.tui.app import PlayApp, PlayOptions
from studclient.watch import TableWatch

FORMATS: Final[dict[int, str]] = {pb.TOURNAMENT_FORMAT_SIT_AND_GO: "sit & go",
                                  pb.TOURNAMENT_FORMAT_MULTI_TABLE: "MTT"}
CLOCK_EVENTS: Final = frozenset({"started", "level_started", "break_started", "finished",
                                 "cancelled", "hand_for_hand", "busted"})
"""Events after which the app reads the tournament again (clock, field, places)."""
RETRY_S: Final = 0.2
RAIL_EVENTS: Final = frozenset({"started", "seat_confirmed", "move_seated", "busted",
                                "table_closed", "finished", "cancelled"})
"""Events after which a rail reads the tournament at once (a table opened, closed or was
filled; a leader may have gone)."""
RAIL_READ_S: Final = 1.0
"""A rail reads the tournament (the chip counts) at most this often otherwise."""


# --- text (pure) -----------------------------------------------------------------------------

def stakes_text(level: pb.TournamentLevel) -> str:
    return (f"{t.chips(level.small_bet)}/{t.chips(level.big_bet)}, ante {t.chips(level.ante)},"
            f" bring-in {t.chips(level.bring_in)}")


def clock_text(view: pb.TournamentView | None, now: float) -> str:
    """The level (or break), its stakes and the time left, as the title shows it."""
    if view is None:
        return ""
    phase = PHASES.get(view.phase, "")
    if view.phase != pb.TOURNAMENT_PHASE_RUNNING or not view.HasField("clock"):
        return f"{view.config.name or view.tournament_id}: {phase}"
    clock = view.clock
    left = t.countdown(clock.ends_at.seconds + clock.ends_at.nanos / 1e9 - now)
    if clock.on_break:
        return f"Break after level {clock.level} · play resumes in {left}"
    head = f"Level {clock.level} · {stakes_text(clock.stakes)}"
    if clock.HasField("next"):
        nxt = clock.next
        head += f" · next {t.chips(nxt.small_bet)}/{t.chips(nxt.big_bet)} in {left}"
    if view.hand_for_hand:
        head += " · hand for hand"
    return head


def _seconds(ts: Timestamp) -> float:
    return float(ts.seconds + ts.nanos / 1e9)


def start_text(s: pb.TournamentSummary, now: float) -> str:
    """What a registering tournament waits for, with the time left: a multi-table's start,
    or when a sit & go's host fills the seats left (its ``start_at``: make run's demo seats
    its bots then); "" when there is nothing to wait for."""
    if s.phase != pb.TOURNAMENT_PHASE_REGISTERING or not s.HasField("start_at"):
        return ""
    left = _seconds(s.start_at) - now
    if s.format == pb.TOURNAMENT_FORMAT_SIT_AND_GO:
        return (f" · bots take the seats left in {t.countdown(left)}" if left > 0
                else " · bots taking the seats left")
    return f" · starts in {t.countdown(left)}" if left > 0 else " · starting"


def lobby_lines(tournaments: Sequence[pb.TournamentSummary],
                now: float | None = None) -> list[str]:
    """One line a tournament (``stud play --lobby``)."""
    if not tournaments:
        return ["no tournaments"]
    now = time.time() if now is None else now
    out = []
    for s in tournaments:
        entry = f"{t.chips(s.buy_in)}+{t.chips(s.fee)}"
        left = f", {s.players_left} left" if s.phase == pb.TOURNAMENT_PHASE_RUNNING else ""
        reg = " · registration open" if s.registration_open else ""
        out.append(f"{s.tournament_id}  {s.name} ({FORMATS.get(s.format, '?')}) {entry} · "
                   f"{PHASES.get(s.phase, '?')} · {s.entries} "
                   f"{'entry' if s.entries == 1 else 'entries'}{left}{reg}"
                   f"{start_text(s, now)}")
    return out


def closed_text(tid: str, view: pb.TournamentView,
                tournaments: Sequence[pb.TournamentSummary], now: float,
                window_s: int = sitgo.WINDOW_S) -> str:
    """Why a registration for ``tid`` was refused (full, closed) and where a seat is to be
    had: a sit & go still open, else, for make run's demo (:mod:`studclient.sitgo`, whose
    people-only window is ``window_s``), when its next one opens."""
    open_now = [s for s in tournaments if s.registration_open and s.tournament_id != tid
                and s.format == pb.TOURNAMENT_FORMAT_SIT_AND_GO]
    phase = PHASES.get(view.phase, "?")
    alive = sum(1 for e in view.entries if not e.place)
    state = (f"{tid} is {phase}" + (f" ({alive} of {len(view.entries)} players left)"
                                    if view.phase == pb.TOURNAMENT_PHASE_RUNNING else ""))
    if view.registration_open:
        state = f"{tid} is full ({len(view.entries)} of {view.config.seats or 8} seats)"
    lines = [f"{state}: no seat to take."]
    if open_now:
        s = open_now[-1]
        lines.append(f"{s.tournament_id} is open ({s.entries} of its seats taken"
                     f"{start_text(s, now)}): stud play --register {s.tournament_id}")
    elif sitgo.is_demo(tid) and view.phase in (pb.TOURNAMENT_PHASE_REGISTERING,
                                               pb.TOURNAMENT_PHASE_RUNNING):
        _tid, nxt = sitgo.current(tournaments)
        lines.append(f"The demo opens {sitgo.PREFIX}-{nxt} {sitgo.PAUSE_S:.0f} s after {tid} "
                     f"ends{_ends_text(view, now)}; then people have "
                     f"{window_s} s before the bots take the seats left. "
                     f"stud play --lobby shows it; stud play --tournament {tid} watches this "
                     f"one meanwhile.")
    return "\n".join(lines)


def _ends_text(view: pb.TournamentView, now: float) -> str:
    """A running tournament's level, to judge how long it has to go."""
    if view.phase != pb.TOURNAMENT_PHASE_RUNNING or not view.HasField("clock"):
        return ""
    levels = len(view.config.structure.levels)
    left = t.countdown(_seconds(view.clock.ends_at) - now)
    return f" (now at level {view.clock.level} of {levels}, the next in {left})"


def moved_line(before: Seat | None, after: Seat) -> str:
    if before is None:
        return f"Seated: table {after.table_id} seat {after.seat}"
    return (f"Moved: table {before.table_id} seat {before.seat} -> table {after.table_id} "
            f"seat {after.seat}")


def result_line(view: pb.TournamentView, player_id: str) -> str:
    """The player's finish (their best entry), or where the tournament stands."""
    mine = [e for e in view.entries if e.player_id == player_id]
    placed = sorted((e for e in mine if e.place), key=lambda e: e.place)
    if not placed:
        return f"Tournament {PHASES.get(view.phase, '')}"
    best = placed[0]
    place = (f"{best.place}" if best.place_to in (0, best.place)
             else f"{best.place}-{best.place_to}")
    return f"You finished in place {place} of {len(view.entries)}: prize {t.chips(best.prize)}"


def entered(view: pb.TournamentView, player_id: str) -> bool:
    """Whether ``player_id`` holds an entry still in (registered, or playing)."""
    return any(e.player_id == player_id and not e.place for e in view.entries)


def chip_leader(view: pb.TournamentView) -> pb.TournamentEntryView | None:
    """The seated entry with the most chips (ties: the first table, then seat), if any."""
    seated = [e for e in view.entries if not e.place and e.table_id]
    if not seated:
        return None
    leader: pb.TournamentEntryView = min(seated, key=lambda e: (-e.chips, e.table_id, e.seat))
    return leader


def rail_table(view: pb.TournamentView, picked: str = "") -> str:
    """The table a rail watches: ``picked`` while the tournament has it open, else the chip
    leader's; "" when no table is open yet."""
    open_tables = [tb.table_id for tb in view.tables]
    if picked and picked in open_tables:
        return picked
    leader = chip_leader(view)
    if leader is not None:
        return str(leader.table_id)
    return open_tables[0] if open_tables else ""


def next_table(view: pb.TournamentView, current: str) -> str:
    """The open table after ``current`` (in id order, round), "" when none is open."""
    ids: list[str] = sorted(tb.table_id for tb in view.tables)
    if not ids:
        return ""
    return next((i for i in ids if i > current), ids[0])


def rail_line(view: pb.TournamentView, table_id: str, picked: str) -> str:
    leader = chip_leader(view)
    if not picked and leader is not None and leader.table_id == table_id:
        why = f"the chip leader's, {leader.player_id} with {t.chips(leader.chips)}"
    else:
        why = "picked"
    return f"Watching table {table_id} ({why}) as the public sees it"


# --- the app ---------------------------------------------------------------------------------

class TournamentPlayApp(PlayApp):
    """The table screen of :class:`PlayApp`, following the player's seat in a tournament."""

    TITLE = "stud play (tournament)"

    BINDINGS: ClassVar[list[BindingType]] = [
        *PlayApp.BINDINGS, Binding("n", "next_table", "Next table (rail)")]

    def __init__(self, connect: Callable[[], Client], tournament_id: str, *,
                 table_id: str = "", clock: Callable[[], float] = time.time) -> None:
        super().__init__(connect, PlayOptions(table_id=""), clock=clock)
        self.tournament_id = tournament_id
        self.tournament: pb.TournamentView | None = None
        self.railing = False
        """The player holds no entry still in: the screen rails the tournament (a table as
        the public sees it), following the chip leader unless a table was picked."""
        self.picked = table_id
        """The table picked to rail (``--table``, or ``n``); "" follows the chip leader."""
        self._railed_at = 0.0
        self.tracker: SeatTracker | None = None
        self.moves = 0
        """How many times the screen followed the player to another table."""
        self._table_task: asyncio.Task[None] | None = None

    async def _session(self) -> None:
        tid = self.tournament_id
        try:
            self.client = client = self._connect()
            self.player_id = await client.player_id()
            self.tournament = await client.tournaments.get(tid)
            self.say(f"Tournament {tid} ({self.tournament.config.name}): you are "
                     f"{self.player_id}")
            self.tracker = SeatTracker(self.player_id)
            self.railing = not entered(self.tournament, self.player_id)
            if self.railing:
                which = f"table {self.picked}" if self.picked else "the chip leader's"
                self.say(f"You are not entered in {tid}: railing it, a table as the public "
                         f"sees it ({which}; n: the next table)")
                await self._rail(client, self.tournament)
            async for update in client.tournaments.follow(tid, tracker=self.tracker):
                await self._tournament_update(client, update)
                if self.railing:
                    await self._rail(client, None, update.kind)
            self.tournament = await client.tournaments.get(tid)
            self.say(result_line(self.tournament, self.player_id), style="bold")
        except StudError as exc:
            self.refused("tournament", exc)
        except Exception as exc:  # shown, not raised: the screen stays up to read it
            self.say(f"✗ {type(exc).__name__}: {exc}", style="bold red")

    async def _tournament_update(self, client: Client, update: TournamentUpdate) -> None:
        if update.moved is not None:
            before = (Seat(self.options.table_id, self.seat) if self.options.table_id
                      else None)
            self.moves += before is not None
            self.say(moved_line(before, update.moved), style="bold")
            await self._switch(client, update.moved.table_id)
        if update.busted:
            self.say(f"You are out (table {update.record.event.busted.table_id})",
                     style="bold red")
        if update.kind in CLOCK_EVENTS:
            with contextlib.suppress(StudError):
                self.tournament = await client.tournaments.get(self.tournament_id)
            if update.kind in ("level_started", "break_started"):
                self.say(clock_text(self.tournament, self._clock()))

    async def _rail(self, client: Client, view: pb.TournamentView | None,
                    kind: str = "") -> None:
        """Rail the table to watch now (the picked one while open, else the chip leader's):
        the tournament is read again at most every :data:`RAIL_READ_S` (at once after an
        event that opens, closes or fills a table)."""
        if view is None:
            now = self._clock()
            if kind not in RAIL_EVENTS and now - self._railed_at < RAIL_READ_S:
                return
            self._railed_at = now
            try:
                view = self.tournament = await client.tournaments.get(self.tournament_id)
            except StudError:
                return
        table_id = rail_table(view, self.picked)
        if table_id and table_id != self.options.table_id:
            self.say(rail_line(view, table_id, self.picked), style="bold")
            await self._switch(client, table_id, cards=False)

    async def action_next_table(self) -> None:
        """Railing: watch the next open table (and stay there)."""
        client, view = self.client, self.tournament
        if not self.railing or client is None or view is None:
            self.say("n picks a table to rail; you play at your seat's")
            return
        table_id = next_table(view, self.options.table_id)
        if not table_id:
            self.say("No table is open yet")
            return
        self.picked = table_id
        if table_id != self.options.table_id:
            self.say(rail_line(view, table_id, table_id), style="bold")
            await self._switch(client, table_id, cards=False)

    async def _switch(self, client: Client, table_id: str, cards: bool = True) -> None:
        await self._stop_table()
        self.options = replace(self.options, table_id=table_id)
        self._table_task = asyncio.create_task(self._follow_table(client, table_id, cards))

    async def _stop_table(self) -> None:
        task, self._table_task = self._table_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        watch, self.table_watch = self.table_watch, None
        if watch is not None:
            await watch.close()

    async def _follow_table(self, client: Client, table_id: str, cards: bool = True) -> None:
        while True:
            watch = TableWatch(client, table_id, cards=cards, on_event=self._on_event,
                               on_verdict=self._on_verdict)
            try:
                await watch.start()
            except NotFound:
                await asyncio.sleep(RETRY_S)  # the tournament is opening the table
                continue
            self.table_watch = watch
            if watch.view is not None:
                self.dealer_log.seed_up_cards(watch.view)
            async for view in watch.views():
                self.show(view)
            return

    async def on_unmount(self) -> None:
        await self._stop_table()
        await super().on_unmount()

    def _title_text(self, view: table_pb2.TableView) -> str:
        clock = clock_text(self.tournament, self._clock())
        return f"{clock} · {super()._title_text(view)}" if clock else super()._title_text(view)

    def _tick(self) -> None:
        super()._tick()
        if self.view is not None:
            with contextlib.suppress(Exception):
                self.query_one("#title", Static).update(self._title_text(self.view))
