"""How the interceptors wrap a handler: its behaviour runs inside a scope (the auth check, the
error mapping); a request body that does not decode is refused inside those scopes, so it is
mapped, logged and counted (grpc alone answers ``UNKNOWN``, outside every interceptor); and a
server stream ends when its caller's token expires, even while it waits for news."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import grpc
from grpc_health.v1 import health_pb2

from studkit.auth import Unauthorized
from studkit.errors import BadRequest

PUBLIC_SERVICES: Final = (
    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)

Clock = Callable[[], float]
"""Epoch seconds (``time.time``); injectable so tests can expire tokens without waiting."""

Scope = Callable[[str, grpc.aio.ServicerContext], contextlib.AbstractAsyncContextManager[None]]

UNDECODABLE_REASON: Final = "undecodable_request"
EXPIRED_REASON: Final = "token_expired"
EXPIRY_POLL_S: Final = 1.0
"""How often a waiting stream reads the clock again: a clock that jumps (a test's, or a wall
clock stepped forward) ends an expired stream within this long."""


def is_public(method: str, public_services: Iterable[str] = PUBLIC_SERVICES) -> bool:
    """True for a method of a service that needs no token (health, reflection)."""
    service = method.lstrip("/").split("/", 1)[0]
    return service in set(public_services)


@dataclass(frozen=True, slots=True)
class _Undecodable:
    """A request body that did not deserialize. grpc would answer ``UNKNOWN`` for the
    deserializer's exception, outside every interceptor; this stand-in lets the refusal happen
    inside them, so that it is mapped, logged and counted."""

    error: str


class _TolerantDeserializer:
    """A request deserializer that returns :class:`_Undecodable` instead of raising."""

    def __init__(self, inner: Callable[[bytes], Any]) -> None:
        self.inner = inner

    def __call__(self, data: bytes) -> Any:
        try:
            return self.inner(data)
        except Exception as exc:  # protobuf's DecodeError, or a custom deserializer's error
            return _Undecodable(type(exc).__name__)


def _decoded(request: Any) -> Any:
    if isinstance(request, _Undecodable):
        raise BadRequest("request", f"the request body does not decode ({request.error})",
                         reason=UNDECODABLE_REASON)
    return request


async def _decoded_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        yield _decoded(request)


def _checked(request: Any, check: bool, streaming: bool) -> Any:
    if not check:
        return request
    return _decoded_stream(request) if streaming else _decoded(request)


def _wrap_response_unary(
    behavior: Any, method: str, scope: Scope, check: bool, streaming: bool
) -> Any:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with scope(method, context):
            result = behavior(_checked(request, check, streaming), context)
            if inspect.isawaitable(result):
                result = await result
            return result

    return wrapped


def _wrap_response_stream(
    behavior: Any, method: str, scope: Scope, check: bool, streaming: bool
) -> Any:
    if inspect.isasyncgenfunction(behavior):

        async def wrapped_gen(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            async with scope(method, context):
                async for item in behavior(_checked(request, check, streaming), context):
                    yield item

        return wrapped_gen

    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> None:
        # A handler that answers through ``context.write`` and returns None.
        async with scope(method, context):
            result = behavior(_checked(request, check, streaming), context)
            if inspect.isawaitable(result):
                await result

    return wrapped


def wrap_handler(handler: grpc.RpcMethodHandler, method: str, scope: Scope) -> Any:
    """``handler`` with its behaviour run inside ``scope(method, context)``.

    The first wrap of a handler (the innermost interceptor's) makes its request deserializer
    tolerant and refuses an undecodable request with :class:`~studkit.errors.BadRequest`
    (reason ``undecodable_request``) inside its own scope, hence inside every outer one: the
    token is checked first, and the refusal is mapped to ``INVALID_ARGUMENT``, logged and
    counted."""
    deserializer = handler.request_deserializer
    check = deserializer is not None and not isinstance(deserializer, _TolerantDeserializer)
    common = {
        "request_deserializer": _TolerantDeserializer(deserializer) if check else deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _wrap_response_unary(handler.unary_unary, method, scope, check, False), **common
        )
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            _wrap_response_unary(handler.stream_unary, method, scope, check, True), **common
        )
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            _wrap_response_stream(handler.unary_stream, method, scope, check, False), **common
        )
    return grpc.stream_stream_rpc_method_handler(
        _wrap_response_stream(handler.stream_stream, method, scope, check, True), **common
    )


class HandlerCache:
    """Each method's wrapped handler, made once per (method, inner handler) rather than once
    per call: ``wrap(handler, method)`` runs the first time a method is called (and again
    only if the inner handler changes). Only registered methods have a handler, so callers
    naming made-up methods cannot grow it."""

    def __init__(self, wrap: Callable[[grpc.RpcMethodHandler, str], Any]) -> None:
        self._wrap = wrap
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, Any]] = {}

    def get(self, handler: grpc.RpcMethodHandler, method: str) -> Any:
        """``handler`` of ``method``, wrapped."""
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrap(handler, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped


def with_stream_behavior(
    handler: grpc.RpcMethodHandler, transform: Callable[[Any], Any]
) -> grpc.RpcMethodHandler:
    """``handler`` with ``transform`` applied to its behaviour if it answers with a stream."""
    common = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(transform(handler.unary_stream), **common)
    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(transform(handler.stream_stream), **common)
    return handler


# --- streams end with their token -----------------------------------------------------------

_END: Final = object()


async def settle(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` until it is done and drop its outcome. Cancel more than once: on Python
    3.11, ``asyncio.wait_for`` (inside redis-py) can swallow a cancel that lands as its
    command completes."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not report it


async def _before_expiry(task: asyncio.Task[Any], expires_at: float, clock: Clock) -> Any:
    """``task``'s result, unless the clock reaches ``expires_at`` first: then ``task`` is
    cancelled and :class:`~studkit.auth.Unauthorized` (``token_expired``) raised."""
    try:
        while True:
            remaining = expires_at - clock()
            if remaining <= 0:
                raise Unauthorized("token expired: resume the stream with a fresh token",
                                   reason=EXPIRED_REASON)
            done, _ = await asyncio.wait({task}, timeout=min(remaining, EXPIRY_POLL_S))
            if done:
                return task.result()
    finally:
        if not task.done():
            await settle(task)


class _Open:
    """One open stream's expiry: the handler's task, cancelled at the expiry if it is waiting
    for the handler's next item (else the stream ends before its next item)."""

    __slots__ = ("ended", "expired", "expires_at", "task", "waiting")

    def __init__(self, expires_at: float, task: asyncio.Task[Any] | None) -> None:
        self.expires_at = expires_at
        self.task = task
        self.waiting = False
        self.expired = False
        self.ended = False

    def __lt__(self, other: _Open) -> bool:
        return self.expires_at < other.expires_at

    def expire(self) -> None:
        self.expired = True
        if self.waiting and self.task is not None:
            self.task.cancel()


class _Expiries:
    """The expiries of every open stream of a handler, on one timer: it rings at the earliest
    expiry, and at least every :data:`EXPIRY_POLL_S` while a stream is open (a clock that
    jumps), instead of a timer and a task per stream and per item."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[_Open] = []
        self._handle: asyncio.TimerHandle | None = None
        self._ended = 0

    def add(self, stream: _Open) -> None:
        heapq.heappush(self._heap, stream)
        if self._handle is None or self._heap[0] is stream:
            self._arm()

    def end(self, stream: _Open) -> None:
        """``stream`` has ended: dropped now or at the next ring (the heap is compacted when
        most of it has ended)."""
        stream.ended = True
        self._ended += 1
        if self._ended * 2 > len(self._heap):
            self._heap = [s for s in self._heap if not s.ended]
            heapq.heapify(self._heap)
            self._ended = 0

    def _arm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        if self._heap:
            delay = max(0.0, min(self._heap[0].expires_at - self._clock(), EXPIRY_POLL_S))
            self._handle = asyncio.get_running_loop().call_later(delay, self._ring)

    def _ring(self) -> None:
        self._handle = None
        now = self._clock()
        heap = self._heap
        while heap and (heap[0].ended or heap[0].expires_at <= now):
            stream = heapq.heappop(heap)
            if stream.ended:
                self._ended = max(0, self._ended - 1)
            else:
                stream.expire()
        self._arm()


def _expired() -> Unauthorized:
    return Unauthorized("token expired: resume the stream with a fresh token",
                        reason=EXPIRED_REASON)


def expiring(behavior: Any, clock: Clock, expiry: Callable[[], float | None]) -> Any:
    """A response-stream behaviour that ends with ``token_expired`` at ``expiry()`` (the
    caller's token's expiry, read as the call starts; None: never) by ``clock``, even while it
    waits for something to send. A streaming handler runs in the call's own task and context;
    the expiries of all its open streams are on one timer (:class:`_Expiries`), which cancels
    a stream's wait for its next item when its token expires. A handler answering through
    ``context.write`` runs in a task of its own, cancelled at the expiry; its context's
    bindings (log context) are bound in the call's own context too."""
    if inspect.isasyncgenfunction(behavior):
        expiries: dict[asyncio.AbstractEventLoop, _Expiries] = {}

        async def expiring_gen(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            expires_at = expiry()
            items = behavior(request, context)
            if expires_at is None:
                async for item in items:
                    yield item
                return
            loop = asyncio.get_running_loop()
            if loop not in expiries:
                expiries.clear()  # a server lives on one loop; a test may start another
                expiries[loop] = _Expiries(clock)
            timer = expiries[loop]
            stream = _Open(expires_at, asyncio.current_task())
            timer.add(stream)
            try:
                while True:
                    if stream.expired or clock() >= expires_at:
                        raise _expired()
                    stream.waiting = True
                    try:
                        item = await anext(items)
                    except StopAsyncIteration:
                        return
                    except asyncio.CancelledError:
                        if not stream.expired or stream.task is None:
                            raise
                        stream.task.uncancel()
                        raise _expired() from None
                    finally:
                        stream.waiting = False
                    yield item
            finally:
                timer.end(stream)
                await items.aclose()

        return expiring_gen

    async def expiring(request: Any, context: grpc.aio.ServicerContext) -> None:
        expires_at = expiry()
        result = behavior(request, context)
        if not inspect.isawaitable(result):
            return
        if expires_at is None:
            await result
            return
        steps = contextvars.copy_context()
        task = asyncio.get_running_loop().create_task(_awaited(result), context=steps)
        try:
            await _before_expiry(task, expires_at, clock)
        finally:
            _adopt(steps)

    return expiring


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result


def _adopt(context: contextvars.Context) -> None:
    """Set in the current context every variable ``context`` holds (what a step bound)."""
    for var, value in context.items():
        if var.get(_END) is not value:
            var.set(value)

