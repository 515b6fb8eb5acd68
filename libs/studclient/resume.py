"""Following a table's stream and opening it again after it ends: :func:`follow`.

Shared by :class:`~studclient.watch.TableWatch` (``WatchTable``, ``WatchMyCards``) and
:class:`~studclient.play.PlaySession` (``Play``). After a resumable ending the stream is
opened again, the caller resuming it from where it stopped (its own ``open_call`` says from
where):

- UNAUTHENTICATED ``token_expired``, with a fresh token from the client's provider, at once
  (after a pause when the fresh token's stream ended so too, with no message between);
- ``not_owner`` naming the table's owner (:meth:`Client.follow_redirect`), at the owner;
- ``not_owner`` without one (the table is changing hands between replicas), after a pause;
- an ending in :data:`RESUMABLE` (UNAVAILABLE also forgets the table's route), after a pause;
- a refusal ``wait_out`` waits out (True), after it;
- the stream ended without an error, or its call was cancelled under the follower (not by
  closing it), after a pause.

The pause doubles from 50 ms up to :data:`MAX_BACKOFF_S`, back at 50 ms once a message came
or a call ended after :data:`HEALTHY_S` open (a quiet table's watch that its token's expiry
ends); after :data:`MAX_FAILURES` endings in a row with neither in between (token expiries
and redirects counted too: a provider whose tokens the server finds expired, or replicas
that name each other, never spin), or on any other ending, the follower gives up: ``fail``
gets the :class:`~studclient.errors.StudError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import grpc

from studclient.errors import StudError, TokenExpired, from_rpc_error

if TYPE_CHECKING:
    from studclient.client import Client

RESUMABLE: Final = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED, grpc.StatusCode.CANCELLED,
    grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
})
"""Stream endings after which the stream is opened again (the rest end following it)."""
FIRST_BACKOFF_S: Final = 0.05
MAX_BACKOFF_S: Final = 2.0
MAX_FAILURES: Final = 30
"""Consecutive failed resumes (no message received in between) before following gives up."""
HEALTHY_S: Final = 10.0
"""A call open this long before it ended was a healthy one, as if a message had come (a
quiet table's watch lives until its token expires, and is not a failure)."""
_clock = time.monotonic

Metadata = tuple[tuple[str, str], ...]


async def follow(client: Client, table_id: str, *,
                 open_call: Callable[[Metadata], Any],
                 handle: Callable[[Any], None],
                 closed: Callable[[], bool],
                 fail: Callable[[StudError], Awaitable[None]],
                 start: Callable[[Any], Awaitable[None]] | None = None,
                 wait_out: Callable[[StudError], Awaitable[bool]] | None = None,
                 done: Callable[[Any], None] | None = None) -> None:
    """Follow a stream of ``table_id`` until ``closed()`` or it gives up (see the module
    docstring). ``open_call(metadata)`` opens the call (the caller's token in
    ``metadata``); ``start(call)``, when given, sends its first messages; ``handle`` gets
    each message received; ``wait_out(error)``, when given, may wait out an ending that is
    not resumable (True: open the stream again); ``done(call)`` is called once the call has
    ended, whatever ended it."""
    fresh = False
    failures = 0
    backoff = FIRST_BACKOFF_S
    while not closed():
        call = open_call(await client.metadata(fresh))
        fresh = False
        opened = _clock()
        try:
            if start is not None:
                await start(call)
            async for message in call:
                failures = 0
                backoff = FIRST_BACKOFF_S
                handle(message)
            if closed():
                return
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if closed() or (task is not None and task.cancelling()):
                raise
            # The call was cancelled under the follower (not the follower itself): the
            # stream was cut before its messages were read; open it again.
        except grpc.aio.AioRpcError as exc:
            if closed():
                return
            if _clock() - opened >= HEALTHY_S:
                failures = 0
                backoff = FIRST_BACKOFF_S
            error = from_rpc_error(exc)
            if exc.code() is grpc.StatusCode.UNAVAILABLE:
                client.forget_route(table_id)
            # Past MAX_FAILURES endings with no message, only wait_out still resumes.
            if isinstance(error, TokenExpired) and client.refreshable \
                    and failures < MAX_FAILURES:
                fresh = True
            elif failures < MAX_FAILURES and client.follow_redirect(table_id, error):
                pass  # at the owner it names (replicas naming each other count as failures)
            elif error.reason == "not_owner" and failures < MAX_FAILURES:
                pass  # the table is changing hands between replicas: resume
            elif wait_out is not None and await wait_out(error):
                failures = 0
            elif exc.code() not in RESUMABLE or failures >= MAX_FAILURES:
                await fail(error)
                return
        finally:
            if done is not None:
                done(call)
        failures += 1
        if not fresh or failures > 1:  # a fresh token at once, the first time in a row
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
