"""The table service's use cases: who may ask for what, then one command to the table's room
(decided there, committed by the actor); money moves only for a command the room accepted.
Knows the tables, the event store and the money saga, never grpc.

Access: operators open and close tables; a player acts only for the seat the table's log says
is theirs; anyone authenticated lists tables and watches. Command ids are namespaced by caller
(``c:<role>:<name>:<id>``), so one caller's ids never collide with another's or with the
table's own (``s:...``). One idempotency rule for every command: a command id seen before
with the same request returns the recorded outcome; with another request, it is refused
(``command_id_reused``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

from rules import Command, TableConfig
from rules.commands import SitIn, SitOut
from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.auth import Forbidden, Principal, Role, require_role, require_service
from studkit.commit import Committed
from studkit.errors import AlreadyExists, FailedPrecondition, Unavailable
from studkit.ownership import Ownership, rendezvous
from studkit.store import AppendResult, EventStore
from table import expiry
from table.actor import ActorDeps, TableActor
from table.clients import PLAYER_WAIT_S, key
from table.driver import Driver
from table.model import TableSettings
from table.money import step_id
from table.port import Driving, TablePort
from table.replicas import Tables
from table.room import (
    BUY_IN,
    TOP_UP,
    ApplyTopUp,
    Close,
    ConfirmBuyIn,
    Leave,
    Open,
    Play,
    QueueTopUp,
    RequestBuyIn,
    Room,
    RoomCommand,
    SetMuck,
    decide,
)
from table.tournament import (
    TOURNAMENT_SERVICE,
    PauseDealing,
    SeatEntrant,
    SetStakes,
    UnseatEntrant,
    refuse_players,
)
from table.views import table_view
from table.watching import HandArchive, Watching, hand_viewer, viewer_seat


def command_key(principal: Principal, command_id: str) -> str:
    """The stored command id of a caller's command."""
    return f"c:{principal.role.value}:{principal.name}:{command_id}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did: the version after it, the envelopes it wrote, whether a retry."""

    version: int
    envelopes: list[EventEnvelope]
    duplicate: bool


def _outcome(done: Committed[Room]) -> Outcome:
    return Outcome(done.result.version, done.envelopes, done.result.duplicate)


def own_seat(principal: Principal, room: Room, seat: int) -> str:
    """The caller must be the player the log seats at ``seat``."""
    if principal.role is not Role.PLAYER:
        raise Forbidden("only a player acts for a seat", reason="not_a_player")
    holder = room.table.seat(seat) if 1 <= seat <= len(room.table.seats) else None
    if holder is None or holder.player_id != principal.name:
        raise Forbidden(f"seat {seat} is not yours", reason="not_your_seat")
    return principal.name


class TableApp:
    """Every table this process owns, and the use cases over them."""

    def __init__(self, store: EventStore, deps_for: Callable[[], ActorDeps],
                 driving: Driving) -> None:
        self._store = store
        self.tables = Tables(store, deps_for, driving)
        self.reading = Watching(store, self.tables.routed_actor)
        """The reading use cases (watch, one hand's events, a player's own hands)."""
        self._opening: dict[str, asyncio.Lock] = {}

    # --- reading (the collaborator's) ----------------------------------------------------

    @property
    def history(self) -> HandArchive | None:
        return self.reading.history

    @history.setter
    def history(self, archive: HandArchive | None) -> None:
        self.reading.history = archive

    def watch(self, principal: Principal, table_id: str, after: int
              ) -> AsyncIterator[EventEnvelope]:
        """The table's game envelopes after ``after``, then live ones (:class:`Watching`)."""
        return self.reading.watch(principal, table_id, after)

    def watch_batches(self, principal: Principal, table_id: str, after: int
                      ) -> AsyncIterator[list[EventEnvelope]]:
        """The same, what is ready in batches (:meth:`Watching.watch_batches`)."""
        return self.reading.watch_batches(principal, table_id, after)

    async def hand_events(self, table_id: str, hand_number: int
                          ) -> tuple[list[EventEnvelope], bool]:
        """One hand's game envelopes, and whether it has ended."""
        return await self.reading.hand_events(table_id, hand_number)

    async def my_hands(self, principal: Principal, page_token: str, size: int
                       ) -> tuple[list[tuple[str, int, datetime, int, int, int]], str]:
        """A player's own settled hands, newest first (:meth:`Watching.my_hands`)."""
        return await self.reading.my_hands(principal, page_token, size)

    @staticmethod
    def viewer_seat(principal: Principal, actor: TablePort) -> int | None:
        """The caller's seat at the table now, None for an observer."""
        return viewer_seat(principal, actor.room)

    @staticmethod
    def hand_viewer(principal: Principal, actor: TablePort, hand_number: int
                    ) -> tuple[int | None, bool]:
        """Who the caller is to an event of hand ``hand_number`` (:func:`hand_viewer`)."""
        return hand_viewer(principal, actor.room, hand_number)

    async def table_view(self, principal: Principal, table_id: str) -> pb.TableView:
        """The table now as the caller may see it."""
        driver = await self.routed(table_id)
        room = driver.actor.room
        player = principal.name if principal.role is Role.PLAYER else None
        return table_view(table_id, room, driver.status.of(room), driver.system.clock(),
                          player, viewer_seat(principal, room))

    # --- life (the replicas' business) ---------------------------------------------------

    @property
    def actors(self) -> dict[str, TableActor]:
        return self.tables.actors

    def actor_of(self, table_id: str) -> TableActor | None:
        """The table's actor if this replica holds it."""
        return self.tables.actors.get(table_id)

    @property
    def ready(self) -> bool:
        return self.tables.ready

    def bind(self, ownership: Ownership) -> None:
        self.tables.ownership = ownership

    async def start(self) -> None:
        await self.tables.start()

    async def stop(self) -> None:
        await self.tables.stop()

    async def rebalance(self) -> None:
        await self.tables.rebalance()

    async def routed(self, table_id: str) -> Driver:
        return await self.tables.routed(table_id)

    async def list_tables(self, after: str = "", size: int = 500
                          ) -> tuple[list[pb.TableSummary], str]:
        """One page of the lobby: the tables after ``after`` (a table id), and the token of
        the next page ("" after the last)."""
        return await self.tables.summaries(after, size)

    # --- commands ------------------------------------------------------------------------

    async def _command(self, driver: Driver, principal: Principal, command_id: str,
                       fp: str, expected: int | None,
                       make: Callable[[Room], RoomCommand]) -> Committed[Room]:
        """Commit ``make(room)`` as the caller's command. A check of who may ask that
        refuses a retry of an applied command (the seat is gone since) answers with the
        recorded outcome instead."""
        actor = self.tables.actor(driver.actor.table_id)
        cid = command_key(principal, command_id)
        recorded = await expiry.check(self._store, actor.table_id, cid, fp, expected,
                                      driver.system.clock(), actor.room.visible)
        if recorded is not None:
            return Committed(recorded, await actor.recorded_envelopes(recorded), None)
        try:
            command = make(actor.room)
        except (Forbidden, FailedPrecondition):
            recorded = await self._store.recorded(actor.table_id, cid, fp)
            if recorded is None:
                raise
            return Committed(recorded, await actor.recorded_envelopes(recorded), None)
        return await actor.commit(command, cid, fp, expected)

    async def _precheck(self, driver: Driver, cid: str, fp: str, expected: int | None,
                        make: Callable[[Room], RoomCommand], amount: int) -> None:
        """A new money request is checked in full before anything is recorded: who may ask,
        the room's policy, then the player's funds (so a refused request writes nothing;
        the commit checks the room again, at the version it appends at)."""
        if await expiry.check(self._store, driver.actor.table_id, cid, fp, expected,
                              driver.system.clock(), driver.actor.room.visible) is not None \
                or await self._store.recorded(driver.actor.table_id, cid, fp) is not None:
            return  # a retry: it carries on with its saga
        room = driver.actor.room
        command = make(room)
        if expected is None or room.visible <= expected <= room.version:
            decide(room, command, driver.system.clock())
        player = getattr(command, "player_id", "")
        await driver.money.require_funds(player, amount)

    async def _system_outcome(self, actor: TableActor, command_id: str,
                              fallback: Committed[Room]) -> Outcome:
        recorded: AppendResult | None = await self._store.recorded(actor.table_id, command_id)
        if recorded is None:
            return _outcome(fallback)
        return Outcome(recorded.version, await actor.recorded_envelopes(recorded), True)

    async def open_table(self, principal: Principal, table_id: str, command_id: str,
                         config: TableConfig, settings: TableSettings, fp: str,
                         tournament_id: str = "") -> Outcome:
        """An operator opens a cash table; only the tournament service a tournament one."""
        if tournament_id:
            require_service(principal, (TOURNAMENT_SERVICE,), "tournament")
        else:
            require_role(principal, Role.OPERATOR)
        self.tables.require_ready()
        settings.for_config(config)  # refused before anything is written
        async with self._opening.setdefault(table_id, asyncio.Lock()):
            driver = self.tables.drivers.get(table_id) or await self._create(table_id)
            cid = command_key(principal, command_id)
            recorded = await self._store.recorded(table_id, cid, fp)
            if recorded is None and driver.actor.room.table.opened:
                raise AlreadyExists(f"table {table_id} exists", reason="table_exists")
            done = await driver.actor.commit(Open(table_id, config, settings, tournament_id),
                                             cid, fp)
            return _outcome(done)

    async def _create(self, table_id: str) -> Driver:
        ownership = self.tables.ownership
        if ownership is None:
            return await self.tables.load(table_id)
        desired = rendezvous(table_id, self.tables.live.values())
        owner_id, _epoch = await ownership.owner(table_id)
        if (desired is not None and desired.id != ownership.replica.id) or (
                owner_id and owner_id != ownership.replica.id):
            raise await self.tables.redirect(table_id)
        taken = await self.tables.take(table_id)
        if taken is None:
            raise await self.tables.redirect(table_id)
        return taken

    async def close_table(self, principal: Principal, table_id: str, command_id: str,
                          fp: str) -> Outcome:
        """An operator closes any table; the tournament service its own tables (a table
        broken once the tournament has unseated everyone)."""
        if principal.is_service((TOURNAMENT_SERVICE,)):
            driver = await self.routed(table_id)
            if not driver.actor.room.tournament:
                raise Forbidden("the tournament closes only tournament tables",
                                reason="not_tournament_table")
        else:
            require_role(principal, Role.OPERATOR)
            driver = await self.routed(table_id)
        return _outcome(await self._command(driver, principal, command_id, fp, None,
                                            lambda _room: Close(by=principal.name)))

    async def sit_down(self, principal: Principal, table_id: str, command_id: str, seat: int,
                       buy_in: int, fp: str, expected: int | None) -> Outcome:
        """Reserve the seat (a ``BuyInRequested``, refused before any money moves), move the
        buy-in, seat the player; a retry carries on the same saga."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player sits down", reason="not_a_player")
        driver = await self.routed(table_id)
        refuse_players(driver.actor.room, "buying in")  # before any wallet call
        cid = command_key(principal, command_id)
        wallet_key = key(table_id, cid)
        request = RequestBuyIn(seat, principal.name, buy_in, wallet_key, cid)
        await self._precheck(driver, cid, fp, expected, lambda _room: request, buy_in)
        requested = await self._command(driver, principal, command_id, fp, expected,
                                        lambda _room: request)
        async with driver.money.carrying_own(seat, wallet_key, BUY_IN, PLAYER_WAIT_S) as saga:
            if saga is not None:
                return _outcome(await driver.money.buy_in(seat, saga, PLAYER_WAIT_S))
        done = await self._store.recorded(
            table_id, step_id(ConfirmBuyIn(seat, wallet_key), wallet_key))
        if done is None and not requested.result.duplicate:
            return _outcome(requested)
        if done is None:
            raise FailedPrecondition("this sit-down's buy-in was refunded; sit down again "
                                     "with a new command id", reason="buy_in_refunded")
        return Outcome(done.version, await self.tables.actor(table_id).recorded_envelopes(
            done), True)

    async def leave_seat(self, principal: Principal, table_id: str, command_id: str,
                         seat: int, fp: str, expected: int | None) -> Outcome:
        """Stand the seat up and cash it out now, or once the seat can go."""
        driver = await self.routed(table_id)
        wallet_key = key(table_id, "cashout", command_key(principal, command_id))
        done = await self._command(driver, principal, command_id, fp, expected,
                                   lambda room: Leave(seat, own_seat(principal, room, seat),
                                                      wallet_key))
        # The leave is recorded: the cash-out is the table's to finish (the driver pays it
        # if this call does not), so a seat busy with it answers the leave as done.
        with contextlib.suppress(Unavailable):
            async with driver.money.carrying_own(seat, wallet_key, None, PLAYER_WAIT_S) as saga:
                if saga is not None:
                    await driver.money.cash_out(seat, saga, wait_s=PLAYER_WAIT_S)
        return _outcome(done)

    async def add_chips(self, principal: Principal, table_id: str, command_id: str, seat: int,
                        amount: int, fp: str, expected: int | None) -> Outcome:
        """Queue a top-up (refused before any money moves), then move and add it unless the
        seat is in a hand (then it is added when the hand ends)."""
        driver = await self.routed(table_id)
        refuse_players(driver.actor.room, "adding chips")  # before any wallet call
        cid = command_key(principal, command_id)
        wallet_key = key(table_id, cid)
        def queue(room: Room) -> RoomCommand:
            return QueueTopUp(seat, own_seat(principal, room, seat), amount, wallet_key, cid)

        await self._precheck(driver, cid, fp, expected, queue, amount)
        queued = await self._command(driver, principal, command_id, fp, expected, queue)
        # Queued and recorded: a seat busy with the driver's roll forward of it answers the
        # top-up as queued (the driver adds it).
        with contextlib.suppress(Unavailable):
            async with driver.money.carrying_own(seat, wallet_key, TOP_UP, PLAYER_WAIT_S) as saga:
                if saga is not None:
                    added = await driver.money.top_up(seat, saga, PLAYER_WAIT_S)
                    return _outcome(added or queued)
        return await self._system_outcome(
            self.tables.actor(table_id), step_id(ApplyTopUp(seat, wallet_key), wallet_key),
            queued)

    async def set_muck(self, principal: Principal, table_id: str, command_id: str, seat: int,
                       muck: bool, fp: str) -> Outcome:
        driver = await self.routed(table_id)
        return _outcome(await self._command(
            driver, principal, command_id, fp, None,
            lambda room: SetMuck(seat, own_seat(principal, room, seat), muck)))

    async def sit_out(self, principal: Principal, table_id: str, command_id: str, seat: int,
                      fp: str, expected: int | None, sit_in: bool = False) -> Outcome:
        return await self.act(principal, table_id, command_id, seat,
                              SitIn(seat=seat) if sit_in else SitOut(seat=seat), fp, expected)

    async def act(self, principal: Principal, table_id: str, command_id: str, seat: int,
                  command: Command, fp: str, expected: int | None) -> Outcome:
        driver = await self.routed(table_id)

        def play(room: Room) -> RoomCommand:
            own_seat(principal, room, seat)
            return Play(command)

        return _outcome(await self._command(driver, principal, command_id, fp, expected, play))

    # --- tournament tables (DESIGN 5c): the tournament service only ---------------------

    async def tournament_command(self, principal: Principal, table_id: str, command_id: str,
                                 fp: str, command: SeatEntrant | UnseatEntrant | SetStakes
                                 | PauseDealing) -> Outcome:
        """One of the tournament's commands (seat, unseat, stakes, pause), idempotent by
        the tournament's command id; anyone but ``service:tournament`` is refused before
        the table is even looked up."""
        require_service(principal, (TOURNAMENT_SERVICE,), "tournament")
        driver = await self.routed(table_id)
        return _outcome(await self._command(driver, principal, command_id, fp, None,
                                            lambda _room: command))
