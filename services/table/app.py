"""The table service's use cases: who may ask for what, then the table's actor. Knows the
actors, the event store and the clients, never grpc.

Access: operators open and close tables; a player acts only for the seat the table's log says
is theirs; anyone authenticated lists tables and watches (a seat sees its own view, everyone
else the public one). Command ids are namespaced by caller (``c:<role>:<name>:<id>``), so one
caller's ids never collide with another's or with the table's own (``s:...``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import structlog

from rules import TableConfig, decide
from rules.commands import LeaveSeat, OpenTable, SitDown, SitIn, SitOut
from rules.errors import Reason, RuleViolation
from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.auth import Forbidden, Principal, Role, require_role
from studkit.errors import AlreadyExists, BadRequest, FailedPrecondition, NotFound, Unavailable
from studkit.ownership import Lease, Ownership, Replica, rendezvous
from studkit.store import AppendResult, EventStore, NotOwner, TrimmedRange
from table.actor import (
    ActorDeps,
    Intents,
    Stale,
    TableActor,
    Watcher,
    WatcherTooSlow,
    cancel_until_done,
)
from table.clients import PLAYER_WAIT_S, Refused, key
from table.model import TableSettings, settings_from_proto, settings_to_proto
from table.views import summary

log = structlog.get_logger("table")


def command_key(principal: Principal, command_id: str) -> str:
    """The stored command id of a caller's command."""
    return f"c:{principal.role.value}:{principal.name}:{command_id}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did: the version after it, the envelopes it wrote, whether a retry."""

    version: int
    envelopes: list[EventEnvelope]
    duplicate: bool


def _outcome(result: AppendResult, envelopes: list[EventEnvelope]) -> Outcome:
    return Outcome(result.version, envelopes, result.duplicate)


class TableApp:
    """Every table this process owns, and the use cases over them."""

    def __init__(self, store: EventStore, deps_for: Callable[[], ActorDeps]) -> None:
        self._store = store
        self._deps_for = deps_for
        self.actors: dict[str, TableActor] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self.ready = False
        self.ownership: Ownership | None = None
        self.live: dict[str, Replica] = {}
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False
        self._published: dict[str, bytes] = {}
        """The lobby line last written for each owned table."""
        self.failed_loads = 0
        """Set once :meth:`start` has rebuilt every table; until then calls are answered
        UNAVAILABLE (reason ``starting``), never NOT_FOUND for a table not yet loaded, and
        no call loads a table the start is about to load too."""

    # --- life ----------------------------------------------------------------------------

    def bind(self, ownership: Ownership) -> None:
        """Take part in table ownership as ``ownership.replica`` (set before :meth:`start`)."""
        self.ownership = ownership

    async def start(self) -> None:
        """Join the replicas, take the tables this replica should own (rebuilt from their
        logs, driven from where the log says), then keep the leases and the spread up to
        date in the background."""
        if self.ownership is None:
            for table_id in await self._store.table_ids():
                await self._load(table_id)
        else:
            await self.rebalance()
            self._keeper = asyncio.create_task(self._keep(), name="table-ownership",
                                               context=contextvars.Context())
        self.ready = True

    def require_ready(self) -> None:
        """Refuse calls while the tables are being rebuilt (``UNAVAILABLE``: retry)."""
        if not self.ready:
            raise Unavailable("the table service is starting: its tables are being rebuilt",
                              reason="starting")

    async def stop(self) -> None:
        """Stop driving every table and hand its lease back at once (a graceful stop: another
        replica takes the tables over without waiting for the leases to expire)."""
        self._stopping = True
        await cancel_until_done(self._keeper)
        for table_id in list(self.actors):
            await self._drop(table_id, release=True)
        if self.ownership is not None:
            with contextlib.suppress(Exception):
                await self.ownership.heartbeat(alive=False)

    async def _keep(self) -> None:
        assert self.ownership is not None
        period = self.ownership.lease_ms / 3000
        while not self._stopping:
            await asyncio.sleep(period)
            try:
                await self.rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ownership_round_failed")

    async def rebalance(self) -> None:
        """One round: heartbeat; renew the leases held (drop a table whose lease was lost or
        whose actor was fenced); take the tables this replica should own that are free or
        whose owner stopped renewing; hand over, between hands, a table another live replica
        should own now (a replica joined)."""
        assert self.ownership is not None
        me = self.ownership.replica
        live = await self.ownership.heartbeat()
        self.live = {r.id: r for r in live}
        held = list(self.actors.items())
        # Every lease renewed at once (concurrent round trips, not one after another).
        leases = await asyncio.gather(*(
            self._renew(table_id, actor) for table_id, actor in held))
        for (table_id, actor), lease in zip(held, leases, strict=True):
            if self.actors.get(table_id) is not actor:
                continue  # dropped meanwhile
            if lease is None or not lease.ok:
                log.warning("table_lost", table_id=table_id, epoch=actor.epoch)
                await self._drop(table_id, release=False)
                continue
            desired = rendezvous(table_id, live)
            if desired is not None and desired.id != me.id and not actor.state.hand_in_progress:
                log.info("table_handed_over", table_id=table_id, to=desired.id)
                await self._drop(table_id, release=True)
        await self.publish_summaries()
        for table_id in await self._store.table_ids():
            if table_id in self.actors:
                continue
            desired = rendezvous(table_id, live)
            if desired is None or desired.id != me.id:
                continue
            try:
                await self._take(table_id)
            except Exception:
                # One table whose log cannot be loaded (corrupt, or not a table's) must not
                # keep this replica from serving the others: logged, counted, tried again.
                log.exception("table_load_failed", table_id=table_id)
                self.failed_loads += 1

    async def _renew(self, table_id: str, actor: TableActor) -> Lease | None:
        assert self.ownership is not None
        if actor.fenced:
            return None
        return await self.ownership.renew(table_id, actor.epoch or 0)

    @staticmethod
    def _summary_key(table_id: str) -> str:
        return keys.table_key(table_id, "summary")

    async def publish_summaries(self) -> None:
        """Write each owned table's lobby line beside its stream, for every replica's
        ListTables (a second or so stale at most)."""
        pipe = self._store.client.pipeline(transaction=False)
        changed = {}
        for table_id, actor in self.actors.items():
            if actor.state.opened:
                line = summary(actor).SerializeToString(deterministic=True)
                if self._published.get(table_id) != line:  # only what changed is written
                    pipe.set(self._summary_key(table_id), line)
                    changed[table_id] = line
        if changed:
            await pipe.execute()
            self._published.update(changed)

    async def list_tables(self) -> list[pb.TableSummary]:
        """Every open table: this replica's own live, the others' from their summaries."""
        self.require_ready()
        table_ids = await self._store.table_ids()
        pipe = self._store.client.pipeline(transaction=False)
        for table_id in table_ids:
            pipe.get(self._summary_key(table_id))
        stored = await pipe.execute()
        out = []
        for table_id, raw in zip(table_ids, stored, strict=True):
            actor = self.actors.get(table_id)
            if actor is not None and actor.state.opened:
                out.append(summary(actor))
            elif raw:
                out.append(pb.TableSummary.FromString(raw))
        return out

    async def _take(self, table_id: str) -> TableActor | None:
        """Acquire the table's lease and load it; None if another replica holds it."""
        assert self.ownership is not None
        lease = await self.ownership.acquire(table_id)
        if not lease.ok:
            return None
        started = time.monotonic()
        try:
            actor = await self._load(table_id, epoch=lease.epoch)
        except Exception:
            await self.ownership.release(table_id, lease.epoch)
            raise
        log.info("table_taken", table_id=table_id, epoch=lease.epoch,
                 load_ms=round((time.monotonic() - started) * 1000, 1))
        return actor

    async def _drop(self, table_id: str, *, release: bool) -> None:
        self._published.pop(table_id, None)  # its next owner writes its lobby line
        actor = self.actors.pop(table_id, None)
        if actor is None:
            return
        await actor.stop()
        if release and self.ownership is not None and actor.epoch is not None \
                and not actor.fenced:
            with contextlib.suppress(Exception):
                await self.ownership.release(table_id, actor.epoch)

    async def _load(self, table_id: str, epoch: int | None = None) -> TableActor:
        deps = self._deps_for()
        raw = await deps.redis.get(self._settings_key(table_id))
        settings = _settings_from_bytes(raw)
        actor = TableActor(table_id, deps, settings)
        actor.epoch = epoch
        await actor.load()
        if actor.state.config is not None:
            actor.settings = settings.for_config(actor.state.config)
        self.actors[table_id] = actor
        actor.start()
        log.info("table_loaded", table_id=table_id, version=actor.version, epoch=epoch)
        return actor

    async def _redirect(self, table_id: str) -> NotOwner:
        """Where a call for a table this replica does not own should go."""
        assert self.ownership is not None
        owner_id, epoch = await self.ownership.owner(table_id)
        owner = self.live.get(owner_id)
        if owner is None:  # no live owner yet: the one that should take it over
            owner = rendezvous(table_id, self.live.values())
        error = NotOwner(table_id, None, epoch)
        error.error_metadata = {"owner": owner.address if owner else "",
                                "owner_id": owner.id if owner else ""}
        return error

    @staticmethod
    def _settings_key(table_id: str) -> str:
        return keys.table_key(table_id, "settings")

    def actor(self, table_id: str) -> TableActor:
        """The table's actor in this replica; NOT_FOUND for an unknown table (raise
        :meth:`routed` first where another replica may own it)."""
        self.require_ready()
        actor = self.actors.get(table_id)
        if actor is None or not actor.state.opened or actor.fenced:
            raise NotFound(f"no table {table_id}", reason="unknown_table")
        return actor

    async def routed(self, table_id: str) -> TableActor:
        """The table's actor if this replica owns it; else ``FAILED_PRECONDITION``
        ``not_owner`` naming the owner's address in the error's metadata (clients go
        there), or NOT_FOUND for a table that does not exist."""
        self.require_ready()
        actor = self.actors.get(table_id)
        if actor is not None and actor.state.opened and not actor.fenced:
            return actor
        if self.ownership is not None and table_id in set(await self._store.table_ids()):
            raise await self._redirect(table_id)
        raise NotFound(f"no table {table_id}", reason="unknown_table")

    # --- lobby ---------------------------------------------------------------------------

    async def open_table(self, principal: Principal, table_id: str, command_id: str,
                         config: TableConfig, settings: TableSettings, fp: str) -> Outcome:
        require_role(principal, Role.OPERATOR)
        self.require_ready()
        settings = settings.for_config(config)
        lock = self._opening.setdefault(table_id, asyncio.Lock())
        async with lock:
            actor = self.actors.get(table_id)
            if actor is None:
                deps = self._deps_for()
                if self.ownership is not None:
                    desired = rendezvous(table_id, self.live.values())
                    if desired is not None and desired.id != self.ownership.replica.id:
                        raise await self._redirect(table_id)
                    owner_id, _epoch = await self.ownership.owner(table_id)
                    if owner_id and owner_id != self.ownership.replica.id:
                        raise await self._redirect(table_id)
                await deps.redis.set(self._settings_key(table_id),
                                     _settings_to_bytes(settings), nx=True)
                if self.ownership is not None:
                    taken = await self._take(table_id)
                    if taken is None:
                        raise await self._redirect(table_id)
                    actor = taken
                else:
                    actor = await self._load(table_id)
                actor.settings = settings
            cid = command_key(principal, command_id)
            recorded = await self._store.recorded(table_id, cid, fp)
            if recorded is None and actor.state.opened:
                raise AlreadyExists(f"table {table_id} exists", reason="table_exists")
            result, written = await actor.open(OpenTable(table_id=table_id, config=config),
                                               cid, fp)
            return _outcome(result, written)

    async def close_table(self, principal: Principal, table_id: str) -> Outcome:
        require_role(principal, Role.OPERATOR)
        actor = await self.routed(table_id)
        await actor.close()
        return Outcome(actor.version, [], False)

    # --- seats ---------------------------------------------------------------------------

    def _own_seat(self, principal: Principal, actor: TableActor, seat: int) -> str:
        """The caller must be the player the log seats at ``seat``."""
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player acts for a seat", reason="not_a_player")
        if not 1 <= seat <= len(actor.state.seats):
            raise BadRequest("seat", f"must be 1..{len(actor.state.seats)}")
        holder = actor.state.seat(seat)
        if holder is None or holder.player_id != principal.name:
            raise Forbidden(f"seat {seat} is not yours", reason="not_your_seat")
        return principal.name

    async def sit_down(self, principal: Principal, table_id: str, command_id: str, seat: int,
                       buy_in: int, fp: str, expected: int | None) -> Outcome:
        if principal.role is not Role.PLAYER:
            raise Forbidden("only a player sits down", reason="not_a_player")
        actor = await self.routed(table_id)
        cid = command_key(principal, command_id)
        recorded = await self._store.recorded(table_id, cid, fp)
        if recorded is not None:
            return _outcome(recorded, await actor._recorded_envelopes(recorded))
        if actor.closed:  # before any money moves
            raise FailedPrecondition("the table is closed", reason="table_closed")
        s = actor.settings
        left = actor.departures.get(principal.name)
        # The rathole rule: within the window a player brings back at least what they left
        # with, even more than the table's maximum.
        owed = left[0] if left is not None and (
            actor.deps.clock() - left[1] < s.rathole_window_s) else 0
        most = max(s.buy_in_max, owed)
        if not s.buy_in_min <= buy_in <= most:
            raise FailedPrecondition(f"the buy-in must be {s.buy_in_min}..{most}",
                                     reason="buy_in_out_of_range")
        if buy_in < owed:
            raise FailedPrecondition(
                f"you left this table with {owed} less than "
                f"{round(s.rathole_window_s)}s ago: bring at least that much",
                reason="rathole")
        command = SitDown(seat=seat, player_id=principal.name, stack=buy_in)
        decide(actor.state, command)  # legal now? (raises) before any money moves
        wallet_key = key(table_id, cid)

        def reserve(intents: Intents) -> None:
            intents.sitdowns[seat] = (principal.name, buy_in, cid, fp)

        # Written before any money moves: a crash between the wallet and the record leaves
        # the restarted table what it needs to complete this sit-down, not refund it under a
        # retry that the wallet would answer as a replay.
        async with actor.saga(seat):
            await actor.set_intent(reserve)
            try:
                bought = await actor.deps.wallet.buy_in(principal.name, table_id, seat, buy_in,
                                                        wallet_key)
            except Refused as exc:
                await actor.drop_sit_down(seat, cid)
                raise FailedPrecondition(f"the wallet refused the buy-in: {exc.reason}",
                                         reason=exc.reason or "buy_in_refused") from None
            if bought.replayed and not await _escrow_holds(actor, seat, principal.name, buy_in):
                # A retry whose chips went back to the player's account meanwhile (a refund):
                # the wallet's replay moved nothing, so nothing may be seated on it.
                await actor.drop_sit_down(seat, cid)
                raise FailedPrecondition("this sit-down's buy-in was refunded; sit down again with "
                                         "a new command id", reason="buy_in_refunded")
            try:
                result, written = await actor.commit(command, cid, fp, expected)
            except (RuleViolation, FailedPrecondition):
                # The seat went to someone else meanwhile: give the chips back.
                await actor.deps.wallet.cash_out(principal.name, table_id, seat,
                                                 key(table_id, cid, "refund"))
                await actor.drop_sit_down(seat, cid)
                raise
            await actor.drop_sit_down(seat, cid)
            return _outcome(result, written)

    async def leave_seat(self, principal: Principal, table_id: str, command_id: str,
                         seat: int, fp: str, expected: int | None) -> Outcome:
        actor = await self.routed(table_id)
        player = self._own_seat(principal, actor, seat)
        cid = command_key(principal, command_id)
        if expected is not None and expected != actor.version:
            raise Stale(f"the table is at sequence {actor.version}, not {expected}")
        try:
            decide(actor.state, LeaveSeat(seat=seat))  # the rules say whether it may go now
            still_in_hand = False
        except RuleViolation as exc:
            if exc.reason is not Reason.HAND_IN_PROGRESS:
                raise
            still_in_hand = True
        if still_in_hand:  # folded or checked at its turn, stood up when the hand ends
            def leave_later(intents: Intents) -> None:
                intents.leaving[seat] = player

            await actor.set_intent(leave_later)
            return Outcome(actor.version, [], False)
        async with actor.saga(seat):
            written = await actor.leave(seat, cid, wait_s=PLAYER_WAIT_S)
        return Outcome(actor.version, written, False)

    async def sit_out(self, principal: Principal, table_id: str, command_id: str, seat: int,
                      fp: str, expected: int | None, sit_in: bool = False) -> Outcome:
        actor = await self.routed(table_id)
        self._own_seat(principal, actor, seat)
        command = SitIn(seat=seat) if sit_in else SitOut(seat=seat)
        result, written = await actor.commit(command, command_key(principal, command_id), fp,
                                             expected)
        return _outcome(result, written)

    async def add_chips(self, principal: Principal, table_id: str, command_id: str, seat: int,
                        amount: int, fp: str, expected: int | None) -> Outcome:
        actor = await self.routed(table_id)
        player = self._own_seat(principal, actor, seat)
        if amount <= 0:
            raise BadRequest("amount", "must be > 0")
        cid = command_key(principal, command_id)
        wallet_key = key(table_id, cid)
        # A retry (same command id) answers the recorded outcome, or carries on with its
        # pending top-up: never refused for the stack it made or for being pending.
        recorded = await self._store.recorded(table_id, f"s:topup:{wallet_key}")
        if recorded is not None:
            return _outcome(recorded, await actor._recorded_envelopes(recorded))
        stack = actor.state.stack(seat)
        holder = actor.state.seat(seat)
        base = holder.stack if holder is not None else stack
        pending = actor.intents.topups.get(seat)
        if pending is not None and pending[2] != wallet_key:
            raise FailedPrecondition("a top-up is already pending", reason="topup_pending")
        if pending is not None and pending[1] != amount:
            raise BadRequest("command_id", "already used for another top-up",
                             reason="command_id_reused")
        if base + amount > actor.settings.buy_in_max:
            raise FailedPrecondition(
                f"a stack may be topped up to {actor.settings.buy_in_max}",
                reason="above_buy_in_max")
        # The top-up is an intent before any money moves: a hand that starts meanwhile, or a
        # crash between the wallet and the table's record, leaves it to the driver to
        # complete between hands (the wallet's key makes its repeat a replay); never
        # chips in an escrow that the stack lacks.
        def top_up(intents: Intents) -> None:
            intents.topups[seat] = (player, amount, wallet_key)

        def drop(intents: Intents) -> None:
            intents.topups.pop(seat, None)

        await actor.set_intent(top_up)
        if actor.state.hand_in_progress:
            return Outcome(actor.version, [], False)
        try:
            await actor.deps.wallet.buy_in(player, table_id, seat, amount, wallet_key)
        except Refused as exc:
            await actor.set_intent(drop)
            raise FailedPrecondition(f"the wallet refused the top-up: {exc.reason}",
                                     reason=exc.reason or "buy_in_refused") from None
        try:
            result, written = await actor._add_chips(seat, amount, wallet_key)
        except RuleViolation as exc:
            if exc.reason is not Reason.HAND_IN_PROGRESS:
                raise
            return Outcome(actor.version, [], False)  # added when the hand ends
        return _outcome(result, written)

    async def set_muck(self, principal: Principal, table_id: str, seat: int,
                       muck: bool) -> Outcome:
        actor = await self.routed(table_id)
        self._own_seat(principal, actor, seat)
        def prefer(intents: Intents) -> None:
            if muck:
                intents.muck.add(seat)
            else:
                intents.muck.discard(seat)

        await actor.set_intent(prefer)
        return Outcome(actor.version, [], False)

    # --- play ----------------------------------------------------------------------------

    async def act(self, principal: Principal, table_id: str, command_id: str, seat: int,
                  command: object, fp: str, expected: int | None) -> Outcome:
        actor = await self.routed(table_id)
        self._own_seat(principal, actor, seat)
        result, written = await actor.commit(command,  # type: ignore[arg-type]
                                             command_key(principal, command_id), fp, expected)
        return _outcome(result, written)

    # --- viewing -------------------------------------------------------------------------

    def viewer_seat(self, principal: Principal, actor: TableActor) -> int | None:
        """The caller's seat at the table now, None for an observer."""
        if principal.role is not Role.PLAYER:
            return None
        for number in range(1, len(actor.state.seats) + 1):
            seat = actor.state.seat(number)
            if seat is not None and seat.player_id == principal.name:
                return number
        return None

    async def watch(self, principal: Principal, table_id: str, after: int
                    ) -> AsyncIterator[EventEnvelope]:
        """The table's envelopes after sequence ``after``, then live ones; a watcher that
        falls ``watcher_buffer`` events behind is cut off (:class:`WatcherTooSlow`)."""
        actor = await self.routed(table_id)
        watcher = Watcher(limit=actor.deps.watcher_buffer)
        # No await between reading the version and registering: nothing is missed.
        upto = actor.version
        actor.watchers.add(watcher)
        try:
            last = after
            if after < upto:
                try:
                    stored_events = await self._store.read(table_id, from_version=after,
                                                           strict=True)
                except TrimmedRange:
                    raise FailedPrecondition(
                        f"the events after {after} were archived; watch from "
                        f"{await self._store.trimmed(table_id)} (stud replay reads archives)",
                        reason="archived") from None
                for stored in stored_events:
                    if stored.envelope.sequence > upto:
                        break
                    yield stored.envelope
                    last = stored.envelope.sequence
            while True:
                if watcher.overflowed and watcher.queue.empty():
                    raise WatcherTooSlow(f"fell behind; resume after sequence {last}")
                envelope = await watcher.queue.get()
                if envelope.sequence <= last:
                    continue
                yield envelope
                last = envelope.sequence
        finally:
            actor.watchers.discard(watcher)

    def hand_viewer(self, principal: Principal, actor: TableActor, hand_number: int
                    ) -> tuple[int | None, bool]:
        """Who the caller is to an event of hand ``hand_number``: the seat they held in
        that hand and True when they were dealt in (whoever holds that seat now is not);
        outside a hand (0) their seat now."""
        if not hand_number:
            return self.viewer_seat(principal, actor), False
        if principal.role is Role.PLAYER:
            for seat, holder in actor.seatings.get(hand_number, {}).items():
                if holder == principal.name:
                    return seat, True
        return None, False

    async def hand_events(self, table_id: str, hand_number: int
                          ) -> tuple[list[EventEnvelope], bool]:
        """The envelopes of one hand, and whether it has ended."""
        actor = await self.routed(table_id)
        if hand_number < 1 or hand_number > actor.state.hands_started:
            raise NotFound(f"hand {hand_number} has not been played", reason="unknown_hand")
        out: list[EventEnvelope] = []
        started = False
        for stored in await self._store.read(table_id):
            env = stored.envelope
            if env.event_type == "HandStarted" and env.hand_number == hand_number:
                started = True
            if started:
                if env.hand_number != hand_number and env.event_type == "HandStarted":
                    break
                if env.hand_number == hand_number:
                    out.append(env)
                if env.event_type == "HandEnded" and env.hand_number == hand_number:
                    return out, True
        if not started:  # played, but no longer in Redis
            raise NotFound(f"hand {hand_number} was archived; stud replay reads the archive",
                           reason="archived")
        return out, False


async def _escrow_holds(actor: TableActor, seat: int, player: str, amount: int) -> bool:
    """Whether the wallet holds at least ``amount`` for ``player`` at ``seat`` now."""
    reply = await actor.deps.wallet.reconcile(actor.table_id)
    return any(s.seat == seat and s.player_id == player and s.balance >= amount
               for s in reply.seats)


def _settings_to_bytes(settings: TableSettings) -> bytes:
    return bytes(settings_to_proto(settings).SerializeToString())


def _settings_from_bytes(raw: bytes | str | None) -> TableSettings:
    if not raw:
        return TableSettings()
    msg = pb.TableSettings.FromString(raw.encode() if isinstance(raw, str) else raw)
    base = settings_from_proto(msg)
    # Stored settings are complete: the buy-in limits and the delay are taken as they are.
    return TableSettings(
        action_time_s=base.action_time_s, time_bank_s=base.time_bank_s,
        buy_in_min=msg.buy_in_min, buy_in_max=msg.buy_in_max,
        next_hand_delay_ms=msg.next_hand_delay_ms,
        timeouts_before_sit_out=base.timeouts_before_sit_out,
        sit_out_limit_s=base.sit_out_limit_s, rathole_window_s=base.rathole_window_s,
        outage_limit_s=base.outage_limit_s)
