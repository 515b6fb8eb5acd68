"""Playing a table over one stream: :class:`PlaySession` (``TableService.Play``, issue 35).

A native client's seat at a table as one bidirectional stream: the table's records come in on
it (as :meth:`Client.watch_records` hands them over: one at a time, in order, each as the
player may see it) and the player's betting actions go out on it, each one message instead of
a unary call of its own, answered on the same stream. Each action method returns the
action's ``CommandReply`` or raises the typed :class:`~studclient.errors.StudError` its unary
call (:meth:`Client.check`, ...) would raise, the same reasons mapped the same way::

    async with client.play(table_id) as session:
        async for record in session.records():
            ...  # fold it; when it is your turn:
            reply = await session.check()

How it works:

- The first message is ``watch`` (``after_sequence``, batched); then each action. The table
  sends the records of the actions sent on the stream only in their replies: the session
  hands their events over in :meth:`PlaySession.records` too, in sequence order with the
  others (records that arrive while an action waits for its reply, and a reply's events
  while another action still waits, are held until no action waits, then handed over
  merged by sequence: an action may apply on top of a record not handed over yet; a
  sequence already handed over is dropped), so the records read are every record the
  player may see, each once, as ``WatchTable`` gives them.
- A refused action is a reply with the status code and reason of its unary call: raised as
  that call's :class:`~studclient.errors.StudError` (``Stale``, ``NotYourTurn``,
  ``IllegalAction``, ...). One refused ``UNAVAILABLE``, ``DEADLINE_EXCEEDED`` or ``ABORTED``
  is sent again on the stream with the same command id, after the client's
  :class:`~studclient.client.RetryPolicy` backoff, as the unary call is retried; so is one
  whose reply does not come within the policy's ``timeout_s`` (after the backoff too; a
  reply that comes during it answers the action).
- The stream is opened again after a resumable ending (the server restarted or cut it, a
  too-slow watcher, ``token_expired`` with a fresh token, ``not_owner`` at the owner named)
  from the last sequence handed over, and every action still waiting for its reply is sent
  again on it with the same command id: the table answers a retry of an applied action with
  its recorded outcome, so nothing happens twice and nothing is lost. Any other ending fails
  the session: the waiting actions and :meth:`PlaySession.records` raise it.
- ``expected_sequence`` (``AUTO`` by default): the client's known version of the table, which
  the session's records and replies keep current.

gRPC-Web cannot send a client stream: a browser plays over ``WatchTable`` and the unary
actions (docs/sdk.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import grpc

from stud.v1 import common_pb2, table_pb2
from studclient.errors import (
    DeadlineExceeded,
    StudError,
    from_play_reply,
    status_code,
)
from studclient.expected import AUTO, ExpectedSequence
from studclient.resume import follow
from studclient.watch import records_of

if TYPE_CHECKING:
    from studclient.client import Client

FIELDS: Final[dict[str, str]] = {
    "PostBringIn": "post_bring_in", "Complete": "complete", "Bet": "bet", "Raise": "raise",
    "Call": "call", "Check": "check", "Fold": "fold",
}
"""The ``PlayRequest`` field of each betting action (by its unary method's name)."""
_ENDED: Final = object()


@dataclass
class _Waiting:
    """An action sent whose reply has not come."""

    message: table_pb2.PlayRequest
    reply: asyncio.Future[table_pb2.CommandReply]
    delays: list[float]
    started: float = field(default_factory=time.monotonic)


class PlaySession:
    """A player's table over one ``Play`` stream (see the module docstring).

    ``async with client.play(table_id) as session:`` then ``session.records()`` and the
    actions (:meth:`check`, :meth:`bet`, ..., :meth:`act`). ``last_sequence`` is the last
    record handed over (the resume token), ``resumes`` how many times the stream was opened
    again.
    """

    def __init__(self, client: Client, table_id: str, after_sequence: int = 0) -> None:
        self.client = client
        self.table_id = table_id
        self.last_sequence = after_sequence
        """The last record's sequence handed over (where the stream resumes)."""
        self.resumes = 0
        """How many times the stream was opened again."""
        self.error: BaseException | None = None
        """What ended the session, once it failed."""
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._waiting: dict[str, _Waiting] = {}
        self._held: list[table_pb2.TableEventRecord] = []
        self._call: Any = None
        self._write_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._timers: set[asyncio.Task[None]] = set()
        self._closed = False

    async def __aenter__(self) -> PlaySession:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        """Open the stream (and keep it open until :meth:`close`)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        """End the stream; :meth:`records` ends, actions still waiting raise."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()
        for task in [*self._timers, *([self._task] if self._task else [])]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fail_waiting(StudError(grpc.StatusCode.CANCELLED, "", "the session was closed"))
        self._queue.put_nowait(_ENDED)

    # --- the records -----------------------------------------------------------------------

    async def records(self) -> AsyncGenerator[table_pb2.TableEventRecord, None]:
        """The table's records after ``after_sequence``, then live ones, one at a time and in
        order, the events of this session's own actions included (from their replies); ends
        when the session is closed, raises the session's error when it failed. One reader
        at a time."""
        while True:
            item = await self._queue.get()
            if item is _ENDED:
                self._queue.put_nowait(_ENDED)
                if self.error is not None:
                    raise self.error
                return
            yield item

    # --- the actions -----------------------------------------------------------------------

    async def bring_in(self, *, seat: int | None = None,
                       expected_sequence: ExpectedSequence = AUTO,
                       command_id: str | None = None) -> table_pb2.CommandReply:
        """Post the forced bring-in."""
        return await self._action("PostBringIn", seat, expected_sequence, command_id)

    async def complete(self, to: int | None = None, *, seat: int | None = None,
                       expected_sequence: ExpectedSequence = AUTO,
                       command_id: str | None = None) -> table_pb2.CommandReply:
        """Complete the bring-in (``to``: the street total you mean to reach, checked)."""
        return await self._action("Complete", seat, expected_sequence, command_id, to)

    async def bet(self, to: int | None = None, *, seat: int | None = None,
                  expected_sequence: ExpectedSequence = AUTO,
                  command_id: str | None = None) -> table_pb2.CommandReply:
        """Bet."""
        return await self._action("Bet", seat, expected_sequence, command_id, to)

    async def raise_(self, to: int | None = None, *, seat: int | None = None,
                     expected_sequence: ExpectedSequence = AUTO,
                     command_id: str | None = None) -> table_pb2.CommandReply:
        """Raise."""
        return await self._action("Raise", seat, expected_sequence, command_id, to)

    async def call(self, *, seat: int | None = None,
                   expected_sequence: ExpectedSequence = AUTO,
                   command_id: str | None = None) -> table_pb2.CommandReply:
        """Call (all-in for less when short)."""
        return await self._action("Call", seat, expected_sequence, command_id)

    async def check(self, *, seat: int | None = None,
                    expected_sequence: ExpectedSequence = AUTO,
                    command_id: str | None = None) -> table_pb2.CommandReply:
        """Check."""
        return await self._action("Check", seat, expected_sequence, command_id)

    async def fold(self, *, seat: int | None = None,
                   expected_sequence: ExpectedSequence = AUTO,
                   command_id: str | None = None) -> table_pb2.CommandReply:
        """Fold."""
        return await self._action("Fold", seat, expected_sequence, command_id)

    async def act(self, action: common_pb2.LegalAction, *, seat: int | None = None,
                  expected_sequence: ExpectedSequence = AUTO,
                  command_id: str | None = None) -> table_pb2.CommandReply:
        """Take one of the view's legal actions (``hand.legal_actions.actions``), with its
        amount (``to``) for a completion, bet or raise."""
        from studclient.client import legal_action
        method, to = legal_action(action)
        return await self._action(method, seat, expected_sequence, command_id, to)

    async def _action(self, method: str, seat: int | None,
                      expected: ExpectedSequence, command_id: str | None,
                      to: int | None = None) -> table_pb2.CommandReply:
        if self.error is not None:
            raise self.error
        if self._closed:
            raise StudError(grpc.StatusCode.CANCELLED, "", "the session was closed")
        self.start()  # an action opens the stream if nothing has yet
        request = await self.client.seat_request(
            method, self.table_id, seat, expected, command_id,
            **({"to": to} if to is not None else {}))
        message = table_pb2.PlayRequest(**{FIELDS[method]: request})
        policy = self.client.retry
        waiting = _Waiting(message, asyncio.get_running_loop().create_future(),
                           policy.delays())
        try:
            await self._send(message, (request.command_id, waiting))
            while True:
                try:
                    reply = await asyncio.wait_for(asyncio.shield(waiting.reply),
                                                   policy.timeout_s)
                except TimeoutError:
                    pause = policy.pause(waiting.delays, waiting.started, time.monotonic())
                    if pause is None:
                        raise DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED, "",
                                               "no reply on the Play stream") from None
                    # The backoff first; a reply that comes in it is the answer.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(waiting.reply), pause)
                    if not waiting.reply.done():
                        await self._send(message)  # again, the same command id
                    continue
                self.client.saw(self.table_id, reply.version)
                return reply
        finally:
            self._waiting.pop(request.command_id, None)
            self._release()  # what was held for this action's reply, once none waits

    # --- the stream ------------------------------------------------------------------------

    async def _send(self, message: table_pb2.PlayRequest,
                    waiting: tuple[str, _Waiting] | None = None) -> None:
        """Write ``message`` on the open stream (first, ``waiting`` = (command id, the
        action) registered as waiting for its reply); when there is none (or the write fails),
        the next stream opened sends it (every action waiting for its reply)."""
        async with self._write_lock:
            if waiting is not None:
                self._waiting[waiting[0]] = waiting[1]
            if self._call is None:
                return
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError,
                                     asyncio.InvalidStateError):
                await self._call.write(message)

    def _hand_over(self, records: Iterable[table_pb2.TableEventRecord]) -> None:
        for record in records:
            if record.sequence <= self.last_sequence:
                continue  # had already (a reply's record, a resumed stream's catch-up)
            self.last_sequence = record.sequence
            self.client.saw(self.table_id, record.sequence)
            self._queue.put_nowait(record)

    def _release(self) -> None:
        """Hand over the held records (stream records and replies' events) merged by
        sequence, once no action waits for its reply: until then a waiting action's events
        may still sit below any of them (it may apply on top of a record not handed over
        yet: ``expected_sequence`` None, or AUTO from a view ahead of the stream)."""
        if not self._held or any(not w.reply.done() for w in self._waiting.values()):
            return
        held = sorted(self._held, key=lambda r: r.sequence)
        self._held.clear()
        self._hand_over(held)

    def _handle(self, message: table_pb2.PlayMessage) -> None:
        if message.HasField("record"):
            self._held.extend(records_of(message.record))
            self._release()
            return
        answer = message.reply
        waiting = self._waiting.get(answer.command_id)
        if waiting is None or waiting.reply.done():
            return  # the answer to a retry already answered
        if answer.code:
            from studclient.client import RETRIED_CODES
            if status_code(answer.code) in RETRIED_CODES:
                pause = self.client.retry.pause(waiting.delays, waiting.started,
                                                time.monotonic())
                if pause is not None:
                    self._later(pause, waiting.message)
                    return
            waiting.reply.set_exception(from_play_reply(answer))
        else:
            waiting.reply.set_result(answer.reply)
            self._held.extend(answer.reply.events)  # merged with the held records
        self._release()

    def _later(self, pause: float, message: table_pb2.PlayRequest) -> None:
        async def send() -> None:
            await asyncio.sleep(pause)
            await self._send(message)

        task = asyncio.create_task(send())
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def _fail_waiting(self, error: BaseException) -> None:
        for waiting in self._waiting.values():
            if not waiting.reply.done():
                waiting.reply.set_exception(error)

    async def _run(self) -> None:
        try:
            await self._follow()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # anything unexpected ends the session with it
            self._end(exc)

    def _end(self, error: BaseException) -> None:
        self.error = error
        self._fail_waiting(error)
        self._queue.put_nowait(_ENDED)

    async def _follow(self) -> None:
        """Open the stream, resuming it after a resumable ending
        (:func:`~studclient.resume.follow`, as :class:`~studclient.watch.TableWatch` resumes
        its watch): from the last sequence handed over, every action still waiting for its
        reply sent again on it."""
        opened = 0

        def open_call(metadata: tuple[tuple[str, str], ...]) -> Any:
            nonlocal opened
            if opened:
                self.resumes += 1
            opened += 1
            self._held.clear()
            return self.client.table_stub(self.table_id).Play(
                metadata=(*metadata, *self.client.owner_metadata(self.table_id)))

        async def start(call: Any) -> None:
            async with self._write_lock:
                await call.write(table_pb2.PlayRequest(watch=table_pb2.WatchTableRequest(
                    table_id=self.table_id, after_sequence=self.last_sequence,
                    batched=True)))
                for waiting in list(self._waiting.values()):
                    if not waiting.reply.done():
                        await call.write(waiting.message)  # again, the same command id
                self._call = call

        def done(call: Any) -> None:
            self._call = None
            call.cancel()

        async def fail(error: StudError) -> None:
            self._end(error)

        await follow(self.client, self.table_id, open_call=open_call, handle=self._handle,
                     closed=lambda: self._closed, fail=fail, start=start, done=done)
