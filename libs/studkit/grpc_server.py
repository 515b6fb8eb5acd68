"""gRPC server plumbing shared by the services: a ``grpc.aio`` server with health and
reflection, the auth interceptor (token -> :class:`~studkit.auth.Principal` in a contextvar),
the one error-mapping interceptor (exception -> status code, from an :class:`ErrorTable`; it
also feeds the per-call Prometheus metrics of :mod:`studkit.metrics`) and graceful shutdown on
SIGTERM.

Handlers never call ``context.abort``: they raise, and :class:`ErrorMappingInterceptor` turns
the exception into a status code, a readable message, trailing metadata ``stud-reason`` and a
``google.rpc.ErrorInfo`` (``grpc-status-details-bin``). Health and reflection calls need no
token, so probes work.

Refusals the plumbing makes itself, mapped, logged and counted like a handler's: a request
body that does not decode is ``INVALID_ARGUMENT`` (``undecodable_request``, after the token
check); a server stream ends with ``UNAUTHENTICATED`` (``token_expired``) when the caller's
token expires; a store that cannot answer is ``UNAVAILABLE`` (``store_unavailable``: retry
with the same idempotency key).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import re
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final, TypeAlias

import grpc
import structlog
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from rules.errors import RuleViolation
from studkit.auth import Forbidden, Principal, TokenVerifier, Unauthorized
from studkit.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    FailedPrecondition,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from studkit.metrics import Metrics
from studkit.store import STORE_UNAVAILABLE_ERRORS

REASON_KEY: Final = "stud-reason"
DETAILS_KEY: Final = "grpc-status-details-bin"
ERROR_DOMAIN: Final = "stud-hilo"
INTERNAL_MESSAGE: Final = "internal error"
PUBLIC_SERVICES: Final = (
    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
)

log = structlog.get_logger("studkit.grpc")

Clock = Callable[[], float]
"""Epoch seconds (``time.time``); injectable so tests can expire tokens without waiting."""

_principal: ContextVar[Principal | None] = ContextVar("stud_principal", default=None)


def current_principal() -> Principal:
    """The caller of the RPC being handled; raises :class:`Unauthorized` outside one."""
    principal = _principal.get()
    if principal is None:
        raise Unauthorized("no authenticated caller")
    return principal


# --- the error table ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MappedError:
    """What the client receives for an exception."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def reason_of(exc: BaseException) -> str:
    """The machine-readable reason of an exception: its ``reason`` attribute (an enum's
    value, or a string), else the snake_case class name."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, Enum):
        return str(reason.value)
    if isinstance(reason, str) and reason:
        return reason
    return _snake(type(exc).__name__)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A status code with a fixed reason and message, for exceptions that are not ours (a
    driver's): their class name is no stable reason and their text may name hosts."""

    code: grpc.StatusCode
    reason: str
    message: str


ErrorEntry: TypeAlias = grpc.StatusCode | Refusal
"""What an :class:`ErrorTable` maps an exception class to."""


class ErrorTable:
    """Exception class -> status code (or :class:`Refusal`). The most specific class in an
    exception's MRO wins; anything unlisted is ``INTERNAL``. Services extend
    :data:`BASE_ERRORS` in their ``errors.py``."""

    def __init__(self, codes: Mapping[type[BaseException], ErrorEntry]) -> None:
        self._codes: dict[type[BaseException], ErrorEntry] = dict(codes)

    def extend(self, codes: Mapping[type[BaseException], ErrorEntry]) -> ErrorTable:
        """A new table with ``codes`` added (or overriding)."""
        return ErrorTable({**self._codes, **codes})

    def _entry(self, exc: BaseException) -> ErrorEntry | None:
        for cls in type(exc).__mro__:
            if cls in self._codes:
                return self._codes[cls]
        return None

    def code_for(self, exc: BaseException) -> grpc.StatusCode | None:
        """The status code of ``exc``, or None when unmapped."""
        entry = self._entry(exc)
        return entry.code if isinstance(entry, Refusal) else entry

    def map(self, exc: BaseException) -> MappedError:
        """How ``exc`` is reported to the client."""
        entry = self._entry(exc)
        if entry is None:
            return MappedError(grpc.StatusCode.INTERNAL, "internal", INTERNAL_MESSAGE)
        if isinstance(entry, Refusal):
            return MappedError(entry.code, entry.reason, entry.message)
        code = entry
        field_name = getattr(exc, "field", None)
        metadata = {"field": field_name} if isinstance(field_name, str) and field_name else {}
        return MappedError(code, reason_of(exc), str(exc) or reason_of(exc), metadata)


STORE_UNAVAILABLE: Final = Refusal(
    grpc.StatusCode.UNAVAILABLE,
    "store_unavailable",
    "the store is unavailable; retry with the same idempotency key",
)
"""Redis down, unreachable, timing out, loading or out of connections. A write may or may
not have been applied; its retry with the same key is answered as a replay if it was."""

BASE_ERRORS: Final = ErrorTable(
    {
        BadRequest: grpc.StatusCode.INVALID_ARGUMENT,
        RuleViolation: grpc.StatusCode.FAILED_PRECONDITION,
        FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
        Unauthorized: grpc.StatusCode.UNAUTHENTICATED,
        Forbidden: grpc.StatusCode.PERMISSION_DENIED,
        NotFound: grpc.StatusCode.NOT_FOUND,
        AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
        Conflict: grpc.StatusCode.ABORTED,
        ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
        Unavailable: grpc.StatusCode.UNAVAILABLE,
        **{error: STORE_UNAVAILABLE for error in STORE_UNAVAILABLE_ERRORS},
    }
)
"""The shared part of every service's table; a service adds its own in ``errors.py``."""


def trailing_metadata(error: MappedError) -> tuple[tuple[str, str | bytes], ...]:
    """``stud-reason`` plus a serialized ``google.rpc.Status`` with an ``ErrorInfo``."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=dict(error.metadata)
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(
        code=error.code.value[0], message=error.message, details=[detail]
    )
    return ((REASON_KEY, error.reason), (DETAILS_KEY, status.SerializeToString()))


def rpc_error_reason(error: grpc.aio.AioRpcError | grpc.RpcError) -> str | None:
    """Client side: the ``stud-reason`` of a failed call, or None."""
    metadata = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in metadata or ():
        if key == REASON_KEY:
            return value if isinstance(value, str) else bytes(value).decode()
    return None


def rpc_error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """Client side: the ``google.rpc.ErrorInfo`` of a failed call, or None."""
    for key, value in error.trailing_metadata() or ():
        if key == DETAILS_KEY:
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None

# --- interceptors ---------------------------------------------------------------------------

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


def _with_stream_behavior(
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


def _token_expiry() -> float | None:
    principal = _principal.get()
    return None if principal is None else principal.expires_at


async def _settle(task: asyncio.Task[Any]) -> None:
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
            await _settle(task)


def _expiring(behavior: Any, clock: Clock) -> Any:
    """A response-stream behaviour that ends with ``token_expired`` when the caller's token
    expires, even while it waits for something to send. Each step of the handler runs in a
    task of its own, cancelled at the expiry; all steps share one context, so what the handler
    binds (log context) stays bound from one step to the next."""
    if inspect.isasyncgenfunction(behavior):

        async def expiring_gen(
            request: Any, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            expires_at = _token_expiry()
            items = behavior(request, context)
            if expires_at is None:
                async for item in items:
                    yield item
                return
            steps = contextvars.copy_context()

            async def step() -> Any:
                try:
                    return await anext(items)
                except StopAsyncIteration:
                    return _END

            try:
                while True:
                    task = asyncio.get_running_loop().create_task(step(), context=steps)
                    item = await _before_expiry(task, expires_at, clock)
                    if item is _END:
                        return
                    yield item
            finally:
                await items.aclose()

        return expiring_gen

    async def expiring(request: Any, context: grpc.aio.ServicerContext) -> None:
        expires_at = _token_expiry()
        result = behavior(request, context)
        if not inspect.isawaitable(result):
            return
        if expires_at is None:
            await result
            return
        await _before_expiry(asyncio.ensure_future(result), expires_at, clock)

    return expiring


def _ended_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode | None:
    """The status code a handler set itself (``set_code``/``abort``), if any."""
    try:
        code = context.code()
    except (AttributeError, NotImplementedError):
        return None
    return code if isinstance(code, grpc.StatusCode) else None


DEADLINE_SLACK_S: Final = 0.1
"""A call cut short this close to its deadline counts as DEADLINE_EXCEEDED: the client's
timer fires (and cancels) slightly before the server's copy of the deadline."""


def _cancelled_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """Why a call was cut short: its deadline (about) passed, else the client went away."""
    try:
        remaining = context.time_remaining()
    except (AttributeError, NotImplementedError):
        remaining = None
    if remaining is not None and remaining <= DEADLINE_SLACK_S:
        return grpc.StatusCode.DEADLINE_EXCEEDED
    return grpc.StatusCode.CANCELLED


class ErrorMappingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """The one place where exceptions become status codes; also opens the per-RPC log
    context (``rpc``), writes one canonical line per call with its outcome and, given
    ``metrics``, counts the call by status code and times it. Public calls (health,
    reflection) are neither mapped nor counted."""

    def __init__(
        self,
        errors: ErrorTable,
        public_services: Sequence[str] = PUBLIC_SERVICES,
        metrics: Metrics | None = None,
    ) -> None:
        self._errors = errors
        self._public = tuple(public_services)
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or is_public(method, self._public):
            return handler
        return wrap_handler(handler, method, self._scope)

    @contextlib.asynccontextmanager
    async def _scope(self, method: str, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(rpc=method)
        started = time.perf_counter()

        def observe(code: grpc.StatusCode) -> None:
            # Before the status is sent: a client that saw it also sees it counted.
            if self._metrics is not None:
                self._metrics.observe_rpc(method, code, time.perf_counter() - started)

        try:
            yield
        except grpc.aio.AbortError:
            observe(_ended_code(context) or grpc.StatusCode.UNKNOWN)
            raise
        except Exception as exc:
            mapped = self._errors.map(exc)
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            if mapped.code is grpc.StatusCode.INTERNAL:
                log.exception("rpc_failed", code=mapped.code.name, duration_ms=duration_ms)
            elif mapped.code is grpc.StatusCode.UNAVAILABLE:
                # Not the caller's fault: the operator wants to see these, with the cause.
                log.warning(
                    "rpc_rejected",
                    code=mapped.code.name,
                    reason=mapped.reason,
                    detail=mapped.message,
                    error=type(exc).__name__,
                    duration_ms=duration_ms,
                )
            else:
                log.info(
                    "rpc_rejected",
                    code=mapped.code.name,
                    reason=mapped.reason,
                    detail=mapped.message,
                    duration_ms=duration_ms,
                )
            observe(mapped.code)
            await context.abort(
                mapped.code, mapped.message, trailing_metadata=trailing_metadata(mapped)
            )
        except (asyncio.CancelledError, GeneratorExit):
            observe(_cancelled_code(context))
            raise
        else:
            code = _ended_code(context) or grpc.StatusCode.OK
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            log.info("rpc_handled", code=code.name, duration_ms=duration_ms)
            observe(code)


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Verifies the bearer token of every non-public call and exposes the caller through
    :func:`current_principal`; binds ``principal`` to the log context (never the token).
    A server stream ends with ``UNAUTHENTICATED`` (reason ``token_expired``) when its
    caller's token expires (``Principal.expires_at`` against ``clock``): clients resume with
    a fresh token. Must sit inside :class:`ErrorMappingInterceptor` so that a refusal is
    mapped."""

    def __init__(
        self,
        verifier: TokenVerifier,
        public_services: Sequence[str] = PUBLIC_SERVICES,
        clock: Clock = time.time,
    ) -> None:
        self._verifier = verifier
        self._public = tuple(public_services)
        self._clock = clock

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or is_public(method, self._public):
            return handler
        metadata = handler_call_details.invocation_metadata

        @contextlib.asynccontextmanager
        async def scope(_method: str, _context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            principal = self._verifier.verify_metadata(metadata)
            structlog.contextvars.bind_contextvars(principal=principal.subject)
            token = _principal.set(principal)
            try:
                yield
            finally:
                try:
                    _principal.reset(token)
                except ValueError:  # a stream finalised in another context
                    _principal.set(None)

        handler = _with_stream_behavior(handler, lambda b: _expiring(b, self._clock))
        return wrap_handler(handler, method, scope)


# --- building and running a server ----------------------------------------------------------

ServiceRegistration = tuple[Callable[[Any, grpc.aio.Server], None], Any, str]
"""(``add_XServicer_to_server``, servicer, full service name)."""

DEFAULT_OPTIONS: Final = (
    # Two processes must never share a port silently (tests bind a free port).
    ("grpc.so_reuseport", 0),
)


@dataclass
class GrpcServer:
    """A built ``grpc.aio`` server, its bound port, its health servicer and its metrics."""

    server: grpc.aio.Server
    port: int
    health: HealthServicer
    service_names: tuple[str, ...]
    metrics: Metrics

    async def start(self) -> None:
        """Start serving and report SERVING for the server and each service."""
        await self.server.start()
        for name in ("", *self.service_names):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace: float | None) -> None:
        """Report NOT_SERVING, let in-flight calls finish for ``grace`` seconds, stop."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)

    async def wait_for_termination(self) -> None:
        """Return when the server has stopped."""
        await self.server.wait_for_termination()


def create_grpc_server(
    address: str,
    services: Sequence[ServiceRegistration],
    *,
    verifier: TokenVerifier,
    errors: ErrorTable = BASE_ERRORS,
    options: Sequence[tuple[str, Any]] = DEFAULT_OPTIONS,
    metrics: Metrics | None = None,
    clock: Clock = time.time,
) -> GrpcServer:
    """A server with the auth and error interceptors, health, reflection and ``services``,
    bound to ``address`` (``127.0.0.1:0`` picks a free port). Calls are counted in
    ``metrics`` (a fresh registry when None; serve it with
    :func:`studkit.metrics.metrics_endpoint`); streams end when their token expires by
    ``clock``. Call within a running loop; call :meth:`GrpcServer.start` to serve."""
    metrics = metrics if metrics is not None else Metrics()
    server = grpc.aio.server(
        interceptors=[
            ErrorMappingInterceptor(errors, metrics=metrics),
            AuthInterceptor(verifier, clock=clock),
        ],
        options=list(options),
    )
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    names = []
    for add, servicer, name in services:
        add(servicer, server)
        names.append(name)
    reflection.enable_server_reflection(
        (*names, PUBLIC_SERVICES[0], reflection.SERVICE_NAME), server
    )
    port = server.add_insecure_port(address)
    if port == 0:
        raise RuntimeError(f"could not bind {address}")
    return GrpcServer(server=server, port=port, health=health, service_names=tuple(names),
                      metrics=metrics)


async def run_until_signalled(
    server: GrpcServer,
    grace: float,
    signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> None:
    """Wait for SIGTERM/SIGINT (or the server stopping), then stop gracefully."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed = []
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
        installed.append(sig)
    try:
        terminated = asyncio.create_task(server.wait_for_termination())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({terminated, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not terminated.done():
            log.info("shutdown_started", grace_s=grace)
            await server.stop(grace)
        terminated.cancel()
        log.info("shutdown_finished")
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
