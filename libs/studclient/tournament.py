"""The tournament client: the lobby (list, get), a player's commands (register, unregister,
re-enter), the operator's (create, cancel), and "follow my tournament".

Commands go through :meth:`Client._call <studclient.client.Client>`, so a command refused
with UNAVAILABLE, DEADLINE_EXCEEDED or ABORTED is sent again *with the same command id*
(the server answers a repeat with the original outcome and ``duplicate`` set), exactly as
the table's commands are.

:meth:`TournamentClient.follow` is an async iterator over the tournament's WatchTournament
stream. It resumes after a disconnect (or a server restart, or a fresh token) from the last
sequence it saw, so no event is missed or repeated, and it folds the events into a
:class:`SeatTracker`: which entries are the player's, where the player sits, whether they
have busted, the level. Each :class:`TournamentUpdate` carries the record and, when the
player was moved to another table (or seated for the first time), the new :class:`Seat`,
so a game client switches its table stream there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from stud.v1 import tournament_pb2 as pb
from stud.v1 import tournament_pb2_grpc
from studclient.errors import FailedPrecondition, TokenExpired, from_rpc_error
from studclient.resume import MAX_BACKOFF_S, MAX_FAILURES, RESUMABLE

if TYPE_CHECKING:
    from studclient.client import Client


@dataclass(frozen=True, slots=True)
class Seat:
    """A seat at a tournament table."""

    table_id: str
    seat: int


@dataclass(frozen=True, slots=True)
class TournamentUpdate:
    """One event of the tournament, as the followed player sees it."""

    record: pb.TournamentEventRecord
    seat: Seat | None
    """Where the player sits after this event (None: not seated, busted or over)."""
    moved: Seat | None = None
    """Set when this event put the player at a table other than the one they were at
    (a move, or the first seat): switch the table stream there."""
    busted: bool = False
    """True on the event that busted the player's last live entry."""

    @property
    def kind(self) -> str:
        """The event's name (``seat_assigned``, ``move_seated``, ``busted``, ...)."""
        return str(self.record.event.WhichOneof("kind"))


@dataclass
class SeatTracker:
    """The followed player's side of a tournament, folded from its events (pure)."""

    player_id: str
    entries: set[str] = field(default_factory=set)
    """The player's entry ids."""
    seats: dict[str, Seat] = field(default_factory=dict)
    """entry -> its seat (live entries only)."""
    moves: dict[str, pb.TournamentEvent.MoveStarted] = field(default_factory=dict)
    """Moves of the player's entries in flight (move id -> the move)."""
    out: set[str] = field(default_factory=set)
    """The player's busted or withdrawn entries."""
    seated: set[str] = field(default_factory=set)
    """The player's entries the table has seated (confirmed, and not unseated by a move)."""
    level: int = 0
    on_break: bool = False
    over: bool = False
    """Finished or cancelled."""
    last_sequence: int = 0

    @property
    def at_table(self) -> bool:
        """Whether the table holds the player at :attr:`seat` now (seated and confirmed;
        False while a seat is assigned but not taken yet, and mid-move)."""
        live = [e for e in self.seats if e not in self.out]
        return bool(live) and live[-1] in self.seated and not self.over

    @property
    def seat(self) -> Seat | None:
        """The player's seat (their latest live entry's)."""
        live = [s for e, s in self.seats.items() if e not in self.out]
        return live[-1] if live and not self.over else None

    def feed(self, record: pb.TournamentEventRecord) -> TournamentUpdate | None:
        """Fold one record; None for a record already seen (a resume's overlap)."""
        if record.sequence <= self.last_sequence:
            return None
        self.last_sequence = record.sequence
        before = self.seat
        busted = self._apply(record.event)
        after = self.seat
        moved = after if after is not None and (
            before is None or before.table_id != after.table_id) else None
        return TournamentUpdate(record, after, moved, busted)

    def _apply(self, event: pb.TournamentEvent) -> bool:
        kind = event.WhichOneof("kind")
        mine = self.entries
        if kind == "entry_requested" and event.entry_requested.player_id == self.player_id:
            mine.add(event.entry_requested.entry_id)
        elif kind in ("entry_dropped", "entry_withdrawn"):
            entry = getattr(event, kind).entry_id
            if entry in mine:
                self.out.add(entry)
        elif kind == "seat_assigned" and event.seat_assigned.entry_id in mine:
            s = event.seat_assigned
            self.seats[s.entry_id] = Seat(s.table_id, s.seat)
        elif kind == "seat_confirmed" and event.seat_confirmed.entry_id in mine:
            self.seated.add(event.seat_confirmed.entry_id)
        elif kind == "move_started" and event.move_started.entry_id in mine:
            self.moves[event.move_started.move_id] = event.move_started
        elif kind == "move_unseated" and event.move_unseated.move_id in self.moves:
            self.seated.discard(self.moves[event.move_unseated.move_id].entry_id)
        elif kind == "move_seated" and event.move_seated.move_id in self.moves:
            move = self.moves.pop(event.move_seated.move_id)
            self.seats[move.entry_id] = Seat(move.to_table, move.to_seat)
            self.seated.add(move.entry_id)
        elif kind == "busted" and event.busted.entry_id in mine:
            self.out.add(event.busted.entry_id)
            return self.seat is None
        elif kind == "level_started":
            self.level, self.on_break = event.level_started.level, False
        elif kind == "break_started":
            self.on_break = True
        elif kind in ("finished", "cancelled"):
            self.over = True
        return False


class TournamentClient:
    """The tournament service, as the identity of ``client`` (its token and retry policy).

    ``client.tournaments`` once the client was connected with ``tournament_addr=``.
    """

    def __init__(self, client: Client, channel: grpc.aio.Channel) -> None:
        self.client = client
        self._stub = tournament_pb2_grpc.TournamentServiceStub(  # type: ignore[no-untyped-call]
            channel)

    # --- reads -----------------------------------------------------------------------------

    async def lobby(self, phase: int = pb.TOURNAMENT_PHASE_UNSPECIFIED
                   ) -> list[pb.TournamentSummary]:
        """Every tournament (newest first), optionally of one phase (every page)."""
        from studclient.client import READ_RETRIED_CODES
        out: list[pb.TournamentSummary] = []
        token = ""
        while True:
            reply: pb.ListTournamentsResponse = await self.client._call(
                self._stub.ListTournaments,
                pb.ListTournamentsRequest(phase=phase, page_token=token),  # type: ignore[arg-type]
                retry_on=READ_RETRIED_CODES)
            out.extend(reply.tournaments)
            token = reply.next_page_token
            if not token:
                return out

    async def get(self, tournament_id: str) -> pb.TournamentView:
        """The tournament as it is now."""
        from studclient.client import READ_RETRIED_CODES
        view: pb.TournamentView = await self.client._call(
            self._stub.GetTournament, pb.GetTournamentRequest(tournament_id=tournament_id),
            retry_on=READ_RETRIED_CODES)
        return view

    # --- commands --------------------------------------------------------------------------

    async def _command(self, method: Any, request: Any) -> pb.TournamentReply:
        if not request.command_id:
            request.command_id = uuid.uuid4().hex
        reply: pb.TournamentReply = await self.client._call(method, request)
        return reply

    async def register(self, tournament_id: str, *, command_id: str | None = None
                       ) -> pb.TournamentReply:
        """Enter the caller (the buy-in and fee are charged to their wallet)."""
        return await self._command(self._stub.Register, pb.RegisterRequest(
            tournament_id=tournament_id, command_id=command_id or ""))

    async def unregister(self, tournament_id: str, *, command_id: str | None = None,
                         wait_s: float = 0.0) -> pb.TournamentReply:
        """Withdraw the caller's entry before the start (refunded; the reply's ``entry_id``
        names it). An entry whose buy-in is still being charged is refused
        ``payment_pending`` with the service's ``retry_after_ms`` (in the error's
        ``metadata``); with ``wait_s``, the same command is sent again after that hint until
        it is taken or ``wait_s`` is spent (then the refusal is raised)."""
        request = pb.UnregisterRequest(tournament_id=tournament_id,
                                       command_id=command_id or uuid.uuid4().hex)
        loop = asyncio.get_running_loop()
        end = loop.time() + wait_s
        while True:
            try:
                return await self._command(self._stub.Unregister, request)
            except FailedPrecondition as refused:
                if refused.reason != "payment_pending":
                    raise
                hint = refused.metadata.get("retry_after_ms", "")
                pause = int(hint) / 1000 if hint.isascii() and hint.isdigit() else 1.0
                if loop.time() + pause > end:
                    raise
                await asyncio.sleep(pause)

    async def re_enter(self, tournament_id: str, *, command_id: str | None = None
                       ) -> pb.TournamentReply:
        """A new entry for a caller whose entries are all out (while registration is open)."""
        return await self._command(self._stub.ReEnter, pb.ReEnterRequest(
            tournament_id=tournament_id, command_id=command_id or ""))

    async def create(self, tournament_id: str, config: pb.TournamentConfig, *,
                     command_id: str | None = None) -> pb.TournamentReply:
        """Operator: create a tournament."""
        return await self._command(self._stub.CreateTournament, pb.CreateTournamentRequest(
            tournament_id=tournament_id, config=config, command_id=command_id or ""))

    async def cancel(self, tournament_id: str, reason: str, *,
                     command_id: str | None = None) -> pb.TournamentReply:
        """Operator: cancel a tournament (refunds or the pool split, per its policy)."""
        return await self._command(self._stub.CancelTournament, pb.CancelTournamentRequest(
            tournament_id=tournament_id, reason=reason, command_id=command_id or ""))

    # --- following -------------------------------------------------------------------------

    def watch_call(self, tournament_id: str, after_sequence: int,
                   metadata: tuple[tuple[str, str], ...]) -> Any:
        """The raw WatchTournament stream (:meth:`follow` resumes it)."""
        return self._stub.WatchTournament(pb.WatchTournamentRequest(
            tournament_id=tournament_id, after_sequence=after_sequence), metadata=metadata)

    async def follow(self, tournament_id: str, player_id: str | None = None, *,
                     tracker: SeatTracker | None = None, until_over: bool = True
                     ) -> AsyncIterator[TournamentUpdate]:
        """Each event of the tournament from the first (or from ``tracker``'s last), as
        ``player_id`` (default: the caller) sees it; resumes the stream after a resumable
        ending from the last sequence seen (pausing as the client's retry policy says between
        attempts). Ends after the tournament finishes or is
        cancelled (``until_over``); raises a :class:`~studclient.errors.StudError` on a
        refusal that cannot be resumed (e.g. ``no_tournament``)."""
        me = tracker or SeatTracker(player_id or await self.client.player_id())
        fresh = False
        failures = 0
        first = backoff = self.client.retry.initial_backoff_s
        while True:
            call = self.watch_call(tournament_id, me.last_sequence,
                                   await self.client.metadata(fresh))
            fresh = False
            try:
                async for record in call:
                    update = me.feed(record)
                    if update is None:
                        continue  # a repeat is no progress
                    failures, backoff = 0, first
                    yield update
                    if until_over and me.over:
                        call.cancel()
                        return
            except grpc.aio.AioRpcError as exc:
                error = from_rpc_error(exc)
                if isinstance(error, TokenExpired) and self.client.refreshable:
                    fresh = True
                elif exc.code() not in RESUMABLE or failures >= MAX_FAILURES:
                    raise error from None
            finally:
                call.cancel()
            failures += 1
            if not fresh:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
