"""``TableService.Play``: a player's table over one bidirectional stream (issue 35).

The first message is ``watch`` (a ``WatchTableRequest``); the stream then carries what
``WatchTable`` carries, as ``PlayMessage.record``, and takes the caller's betting actions for
that table, each answered by one ``PlayMessage.reply``. An action is handled exactly as its
unary call is: this module calls the servicer's own unary method (the same checks, the same
fingerprint, ``TableApp.act`` with the stream's principal, the same command ids and
idempotency), then counts it, logs it and rate-limits it as the interceptors count, log and
limit a call (method ``Play/<Action>`` in ``stud_grpc_requests_total``). A refused action is
a reply carrying the status code, ``stud-reason``, message and ``ErrorInfo`` metadata its
call would have ended with (the service's own :class:`~studkit.grpc_errors.ErrorTable`), and
the stream goes on. As for the unary call, a refusal changes nothing, except ``UNAVAILABLE``,
``INTERNAL`` or ``DEADLINE_EXCEEDED`` once the append was sent: that action may have been
applied, and is retried with the same command id (a duplicate then).

One stream, three parts: the watch (a task reading the table's batches), the actions (a task
reading the client's messages and handling them one at a time, in order: the next message is
read only once the previous one is answered, so a flood waits in gRPC's flow control, never
in a queue of ours), and the one writer, this handler's generator (grpc.aio allows one write
at a time), which takes both from a small queue. A client that half-closes keeps receiving
records until it cancels. An action under way when the stream ends is not cancelled: it goes
on to its end, and is answered before the stream's end if the stream is still open (its
watch ended). The stream ends as ``WatchTable``'s does, and with
``INVALID_ARGUMENT`` when the first message is not ``watch`` (``watch_first``), a later one
is (``watch_again``) or is empty (``empty_message``), or a message does not decode
(``undecodable_request``). An action naming another table than the stream's (an empty
``table_id`` included) is refused by a reply (``INVALID_ARGUMENT``, ``other_table``): the
stream's table is the only one it acts at.

What is sent is built from the watchers' shared record bytes (:class:`table.views.Records`),
never re-serialized: a ``PlayMessage{record=R}`` is the key of field 1 and ``R``'s length
before ``R`` (:func:`record_message`).

The stream's own actions' records come in their replies, not again as records: a record is
left out when the command that wrote it is an action of this stream that was applied. While
an action is in flight, the watch's records written under its command id (its own, or
another command's with the same id: a unary call of the same player's) wait, with the
records after them, for its reply: applied, they are in it; refused, they come as records.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

import grpc
import structlog

from stud.v1 import table_pb2 as pb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import telemetry
from studkit.auth import Principal, Unauthorized
from studkit.errors import BadRequest
from studkit.grpc_errors import ErrorTable, MappedError
from studkit.grpc_handlers import EXPIRED_REASON, Clock, settle
from studkit.grpc_server import current_principal, log_refusal, log_summary
from studkit.limits import CallerKeys, CallRateLimiter, LogSampler, RateLimited, StreamLimiter
from studkit.mapping.common import check_ident
from studkit.metrics import Metrics
from table.app import TableApp, command_key
from table.views import Records, batch_bytes, varint

log = structlog.get_logger("studkit.grpc")

ACTIONS: Final = {
    "post_bring_in": "PostBringIn",
    "complete": "Complete",
    "bet": "Bet",
    "raise": "Raise",
    "call": "Call",
    "check": "Check",
    "fold": "Fold",
}
"""Each action a Play stream takes (``PlayRequest.kind``) and the unary call it is."""
_KINDS: Final = {f.name for f in pb.PlayRequest.DESCRIPTOR.oneofs_by_name["kind"].fields}
if {"watch", *ACTIONS} != _KINDS:
    raise ImportError("PlayRequest's kinds and ACTIONS differ: protos/gen is out of date?")

_RECORD_KEY: Final = bytes([pb.PlayMessage.DESCRIPTOR.fields_by_name["record"].number << 3 | 2])
"""The key of ``PlayMessage.record`` (a length-delimited field) on the wire."""
_EVENT_ID = re.compile(r"0-([0-9]{1,19})")
"""A resume point: the stream id ``0-<sequence>`` (ASCII digits, at most 19 of them)."""
OUTBOX: Final = 4
"""What waits for the writer at most (batches of records, replies): past that the watch and
the actions wait for the client to read; a watcher that falls behind is cut off as
``WatchTable``'s is (``watcher_too_slow``)."""

Unary = Callable[[Any, grpc.aio.ServicerContext], Awaitable[pb.CommandReply]]
"""A unary action of the servicer: request -> ``CommandReply`` (raises when refused)."""


def record_message(record: bytes) -> bytes:
    """The bytes of ``PlayMessage(record=<the record whose bytes are record>)``."""
    return _RECORD_KEY + varint(len(record)) + record


def resume_point(request: pb.WatchTableRequest) -> tuple[str, int]:
    """The table and the sequence after which a watch begins (``after_sequence``, else the
    deprecated ``after_event_id``)."""
    table_id = check_ident(request.table_id, "table_id")
    after = int(request.after_sequence)
    if not after and request.after_event_id:
        match = _EVENT_ID.fullmatch(request.after_event_id)
        if match is None:
            raise BadRequest("after_event_id", "not an event id of this table (0-<n>)")
        after = int(match.group(1))
    return table_id, after


@dataclass(frozen=True)
class Accounting:
    """How the server counts, logs and limits a call, shared with each action of a Play
    stream: the error table, the metrics, the refusal log's sampler, the players' call rates
    and whose budget a call spends (the same objects the server's interceptors hold)."""

    errors: ErrorTable
    metrics: Metrics
    sampler: LogSampler = field(default_factory=lambda: LogSampler(log_summary))
    rates: CallRateLimiter | None = None
    callers: CallerKeys = field(default_factory=CallerKeys)
    clock: Clock = time.time


_BATCH, _REPLY, _END = 0, 1, 2


@dataclass
class _Stream:
    """One Play stream's state."""

    principal: Principal
    table_id: str
    client: str
    live_from: int
    """The table's version when the watch began: records after it may be this stream's."""
    every_own: str | None
    """The prefix of the caller's stored command ids when ``skip_own`` was asked for."""
    mine: dict[str, int] = field(default_factory=dict)
    """The stored command ids of this stream's actions whose records may still come by the
    watch: 0 while in flight, then, once applied, the version after them (forgotten once
    the watch is past it); a refused one is forgotten at its reply."""
    held: list[list[EventEnvelope]] = field(default_factory=list)
    """Batches the watch delivered from the first one holding a record of an action in
    flight on: whether that record is this stream's own is known at the action's reply
    (applied: it is in the reply; refused: another command with the same id, or an append
    whose outcome was lost, wrote it, and it comes as a record), and the rest wait behind
    it, in order."""
    pending: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    """The replies of actions applied, each waiting for its place among the records (by
    stored command id: the reply's bytes and the version after it)."""
    busy: bool = False
    """Whether an action is being handled (read, not yet answered)."""
    closing: bool = False
    """The watch has ended: the action being handled is the last one."""
    outbox: asyncio.Queue[tuple[int, Any]] = field(
        default_factory=lambda: asyncio.Queue(OUTBOX))


class PlayStreams:
    """The Play handler (:meth:`serve`) of one table server."""

    def __init__(self, app: TableApp, limiter: StreamLimiter, records: Records,
                 actions: Mapping[str, Unary], accounting: Accounting) -> None:
        if set(actions) != set(ACTIONS):
            raise ValueError("a Play stream needs every action of ACTIONS")
        self._app = app
        self._limiter = limiter
        self._records = records
        self._actions = dict(actions)
        self._accounting = accounting
        self._paths = {kind: f"/{pb.DESCRIPTOR.services_by_name['TableService'].full_name}"
                             f"/Play/{name}" for kind, name in ACTIONS.items()}

    async def serve(self, requests: AsyncIterator[pb.PlayRequest],
                    context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        """The stream (each message as bytes: ``add_table_service`` sends them as they
        are)."""
        principal = current_principal()
        # Counted as a watch from the start: a stream that never sends its `watch` holds a
        # place too.
        async with self._limiter.hold(principal, context.peer()):
            first = await anext(requests, None)
            if first is None or first.WhichOneof("kind") != "watch":
                raise BadRequest("watch", "the first message of a Play stream is `watch`",
                                 reason="watch_first")
            table_id, after = resume_point(first.watch)
            actor = (await self._app.routed(table_id)).actor
            rates = self._accounting.rates
            stream = _Stream(
                principal, table_id,
                self._accounting.callers.key(context.peer(), context.invocation_metadata())
                if rates is not None else "",
                actor.version,
                command_key(principal, "") if first.watch.skip_own else None)
            watching = asyncio.create_task(self._watch(stream, after))
            acting = asyncio.create_task(self._act_all(requests, stream, context))
            viewer = self._app.hand_viewer
            record = self._records.record_bytes
            batched = first.watch.batched

            def shown(batch: list[EventEnvelope]) -> list[bytes]:
                """The messages of one batch of the watch's."""
                last = batch[-1].sequence
                if stream.mine or stream.every_own is not None:
                    batch = [e for e in batch if not _own(stream, e)]
                    for cid in [c for c, v in stream.mine.items() if 0 < v <= last]:
                        del stream.mine[cid]
                    if not batch:
                        return []
                records = [record(e, *viewer(principal, actor, e.hand_number))
                           for e in batch]
                if batched:
                    return [record_message(batch_bytes(records))]
                return [record_message(one) for one in records]

            def emit(batch: list[EventEnvelope]) -> list[bytes]:
                """The messages of one batch, with each reply waiting for its place put
                before the first record of its action (or before the first record past the
                version after it, should the action's records not come)."""
                pending = stream.pending
                if not pending:
                    return shown(batch)
                out: list[bytes] = []
                start = 0
                for at, envelope in enumerate(batch):
                    due = [cid for cid, (_data, version) in pending.items()
                           if cid == envelope.command_id or version < envelope.sequence]
                    if not due:
                        continue
                    if at > start:
                        out += shown(batch[start:at])
                        start = at
                    out += [pending.pop(cid)[0] for cid in due]
                    if not pending:
                        break
                return out + shown(batch[start:]) if start < len(batch) else out

            def released() -> list[bytes]:
                """The messages of the held batches no action in flight holds back."""
                out: list[bytes] = []
                while stream.held and not _held_back(stream, stream.held[0]):
                    out += emit(stream.held.pop(0))
                return out

            def answered(item: tuple[bytes, str, int | None, bool]) -> list[bytes]:
                """A reply, and the held records its outcome releases (before it when it was
                refused: those are someone else's records, or an append whose outcome was
                lost). An action applied now waits for its place: the reply goes out where
                its records would have, after every record written before them
                (:func:`emit`), whether the watch has delivered them yet or not (a client
                folding by sequence would drop a record that came after a reply past it);
                a retry's reply (its records came long ago) goes at once."""
                data, cid, version, fresh = item
                if version is None:
                    if cid and stream.mine.get(cid) == 0:
                        del stream.mine[cid]
                    return [*released(), data]
                if cid:
                    stream.mine[cid] = max(version, 1)
                    if fresh:
                        stream.pending[cid] = (data, version)
                        return released()
                return [data, *released()]

            try:
                while True:
                    kind, item = await stream.outbox.get()
                    if kind == _REPLY:
                        for message in answered(item):
                            yield message
                        continue
                    if kind == _END:
                        # The action under way, if any, is answered before the end (and its
                        # records the watch delivered, as the reply's outcome says).
                        async for message in self._last_answers(stream, acting, answered,
                                                                emit):
                            yield message
                        raise item
                    if stream.held or _held_back(stream, item):
                        stream.held.append(item)
                        continue
                    for message in emit(item):
                        yield message
            finally:
                await settle(acting)
                await settle(watching)

    @staticmethod
    async def _last_answers(stream: _Stream, acting: asyncio.Task[None],
                            answered: Callable[[Any], list[bytes]],
                            emit: Callable[[list[EventEnvelope]], list[bytes]]
                            ) -> AsyncIterator[bytes]:
        """Once the watch has ended: the replies still to come (the action being handled
        finishes: it is not cancelled), then the records still held (no action is in flight
        any more: one that never answered is not this stream's), each reply still waiting
        for its place in them, and last the replies whose records never came."""
        stream.closing = True
        while True:
            while not stream.outbox.empty():
                kind, item = stream.outbox.get_nowait()
                if kind == _REPLY:
                    for message in answered(item):
                        yield message
            if acting.done() or not stream.busy:
                break
            getting = asyncio.ensure_future(stream.outbox.get())
            try:
                await asyncio.wait({acting, getting}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getting.done():
                    getting.cancel()
            if getting.done() and not getting.cancelled():
                kind, item = getting.result()
                if kind == _REPLY:
                    for message in answered(item):
                        yield message
        for cid in [c for c, v in stream.mine.items() if v == 0]:
            del stream.mine[cid]
        held, stream.held = stream.held, []
        for batch in held:
            for message in emit(batch):
                yield message
        waiting, stream.pending = stream.pending, {}
        for data, _version in waiting.values():
            yield data

    async def _watch(self, stream: _Stream, after: int) -> None:
        """The table's batches into the outbox; how the watch ended, last."""
        batches = cast(AsyncGenerator[list[EventEnvelope], None],
                       self._app.watch_batches(stream.principal, stream.table_id, after))
        try:
            async for batch in batches:
                await stream.outbox.put((_BATCH, batch))
        except Exception as exc:  # the watch's end (after_the_end, archived, moved, ...)
            await stream.outbox.put((_END, exc))
        finally:
            await batches.aclose()

    async def _act_all(self, requests: AsyncIterator[pb.PlayRequest], stream: _Stream,
                       context: grpc.aio.ServicerContext) -> None:
        """The client's messages, one at a time, each answered before the next is read; a
        message that ends the stream, last. A client that half-closes keeps its records."""
        try:
            async for request in requests:
                stream.busy = True
                await stream.outbox.put((_REPLY, await self._one(request, stream, context)))
                stream.busy = False
                if stream.closing:
                    return
        except Exception as exc:  # a later `watch`, an empty or undecodable message, expiry
            stream.busy = False
            await stream.outbox.put((_END, exc))

    async def _one(self, request: pb.PlayRequest, stream: _Stream,
                   context: grpc.aio.ServicerContext
                   ) -> tuple[bytes, str, int | None, bool]:
        """One action, handled as its unary call: its reply's bytes, its stored command id
        ("" when it was refused before it had one) and, applied, the version after it
        (None: refused). An action under way when the stream ends goes on to its end
        (shielded: it is answered if the stream is still open, its outcome logged
        anyway)."""
        kind = request.WhichOneof("kind")
        if kind is None:
            raise BadRequest("kind", "an empty message on a Play stream",
                             reason="empty_message")
        if kind == "watch":
            raise BadRequest("watch", "a Play stream has one `watch`, its first message",
                             reason="watch_again")
        expires_at = stream.principal.expires_at
        if expires_at is not None and self._accounting.clock() >= expires_at:
            raise Unauthorized("token expired: resume the stream with a fresh token",
                               reason=EXPIRED_REASON)
        path = self._paths[kind]
        with telemetry.served(path) as span:  # a trace of its own, as its unary call's
            data, cid, version, fresh, code = await self._handled(
                kind, getattr(request, kind), stream, context)
            if span is not None:
                span.set_attribute("rpc.grpc.status_code", code.value[0])
        return data, cid, version, fresh

    async def _handled(self, kind: str, action: Any, stream: _Stream,
                       context: grpc.aio.ServicerContext
                       ) -> tuple[bytes, str, int | None, bool, grpc.StatusCode]:
        """:meth:`_one`'s action, handled: as :meth:`_one` says, and its status code."""
        path = self._paths[kind]
        accounting = self._accounting
        started = time.perf_counter()
        cid = ""
        try:
            if accounting.rates is not None:
                accounting.rates.check(stream.principal, stream.client)
            if action.table_id != stream.table_id:
                raise BadRequest("table_id", f"this Play stream acts at {stream.table_id} "
                                 "only", reason="other_table")
            cid = command_key(stream.principal, action.command_id)
            stream.mine.setdefault(cid, 0)
            handling = asyncio.ensure_future(self._actions[kind](action, context))
            try:
                reply = await asyncio.shield(handling)
            except asyncio.CancelledError:
                handling.add_done_callback(lambda done: self._late(done, path, started))
                raise
        except Exception as exc:
            if isinstance(exc, RateLimited) and accounting.rates is not None:
                # Answered after the unary call's hold: a flooding stream gets a trickle.
                await accounting.rates.hold(stream.client, None, stream.principal)
            mapped = accounting.errors.map(exc)
            seconds = time.perf_counter() - started
            log_refusal(mapped, exc, round(seconds * 1000, 2), accounting.sampler,
                        accounting.metrics, rpc=path)
            accounting.metrics.observe_rpc(path, mapped.code, seconds)
            return refusal(action.command_id, mapped), cid, None, False, mapped.code
        seconds = time.perf_counter() - started
        log.info("rpc_handled", rpc=path, code=grpc.StatusCode.OK.name,
                 duration_ms=round(seconds * 1000, 2))
        accounting.metrics.observe_rpc(path, grpc.StatusCode.OK, seconds)
        data: bytes = pb.PlayMessage(reply=pb.PlayReply(command_id=action.command_id,
                                                        reply=reply)).SerializeToString()
        return data, cid, reply.version, not reply.duplicate, grpc.StatusCode.OK

    def _late(self, done: asyncio.Future[pb.CommandReply], path: str, started: float
              ) -> None:
        """Count and log an action that ended after its stream did (nobody to answer)."""
        accounting = self._accounting
        seconds = time.perf_counter() - started
        if done.cancelled():
            code = grpc.StatusCode.CANCELLED
        elif (exc := done.exception()) is not None:
            code = accounting.errors.map(exc).code
        else:
            code = grpc.StatusCode.OK
        log.info("rpc_handled_after_the_stream", rpc=path, code=code.name,
                 duration_ms=round(seconds * 1000, 2))
        accounting.metrics.observe_rpc(path, code, seconds)


def _held_back(stream: _Stream, batch: list[EventEnvelope]) -> bool:
    """Whether ``batch`` holds a record of an action of the stream in flight (written after
    the watch began by a command with its id: the action's own, or another's with the same
    id)."""
    mine, live_from = stream.mine, stream.live_from
    return bool(mine) and any(e.sequence > live_from and mine.get(e.command_id) == 0 for e in batch)


def _own(stream: _Stream, envelope: EventEnvelope) -> bool:
    """Whether ``envelope`` is left out of the stream's records: written after the watch
    began by one of its applied actions (or by any command of the caller, with
    ``skip_own``)."""
    if envelope.sequence <= stream.live_from:
        return False
    cid = envelope.command_id
    if cid in stream.mine:
        return True
    return stream.every_own is not None and cid.startswith(stream.every_own)


def refusal(command_id: str, mapped: MappedError) -> bytes:
    """The bytes of a refused action's reply."""
    data: bytes = pb.PlayMessage(reply=pb.PlayReply(
        command_id=command_id, code=mapped.code.value[0], reason=mapped.reason,
        message=mapped.message, metadata=dict(mapped.metadata))).SerializeToString()
    return data
