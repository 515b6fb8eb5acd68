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

One stream, two tasks, each writing what it has (one write at a time, in the order the
messages were made: :class:`table.play_order.ReplyOrder` says where each goes): the watch
(reading the table's batches) and the actions (reading the client's messages and handling
them one at a time, in order, each in that task: the next message is read only once the
previous one is answered, so a flood waits in gRPC's flow control, never in a queue of
ours). A write waits for the client to read: a watch that falls behind is cut off as
``WatchTable``'s is (``watcher_too_slow``). The handler waits for the end. A client that
half-closes keeps receiving records until it cancels. An action under way when the stream
ends is not cancelled: it goes on to its end, and is answered before the stream's end if the
stream is still open (its watch ended). The stream ends as ``WatchTable``'s does, and with
``INVALID_ARGUMENT`` when the first message is not ``watch`` (``watch_first``), a later one
is (``watch_again``) or is empty (``empty_message``), or a message does not decode
(``undecodable_request``). An action naming another table than the stream's (an empty
``table_id`` included) is refused by a reply (``INVALID_ARGUMENT``, ``other_table``): the
stream's table is the only one it acts at; a ``table_id`` no table can have is refused as
its unary call is (``malformed_id``).

What is sent is built from the watchers' shared record bytes (:class:`table.views.Records`),
never re-serialized: a ``PlayMessage{record=R}`` is the key of field 1 and ``R``'s length
before ``R`` (:func:`record_message`).

The stream's own actions' records come in their replies, not again as records: a record is
left out when the command that wrote it is an action of this stream that was applied. While
an action is in flight, the watch's records written under its command id (its own, or
another command's with the same id: a unary call of the same player's) wait, with the
records after them, for its reply: applied, they are in it; refused, they come as records.
An applied action's reply goes where its records would have been, after every record
written before them. That bookkeeping is :class:`table.play_order.ReplyOrder`'s.
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
from table.play_order import ReplyOrder
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
Played = tuple[int, bool, list[bytes]]
"""An applied action's reply, in parts: the version after it, whether it was a retry
(``duplicate``), and the bytes of each of its records."""
Action = Callable[[Any], Awaitable[Played]]
"""A betting action of the servicer, handled as its unary call (the same checks, the same
refusals raised) but answered as its reply's parts (:func:`reply_message` writes them)."""
_REPLY_KEY: Final = bytes([pb.PlayMessage.DESCRIPTOR.fields_by_name["reply"].number << 3 | 2])
_COMMAND_ID_KEY: Final = bytes([
    pb.PlayReply.DESCRIPTOR.fields_by_name["command_id"].number << 3 | 2])
_COMMAND_REPLY_KEY: Final = bytes([
    pb.PlayReply.DESCRIPTOR.fields_by_name["reply"].number << 3 | 2])
_VERSION_KEY: Final = bytes([pb.CommandReply.DESCRIPTOR.fields_by_name["version"].number << 3])
_EVENT_KEY: Final = bytes([
    pb.CommandReply.DESCRIPTOR.fields_by_name["events"].number << 3 | 2])
_DUPLICATE: Final = bytes([
    pb.CommandReply.DESCRIPTOR.fields_by_name["duplicate"].number << 3]) + b"\x01"


def record_message(record: bytes) -> bytes:
    """The bytes of ``PlayMessage(record=<the record whose bytes are record>)``."""
    return _RECORD_KEY + varint(len(record)) + record


def reply_message(command_id: str, version: int, duplicate: bool, records: list[bytes]
                  ) -> bytes:
    """The bytes of ``PlayMessage(reply=PlayReply(command_id=command_id,
    reply=CommandReply(version=version, events=<records>, duplicate=duplicate)))``, the same
    bytes protobuf writes, made of the records' bytes without parsing them."""
    reply = b"".join((_VERSION_KEY + varint(version) if version else b"",
                      *[_EVENT_KEY + varint(len(r)) + r for r in records],
                      _DUPLICATE if duplicate else b""))
    cid = command_id.encode()
    answer = b"".join((_COMMAND_ID_KEY + varint(len(cid)) + cid if cid else b"",
                       _COMMAND_REPLY_KEY, varint(len(reply)), reply))
    return _REPLY_KEY + varint(len(answer)) + answer


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


_FINISHING: set[asyncio.Task[None]] = set()
"""The tasks of streams that ended while an action was being applied: each finishes its
action (kept here so that nothing collects it meanwhile)."""


@dataclass
class _Stream:
    """One Play stream's state."""

    principal: Principal
    table_id: str
    client: str
    order: ReplyOrder
    """Where its replies go among its records (and which records are its own)."""
    busy: bool = False
    """Whether an action is being handled (read, not yet answered)."""
    acting: bool = False
    """Whether an action is being applied (the servicer's call under way): its task is not
    cancelled when the stream ends, it finishes it (:data:`_FINISHING`)."""
    ended: bool = False
    """The stream has ended: nobody to answer any more."""
    closing: bool = False
    """The watch has ended: the action being handled is the last one."""
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a message is written (grpc.aio allows one write at a time)."""
    stopping: bool = False
    """The stream ends on its action's side: the watch takes nothing more from the order."""
    watch_idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Cleared while the watch writes what it took from the order (it is not cancelled then:
    those messages, a reply among them maybe, would be lost)."""
    written: asyncio.Event = field(default_factory=asyncio.Event)
    """Set each time the watch has written a batch's messages: the action side, waiting for
    its reply's place (:meth:`PlayStreams._act_all`), looks again."""

    def __post_init__(self) -> None:
        self.watch_idle.set()


class PlayStreams:
    """The Play handler (:meth:`serve`) of one table server."""

    def __init__(self, app: TableApp, limiter: StreamLimiter, records: Records,
                 actions: Mapping[str, Action], accounting: Accounting) -> None:
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
                    context: grpc.aio.ServicerContext) -> None:
        """The stream, each message written as bytes (``context.write``:
        ``add_table_service`` sends them as they are)."""
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
            viewer = self._app.hand_viewer
            record = self._records.record_bytes
            batched = first.watch.batched

            def render(batch: list[EventEnvelope]) -> list[bytes]:
                """The messages of a run of records of the watch's."""
                records = [record(e, *viewer(principal, actor, e.hand_number))
                           for e in batch]
                if batched:
                    return [record_message(batch_bytes(records))]
                return [record_message(one) for one in records]

            order = ReplyOrder(
                actor.version, command_key(principal, "") if first.watch.skip_own else None,
                render, after)
            stream = _Stream(
                principal, table_id,
                self._accounting.callers.key(context.peer(), context.invocation_metadata())
                if self._accounting.rates is not None else "", order)
            watching = asyncio.create_task(self._watch(stream, after, context))
            acting = asyncio.create_task(self._act_all(requests, stream, context))
            try:
                await self._until_the_end(stream, context, watching, acting)
            finally:
                stream.ended = True
                if stream.acting and not acting.done():
                    # The action under way goes on to its end (counted and logged then);
                    # the task ends after it.
                    _FINISHING.add(acting)
                    acting.add_done_callback(_FINISHING.discard)
                else:
                    await settle(acting)
                await settle(watching)

    async def _until_the_end(self, stream: _Stream, context: grpc.aio.ServicerContext,
                             watching: asyncio.Task[None], acting: asyncio.Task[None]
                             ) -> None:
        """Wait for the stream's end: its watch's (the action under way, if any, answered
        first, then what the order still holds: :meth:`ReplyOrder.drain`), or a message that
        ends it (the same, the watch stopped first, once it has written what it took from the
        order: a reply may be among it). A client that half-closes keeps its
        records: the actions' end alone ends nothing."""
        waiting: set[asyncio.Task[None]] = {watching, acting}
        while True:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if watching.done():
                end = watching.exception()
                if end is not None:
                    stream.closing = True
                    if stream.busy and not acting.done():
                        # It answers its action, then returns (it is not cancelled).
                        await asyncio.wait({acting})
                    await self._write(stream, context, stream.order.drain())
                    raise end
                waiting.discard(watching)
            if acting.done() and acting in waiting:
                waiting.discard(acting)
                failure = acting.exception()
                if failure is not None:
                    stream.stopping = True
                    while not stream.watch_idle.is_set():  # its write finished first
                        await stream.watch_idle.wait()
                    await settle(watching)
                    await self._write(stream, context, stream.order.drain())
                    raise failure
            if not waiting:
                await asyncio.get_running_loop().create_future()  # until the client goes

    @staticmethod
    async def _write(stream: _Stream, context: grpc.aio.ServicerContext,
                     messages: list[bytes]) -> None:
        """Write ``messages`` in order, after every message made before them (one write at a
        time: the order's messages are made and queued for the lock in one step, and the
        lock is first come, first served)."""
        if not messages:
            return
        async with stream.writing:
            for message in messages:
                await context.write(message)

    async def _watch(self, stream: _Stream, after: int,
                     context: grpc.aio.ServicerContext) -> None:
        """The table's batches, written as they come (as the order says); raises how the
        watch ended (after_the_end, archived, moved, ...)."""
        batches = cast(AsyncGenerator[list[EventEnvelope], None],
                       self._app.watch_batches(stream.principal, stream.table_id, after))
        order, idle = stream.order, stream.watch_idle
        try:
            async for batch in batches:
                if stream.stopping:
                    return
                messages = order.batch(batch)
                if messages:
                    idle.clear()
                    try:
                        await self._write(stream, context, messages)
                    finally:
                        idle.set()
                    stream.written.set()
        finally:
            await batches.aclose()

    async def _act_all(self, requests: AsyncIterator[pb.PlayRequest], stream: _Stream,
                       context: grpc.aio.ServicerContext) -> None:
        """The client's messages, one at a time, each answered before the next is read; a
        message that ends the stream, last. A client that half-closes keeps its records.
        An applied action's reply that waits for its place among the records is not written
        yet: the next message is read only once it is (the watch wrote it), so that a flood
        behind a watch the client does not read waits in gRPC's flow control, never in the
        order (refusals would queue behind that reply)."""
        order, written = stream.order, stream.written
        try:
            async for request in requests:
                stream.busy = True
                answer = await self._one(request, stream, context)
                if stream.ended:
                    return  # nobody to answer: the action was counted and logged as late
                await self._write(stream, context, order.answered(*answer))
                stream.busy = False
                if stream.closing:
                    return
                while order.waiting:  # the watch's end drains it and cancels this wait
                    written.clear()
                    await written.wait()
        except Exception:  # a later `watch`, an empty or undecodable message, expiry
            stream.busy = False
            raise

    async def _one(self, request: pb.PlayRequest, stream: _Stream,
                   context: grpc.aio.ServicerContext
                   ) -> tuple[bytes, str, int | None, bool]:
        """One action, handled as its unary call: its reply's bytes, its stored command id
        ("" when it was refused before it had one) and, applied, the version after it
        (None: refused). An action under way when the stream ends goes on to its end (its
        task is not cancelled: it is answered if the stream is still open, its outcome
        logged anyway)."""
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
                if action.table_id:
                    check_ident(action.table_id, "table_id")  # malformed: as its call is
                raise BadRequest("table_id", f"this Play stream acts at {stream.table_id} "
                                 "only", reason="other_table")
            cid = command_key(stream.principal, action.command_id)
            stream.order.started(cid)
            stream.acting = True
            try:
                played = await self._actions[kind](action)
            finally:
                stream.acting = False
        except Exception as exc:
            if stream.ended:
                mapped = accounting.errors.map(exc)
                self._late(path, started, mapped.code)
                return b"", cid, None, False, mapped.code
            if isinstance(exc, RateLimited) and accounting.rates is not None:
                # Answered after the unary call's hold: a flooding stream gets a trickle.
                await accounting.rates.hold(stream.client, None, stream.principal)
            mapped = accounting.errors.map(exc)
            seconds = time.perf_counter() - started
            log_refusal(mapped, exc, round(seconds * 1000, 2), accounting.sampler,
                        accounting.metrics, rpc=path)
            accounting.metrics.observe_rpc(path, mapped.code, seconds)
            return refusal(action.command_id, mapped), cid, None, False, mapped.code
        if stream.ended:
            self._late(path, started, grpc.StatusCode.OK)
            return b"", cid, None, False, grpc.StatusCode.OK
        seconds = time.perf_counter() - started
        log.info("rpc_handled", rpc=path, code=grpc.StatusCode.OK.name,
                 duration_ms=round(seconds * 1000, 2))
        accounting.metrics.observe_rpc(path, grpc.StatusCode.OK, seconds)
        version, duplicate, records = played
        return (reply_message(action.command_id, version, duplicate, records), cid, version,
                not duplicate, grpc.StatusCode.OK)

    def _late(self, path: str, started: float, code: grpc.StatusCode) -> None:
        """Count and log an action that ended after its stream did (nobody to answer)."""
        accounting = self._accounting
        seconds = time.perf_counter() - started
        log.info("rpc_handled_after_the_stream", rpc=path, code=code.name,
                 duration_ms=round(seconds * 1000, 2))
        accounting.metrics.observe_rpc(path, code, seconds)


def refusal(command_id: str, mapped: MappedError) -> bytes:
    """The bytes of a refused action's reply."""
    data: bytes = pb.PlayMessage(reply=pb.PlayReply(
        command_id=command_id, code=mapped.code.value[0], reason=mapped.reason,
        message=mapped.message, metadata=dict(mapped.metadata))).SerializeToString()
    return data
