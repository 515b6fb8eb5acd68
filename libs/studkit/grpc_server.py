"""gRPC server plumbing shared by the services: a ``grpc.aio`` server with health and
reflection, the auth interceptor (token -> :class:`~studkit.auth.Principal` in a contextvar),
the one error-mapping interceptor (exception -> status code, from an :class:`ErrorTable`; it
also feeds the per-call Prometheus metrics of :mod:`studkit.metrics`) and graceful shutdown on
SIGTERM.

Handlers never call ``context.abort``: they raise, and :class:`ErrorMappingInterceptor` turns
the exception into a status code, a readable message, trailing metadata ``stud-reason`` and a
``google.rpc.ErrorInfo`` (``grpc-status-details-bin``) from the table in
:mod:`studkit.grpc_errors`. Health and reflection calls need no token, so probes work; how
each handler is wrapped is :mod:`studkit.grpc_handlers`.

Refusals the plumbing makes itself, mapped, logged and counted like a handler's: a request
body that does not decode is ``INVALID_ARGUMENT`` (``undecodable_request``, after the token
check); a server stream ends with ``UNAUTHENTICATED`` (``token_expired``) when the caller's
token expires; a store that cannot answer is ``UNAVAILABLE`` (``store_unavailable``: retry
with the same idempotency key).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Final

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from studkit.auth import Principal, TokenVerifier, Unauthorized
from studkit.grpc_errors import (
    BASE_ERRORS,
    DETAILS_KEY,
    ERROR_DOMAIN,
    INTERNAL_MESSAGE,
    REASON_KEY,
    STORE_UNAVAILABLE,
    ErrorEntry,
    ErrorTable,
    MappedError,
    Refusal,
    reason_of,
    rpc_error_info,
    rpc_error_reason,
    trailing_metadata,
)
from studkit.grpc_handlers import (
    EXPIRED_REASON,
    EXPIRY_POLL_S,
    PUBLIC_SERVICES,
    UNDECODABLE_REASON,
    Clock,
    HandlerCache,
    Scope,
    expiring,
    is_public,
    with_stream_behavior,
    wrap_handler,
)
from studkit.limits import CallerKeys, CallRateLimiter, LogSampler, RateLimited
from studkit.metrics import Metrics

__all__ = [  # the error table and the handler wrapping live apart; importable from here too
    "BASE_ERRORS", "DETAILS_KEY", "ERROR_DOMAIN", "EXPIRED_REASON", "EXPIRY_POLL_S",
    "INTERNAL_MESSAGE", "PUBLIC_SERVICES", "REASON_KEY", "SINGLE_OWNER", "STORE_UNAVAILABLE",
    "UNDECODABLE_REASON", "AuthInterceptor", "Clock", "ErrorEntry", "ErrorMappingInterceptor",
    "ErrorTable", "GrpcServer", "MappedError", "Refusal", "Scope", "ServiceRegistration",
    "create_grpc_server", "current_principal", "is_public", "log_refusal", "log_summary",
    "reason_of", "rpc_error_info", "rpc_error_reason", "run_until_signalled",
    "trailing_metadata", "wrap_handler",
]

log = structlog.get_logger("studkit.grpc")

_principal: ContextVar[Principal | None] = ContextVar("stud_principal", default=None)


def current_principal() -> Principal:
    """The caller of the RPC being handled; raises :class:`Unauthorized` outside one."""
    principal = _principal.get()
    if principal is None:
        raise Unauthorized("no authenticated caller")
    return principal


def _token_expiry() -> float | None:
    """When the current caller's token expires (None outside a call or when unknown)."""
    principal = _principal.get()
    return None if principal is None else principal.expires_at


# --- interceptors ---------------------------------------------------------------------------


def _ended_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode | None:
    """The status code a handler set itself (``set_code``/``abort``), if any."""
    try:
        code = context.code()
    except (AttributeError, NotImplementedError):
        return None
    return code if isinstance(code, grpc.StatusCode) else None


Trailers = tuple[tuple[str, str | bytes], ...]
TRAILERS_KEPT: Final = 256
"""Refusals whose trailing metadata (reason, serialized status) is kept for reuse."""

DEADLINE_SLACK_S: Final = 0.1
"""A call cut short this close to its deadline counts as DEADLINE_EXCEEDED: the client's
timer fires (and cancels) slightly before the server's copy of the deadline."""


def _time_remaining(context: grpc.aio.ServicerContext) -> float | None:
    """Seconds left before the call's deadline (None without one)."""
    try:
        remaining = context.time_remaining()
    except (AttributeError, NotImplementedError):
        return None
    return remaining if isinstance(remaining, (int, float)) else None


def _cancelled_code(context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """Why a call was cut short: its deadline (about) passed, else the client went away."""
    try:
        remaining = context.time_remaining()
    except (AttributeError, NotImplementedError):
        remaining = None
    if remaining is not None and remaining <= DEADLINE_SLACK_S:
        return grpc.StatusCode.DEADLINE_EXCEEDED
    return grpc.StatusCode.CANCELLED


def log_summary(key: tuple[str, ...], suppressed: int, window_s: float) -> None:
    """The line that sums up a window's left-out refusal lines (``rpc_rejected_summary``,
    with the code, the reason and how many were left out); a :class:`LogSampler`'s
    ``summary``."""
    code, reason = key
    line = log.warning if code == grpc.StatusCode.UNAVAILABLE.name else log.info
    line("rpc_rejected_summary", code=code, reason=reason, suppressed=suppressed,
         window_s=window_s)


def log_refusal(mapped: MappedError, error: BaseException, duration_ms: float,
                sampler: LogSampler, metrics: Metrics | None, **fields: Any) -> None:
    """The log line of a refused call (``rpc_rejected``), or of a failure (``rpc_failed``,
    with the traceback: call it where ``error`` is being handled). Refusals go through
    ``sampler``: past its first lines in a window they are counted in ``metrics`` instead
    (``fields``: more of the line, e.g. a Play stream's action as ``rpc``)."""
    if mapped.code is grpc.StatusCode.INTERNAL:
        log.exception("rpc_failed", code=mapped.code.name, duration_ms=duration_ms, **fields)
    elif not sampler.allow((mapped.code.name, mapped.reason)):
        # A flood of refusals: the first lines of each window are written, the rest
        # summed up when the window ends (every one is counted in the metrics).
        if metrics is not None:
            metrics.suppressed_log_line(mapped.code)
    elif mapped.code is grpc.StatusCode.UNAVAILABLE:
        # Not the caller's fault: the operator wants to see these, with the cause.
        log.warning(
            "rpc_rejected",
            code=mapped.code.name,
            reason=mapped.reason,
            detail=mapped.message,
            error=type(error).__name__,
            duration_ms=duration_ms,
            **fields,
        )
    else:
        log.info(
            "rpc_rejected",
            code=mapped.code.name,
            reason=mapped.reason,
            detail=mapped.message,
            duration_ms=duration_ms,
            **fields,
        )


class ErrorMappingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """The one place where exceptions become status codes; also opens the per-RPC log
    context (``rpc``), writes one canonical line per call with its outcome and, given
    ``metrics``, counts the call by status code and times it. Public calls (health,
    reflection) are neither mapped nor counted.

    Refusals are logged through ``sampler`` (default :class:`~studkit.limits.LogSampler`:
    the first 20 lines per code and reason in each 10 s, then one ``rpc_rejected_summary``
    line with the number left out): a flood of refused calls costs a counter, not a line
    each. Failures (``INTERNAL``) are always logged, and every call is always counted."""

    def __init__(
        self,
        errors: ErrorTable,
        public_services: Sequence[str] = PUBLIC_SERVICES,
        metrics: Metrics | None = None,
        sampler: LogSampler | None = None,
    ) -> None:
        self._errors = errors
        self._public = tuple(public_services)
        self._metrics = metrics
        self._sampler = sampler if sampler is not None else LogSampler(log_summary)
        self._handlers = HandlerCache(self._wrap)
        self._trailers: OrderedDict[tuple[object, ...], Trailers] = OrderedDict()

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> Any:
        if is_public(method, self._public):
            return handler
        return wrap_handler(handler, method, self._scope)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return self._handlers.get(handler, handler_call_details.method)

    def _trailing_metadata(self, mapped: MappedError) -> Trailers:
        """:func:`trailing_metadata`, remembered for the last refusals (a flood of one
        refusal serializes its status once)."""
        key = (mapped.code, mapped.reason, mapped.message, *sorted(mapped.metadata.items()))
        trailers = self._trailers.get(key)
        if trailers is None:
            trailers = self._trailers[key] = trailing_metadata(mapped)
            if len(self._trailers) > TRAILERS_KEPT:
                self._trailers.popitem(last=False)
        else:
            self._trailers.move_to_end(key)
        return trailers

    def _scope(self, method: str, context: grpc.aio.ServicerContext) -> _CallScope:
        return _CallScope(self, method, context)

    def _observe(self, method: str, code: grpc.StatusCode, started: float) -> None:
        # Before the status is sent: a client that saw it also sees it counted.
        if self._metrics is not None:
            self._metrics.observe_rpc(method, code, time.perf_counter() - started)

    async def _refuse(self, method: str, context: grpc.aio.ServicerContext, exc: Exception,
                      started: float) -> None:
        """Map ``exc`` (being handled) to its status: logged, counted, sent."""
        mapped = self._errors.map(exc)
        duration_ms = round((time.perf_counter() - started) * 1000, 2)
        log_refusal(mapped, exc, duration_ms, self._sampler, self._metrics)
        self._observe(method, mapped.code, started)
        await context.abort(
            mapped.code, mapped.message, trailing_metadata=self._trailing_metadata(mapped)
        )


class _CallScope:
    """One call inside :class:`ErrorMappingInterceptor`: its log context, then its outcome
    logged, counted and timed, an exception mapped to its status. A class, not a
    generator's context manager: one per call, and an async generator per call cost more
    than the rest of the scope (issue 35)."""

    __slots__ = ("_context", "_interceptor", "_method", "_started")

    def __init__(self, interceptor: ErrorMappingInterceptor, method: str,
                 context: grpc.aio.ServicerContext) -> None:
        self._interceptor = interceptor
        self._method = method
        self._context = context
        self._started = 0.0

    async def __aenter__(self) -> None:
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(rpc=self._method)
        self._started = time.perf_counter()

    async def __aexit__(self, _type: type[BaseException] | None, exc: BaseException | None,
                        _tb: object) -> bool:
        interceptor, method, context = self._interceptor, self._method, self._context
        if exc is None:
            code = _ended_code(context) or grpc.StatusCode.OK
            duration_ms = round((time.perf_counter() - self._started) * 1000, 2)
            log.info("rpc_handled", code=code.name, duration_ms=duration_ms)
            interceptor._observe(method, code, self._started)
        elif isinstance(exc, grpc.aio.AbortError):
            interceptor._observe(method, _ended_code(context) or grpc.StatusCode.UNKNOWN,
                                 self._started)
        elif isinstance(exc, Exception):
            await interceptor._refuse(method, context, exc, self._started)
            return True  # answered (the abort raises: this is not reached in a server)
        elif isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
            interceptor._observe(method, _cancelled_code(context), self._started)
        return False  # an exception goes on as it is


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Verifies the bearer token of every non-public call and exposes the caller through
    :func:`current_principal`; binds ``principal`` to the log context (never the token).
    Given ``rates``, budgets are kept per client, as ``callers`` names it
    (:class:`~studkit.limits.CallerKeys`: the client address a trusted proxy attests, else
    the connection). A call whose token the verifier knows good is its caller's and never
    meets its client's refused-token budget; any other call from a client past that budget
    is refused (``RESOURCE_EXHAUSTED``, ``rate_limited``) before its token is checked, and
    a refused token is counted against its client; a player's call is counted against the
    player's budget and the client's; a rate-limited call is answered after ``rates.hold``
    (half a second at least, then at most 20 a second per client by default), so a
    flooding client gets a trickle of refusals whatever it keeps in flight, and while a
    player has one held, none of their calls is served.
    A server stream ends with ``UNAUTHENTICATED`` (reason ``token_expired``) when its
    caller's token expires (``Principal.expires_at`` against ``clock``): clients resume with
    a fresh token. Must sit inside :class:`ErrorMappingInterceptor` so that a refusal is
    mapped."""

    def __init__(
        self,
        verifier: TokenVerifier,
        public_services: Sequence[str] = PUBLIC_SERVICES,
        clock: Clock = time.time,
        rates: CallRateLimiter | None = None,
        callers: CallerKeys | None = None,
    ) -> None:
        self._verifier = verifier
        self._public = tuple(public_services)
        self._clock = clock
        self._rates = rates
        self._callers = callers if callers is not None else CallerKeys()
        self._handlers = HandlerCache(self._wrap)

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> Any:
        if is_public(method, self._public):
            return handler
        handler = with_stream_behavior(
            handler, lambda behavior: expiring(behavior, self._clock, _token_expiry))
        return wrap_handler(handler, method, self._scope)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return self._handlers.get(handler, handler_call_details.method)

    def _scope(self, _method: str, context: grpc.aio.ServicerContext) -> _PrincipalScope:
        return _PrincipalScope(self._admit, context)

    async def _admit(self, context: grpc.aio.ServicerContext) -> Principal:
        """The caller of the call, admitted (token, budgets) or refused."""
        rates = self._rates
        principal: Principal | None = None
        if rates is None:
            principal = self._verifier.verify_metadata(context.invocation_metadata())
            structlog.contextvars.bind_contextvars(principal=principal.subject)
            return principal
        metadata = context.invocation_metadata()
        # The client whose budgets the call spends: the address a trusted proxy attests,
        # else the connection (issue 29, G6).
        client = self._callers.key(context.peer(), metadata)
        try:
            # A token verified before is its caller's, whatever the client's refused
            # calls: a good token is never refused for another caller's bad ones.
            principal = self._verifier.known(metadata)
            if principal is None:
                # A client past its budget is refused before its token is looked at:
                # no signature check, no decoding, for forged and garbage tokens too.
                rates.admit(client)
                try:
                    principal = self._verifier.verify_metadata(metadata)
                except Unauthorized:
                    rates.refused(client)
                    raise
            structlog.contextvars.bind_contextvars(principal=principal.subject)
            rates.check(principal, client)  # a flooding player is refused before any work
        except RateLimited:
            await rates.hold(client, _time_remaining(context), principal)
            raise
        return principal


class _PrincipalScope:
    """A call's caller in :func:`current_principal` while its handler runs. A class, not a
    generator's context manager: one per call, and an async generator per call cost more
    than the rest of the scope (issue 35)."""

    __slots__ = ("_admit", "_context", "_token")
    _token: Token[Principal | None]

    def __init__(self, admit: Callable[[grpc.aio.ServicerContext], Awaitable[Principal]],
                 context: grpc.aio.ServicerContext) -> None:
        self._admit = admit
        self._context = context

    async def __aenter__(self) -> None:
        self._token = _principal.set(await self._admit(self._context))

    async def __aexit__(self, *_exc: object) -> None:
        try:
            _principal.reset(self._token)
        except ValueError:  # a stream finalised in another context
            _principal.set(None)


# --- building and running a server ----------------------------------------------------------

ServiceRegistration = tuple[Callable[[Any, grpc.aio.Server], None], Any, str]
"""(``add_XServicer_to_server``, servicer, full service name)."""

CLIENT_PING_FLOOR_MS: Final = 20_000
"""The shortest interval between a client's keepalive pings on a quiet connection that the
servers accept. The SDK pings every 30 s (``studclient.client.CHANNEL_OPTIONS``); gRPC's
server default is 5 minutes, past which two early pings end the connection with
``GOAWAY ENHANCE_YOUR_CALM`` ("too_many_pings"), and a quiet watch was dropped and resumed."""

SINGLE_OWNER: Final = ("grpc.so_reuseport", 0)
"""Every server's listener has one owner. grpcio turns ``SO_REUSEPORT`` on by default: a
second copy of a service then binds the same port silently and the kernel splits new
connections between the two (19 to 1 measured, issue 29). With it off, the second copy fails
to bind. :func:`create_grpc_server` sets it whatever options it is given."""

DEFAULT_OPTIONS: Final = (
    SINGLE_OWNER,
    # The SDK's keepalive pings on quiet streams (a busted bot's watch) are welcome.
    ("grpc.http2.min_ping_interval_without_data_ms", CLIENT_PING_FLOOR_MS),
)


@dataclass
class GrpcServer:
    """A built ``grpc.aio`` server, its bound port, its health servicer and its metrics."""

    server: grpc.aio.Server
    port: int
    health: HealthServicer
    service_names: tuple[str, ...]
    metrics: Metrics
    log_sampler: LogSampler | None = None
    """The refusal log's sampler: what it left out is summed up when the server stops."""

    async def start(self) -> None:
        """Start serving and report SERVING for the server and each service."""
        await self.server.start()
        for name in ("", *self.service_names):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace: float | None) -> None:
        """Report NOT_SERVING, let in-flight calls finish for ``grace`` seconds, stop."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        if self.log_sampler is not None:
            self.log_sampler.flush()

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
    rates: CallRateLimiter | None = None,
    log_sampler: LogSampler | None = None,
    callers: CallerKeys | None = None,
) -> GrpcServer:
    """A server with the auth and error interceptors, health, reflection and ``services``,
    bound to ``address`` (``127.0.0.1:0`` picks a free port) as its only owner: ``options``
    never turn :data:`SINGLE_OWNER` off, so a second copy on a taken port raises
    ``RuntimeError`` (failed to bind) instead of sharing it. Calls are counted in
    ``metrics`` (a fresh registry when None; serve it with
    :func:`studkit.metrics.metrics_endpoint`); streams end when their token expires by
    ``clock``; players' call rates and each connection's refused calls are limited by
    ``rates`` (default: from the environment, ``STUD_RATE_PER_PLAYER`` /
    ``STUD_RATE_PER_CONNECTION`` / ``STUD_RATE_REFUSED_PER_CONNECTION``), each client's
    counted as ``callers`` names it (default: from the environment,
    ``STUD_TRUSTED_PROXIES``, :class:`~studkit.limits.CallerKeys`); refusals' log
    lines are sampled by ``log_sampler`` (default: see :class:`ErrorMappingInterceptor`).
    Call within a running loop;
    call :meth:`GrpcServer.start` to serve."""
    metrics = metrics if metrics is not None else Metrics()
    rates = rates if rates is not None else CallRateLimiter.from_env(os.environ)
    callers = callers if callers is not None else CallerKeys.from_env(os.environ)
    sampler = log_sampler if log_sampler is not None else LogSampler(log_summary)
    server = grpc.aio.server(
        interceptors=[
            ErrorMappingInterceptor(errors, metrics=metrics, sampler=sampler),
            AuthInterceptor(verifier, clock=clock, rates=rates, callers=callers),
        ],
        options=[*(o for o in options if o[0] != SINGLE_OWNER[0]), SINGLE_OWNER],
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
                      metrics=metrics, log_sampler=sampler)


async def run_until_signalled(
    server: GrpcServer,
    grace: float,
    signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
    before_stop: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Wait for SIGTERM/SIGINT (or the server stopping), then stop gracefully:
    ``before_stop`` first (the table service hands its tables over at once, so their clocks
    never wait for this replica's drain), then in-flight calls get ``grace`` seconds."""
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
            if before_stop is not None:
                await before_stop()
            await server.stop(grace)
        terminated.cancel()
        log.info("shutdown_finished")
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
