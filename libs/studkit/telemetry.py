"""Traces and the process-wide metrics of every service (issue 33; docs/operations.md).

Traces (OpenTelemetry), set up once per process by :func:`setup` and only when the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set: spans are
batched and exported over OTLP/gRPC; ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER`` and the other standard variables are the SDK's. Unset, nothing is
installed: :data:`ENABLED` stays False and every helper here returns at its first line (no
span, no interceptor, no ``traceparent``, no exemplar).

When on:

- grpc.aio servers and channels get OpenTelemetry's interceptors (W3C ``traceparent`` in the
  calls' metadata); streams (``WatchTable`` and every other streaming method of ``stud.v1``),
  health and reflection are left out, so a long stream never becomes one endless span (each
  action of a ``Play`` stream is a server span of its own instead: :func:`served`);
- Redis calls are spans (OpenTelemetry's Redis instrumentation);
- :meth:`studkit.store.EventStore.append` runs in a span (:func:`appending`) whose W3C
  context is stored on each envelope it appends (``EventEnvelope.traceparent``): the trace
  crosses the stream; the appends since a stream's last step are remembered, and
  :func:`linked` opens the table's (or the tournament's) next step, a new trace, with a link
  to each: the next street's deal links to the Bet and the Call of the betting round it
  follows, the settlement to the action that ended the hand;
- every log line written inside a span carries ``trace_id`` and ``span_id``
  (:func:`add_trace_context`, a structlog processor);
- latency histograms get the trace id as an exemplar (:func:`exemplar`; exemplars are in the
  OpenMetrics exposition only).

Metrics of every process (:func:`register_process`, on each server's registry): the event
loop's lag, Redis calls' latency and errors (:func:`observe_redis`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from prometheus_client import CollectorRegistry, Counter, Histogram
from structlog.typing import EventDict, WrappedLogger

ENABLED: bool = False
"""Whether this process traces (:func:`setup` found an OTLP endpoint)."""

ENDPOINT_VARIABLES: Final = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
TRACER_NAME: Final = "stud"
STREAMS_KEPT: Final = 4096
"""Streams whose appends' span contexts are remembered for :func:`linked`."""
CAUSES_KEPT: Final = 16
"""Appends remembered per stream between two of its steps (the latest ones)."""

_provider: Any = None
_tracer: trace.Tracer = trace.NoOpTracer()
_pending: OrderedDict[str, list[SpanContext]] = OrderedDict()
"""Stream -> the span contexts of its appends since its last linked step."""
_instrumentors: list[Any] = []


# --- setup -----------------------------------------------------------------------------------


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``environ`` asks for traces (an OTLP endpoint, the SDK not disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def streaming_methods() -> frozenset[str]:
    """The full path of every streaming method of ``stud.v1`` (``/stud.v1.X/Method``)."""
    from stud.v1 import dealer_pb2, table_pb2, tournament_pb2, wallet_pb2

    paths = set()
    for module in (dealer_pb2, table_pb2, tournament_pb2, wallet_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                if method.server_streaming or method.client_streaming:
                    paths.add(f"/{service.full_name}/{method.name}")
    return frozenset(paths)


UNTRACED_PREFIXES: Final = ("/grpc.health.", "/grpc.reflection.")


def traced_filter() -> Callable[[Any], bool]:
    """OpenTelemetry's gRPC ``filter_``: True for a call to trace (unary calls of our
    services; never a stream, health or reflection)."""
    streams = streaming_methods()

    def traced(details: Any) -> bool:
        method = getattr(details, "method", "")
        if isinstance(method, bytes):
            method = method.decode()
        return method not in streams and not method.startswith(UNTRACED_PREFIXES)

    return traced


def sampler(environ: Mapping[str, str] = os.environ) -> Any:
    """The sampler: the operator's own when ``OTEL_TRACES_SAMPLER`` names one (None: the SDK
    reads it), else every trace except one that would start at a client span. A Redis or
    gRPC call made outside any span (a background loop's read, a poll) would be a trace of
    one span each: most of a room's spans, and none of them says why the call was made.
    Calls inside a span (a served call, a driver's step) are traced as their parent is.

    >>> from opentelemetry.trace import SpanKind
    >>> s = sampler({})
    >>> s.should_sample(None, 1, "EVALSHA", SpanKind.CLIENT).decision.is_sampled()
    False
    >>> s.should_sample(None, 1, "/stud.v1.TableService/Act", SpanKind.SERVER
    ...                 ).decision.is_sampled()
    True
    >>> sampler({"OTEL_TRACES_SAMPLER": "always_on"}) is None
    True
    """
    if environ.get("OTEL_TRACES_SAMPLER"):
        return None
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_ON,
        Decision,
        ParentBased,
        Sampler,
        SamplingResult,
    )
    from opentelemetry.trace import SpanKind

    class NoLoneClientCalls(Sampler):
        def should_sample(self, parent_context: Any, trace_id: int, name: str,
                          kind: Any = None, attributes: Any = None, links: Any = None,
                          trace_state: Any = None) -> Any:
            if kind == SpanKind.CLIENT:
                return SamplingResult(Decision.DROP)
            return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind,
                                           attributes, links, trace_state)

        def get_description(self) -> str:
            return "NoLoneClientCalls"

    return ParentBased(root=NoLoneClientCalls())


def setup(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install tracing for this process when ``environ`` asks for it (see the module's doc);
    True when on. Call once, before the servers and channels are created."""
    global ENABLED, _provider, _tracer
    if ENABLED:
        return True
    if not wanted(environ):
        return False
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.grpc import (
        GrpcAioInstrumentorClient,
        GrpcAioInstrumentorServer,
    )
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": service}
    provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler(environ))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    traced = traced_filter()
    server = GrpcAioInstrumentorServer(filter_=traced)  # type: ignore[no-untyped-call]
    client = GrpcAioInstrumentorClient(filter_=traced)  # type: ignore[no-untyped-call]
    _instrumentors[:] = [server, client, RedisInstrumentor()]
    for instrumentor in _instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    _provider = provider
    _tracer = provider.get_tracer(TRACER_NAME)
    ENABLED = True
    return True


def shutdown() -> None:
    """Export what is buffered and stop tracing (at the process's end)."""
    global ENABLED, _provider, _tracer
    if _provider is None:
        return
    for instrumentor in _instrumentors:
        with contextlib.suppress(Exception):
            instrumentor.uninstrument()
    _instrumentors.clear()
    _provider.shutdown()
    _provider, _tracer, ENABLED = None, trace.NoOpTracer(), False


# --- spans -----------------------------------------------------------------------------------


def traceparent() -> str:
    """The W3C ``traceparent`` of the current span ("" when tracing is off or outside one)."""
    if not ENABLED:
        return ""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return ""
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parse_traceparent(value: str) -> SpanContext | None:
    """The span context a ``traceparent`` names (None when it is not a valid one).

    >>> ctx = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    >>> f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", ctx.trace_flags.sampled
    ('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', True)
    >>> parse_traceparent("") is None, parse_traceparent("00-zz-yy-01") is None
    (True, True)
    """
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    ctx = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return ctx if ctx.is_valid else None


@contextlib.contextmanager
def appending(stream_id: str, events: int, expected_version: int) -> Iterator[str]:
    """The span of one append to ``stream_id``; yields the ``traceparent`` to store on its
    envelopes ("" when tracing is off), and remembers the span (when it appended something)
    for the stream's next :func:`linked` step."""
    if not ENABLED:
        yield ""
        return
    with _tracer.start_as_current_span(
            "EventStore.append", kind=SpanKind.INTERNAL,
            attributes={"stud.stream": stream_id, "stud.events": events,
                        "stud.expected_version": expected_version}) as span:
        yield traceparent()
    if events:
        causes = _pending.setdefault(stream_id, [])
        causes.append(span.get_span_context())
        del causes[:-CAUSES_KEPT]
        _pending.move_to_end(stream_id)
        if len(_pending) > STREAMS_KEPT:
            _pending.popitem(last=False)


def pending_appends(stream_id: str) -> tuple[SpanContext, ...]:
    """The span contexts of this process's traced appends to ``stream_id`` since its last
    :func:`linked` step, oldest first."""
    return tuple(_pending.get(stream_id, ()))


@contextlib.contextmanager
def served(method: str) -> Iterator[trace.Span | None]:
    """The server span of one call no interceptor traces (an action of a Play stream,
    ``/stud.v1.TableService/Play/Bet``: its stream is never one span), a trace of its own as
    a unary call's is; yields the span (None when tracing is off) for its status code."""
    if not ENABLED:
        yield None
        return
    service, _, name = method.lstrip("/").partition("/")
    with _tracer.start_as_current_span(
            method, context=otel_context.Context(), kind=SpanKind.SERVER,
            attributes={"rpc.system": "grpc", "rpc.service": service,
                        "rpc.method": name}) as span:
        yield span


@contextlib.contextmanager
def linked(stream_id: str, name: str, **attributes: str | int) -> Iterator[None]:
    """A step the table (or the tournament) takes on its own for ``stream_id``: a new trace
    whose root span ``name`` links to each append to the stream since its last step (the
    events it acts on; they are then forgotten). Nothing when tracing is off."""
    if not ENABLED:
        yield
        return
    causes = _pending.pop(stream_id, ())
    with _tracer.start_as_current_span(
            name, context=otel_context.Context(), kind=SpanKind.INTERNAL,
            links=[Link(cause, {"stud.link": "caused_by"}) for cause in causes],
            attributes={"stud.stream": stream_id, **attributes}):
        yield


def exemplar() -> dict[str, str] | None:
    """The exemplar of an observation made now: the current trace's id (None when off)."""
    if not ENABLED:
        return None
    ctx = trace.get_current_span().get_span_context()
    return {"trace_id": f"{ctx.trace_id:032x}"} if ctx.is_valid else None


def add_trace_context(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: ``trace_id`` and ``span_id`` of the current span, if any."""
    if ENABLED:
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            event_dict["trace_id"] = f"{ctx.trace_id:032x}"
            event_dict["span_id"] = f"{ctx.span_id:016x}"
    return event_dict


# --- metrics of every process ----------------------------------------------------------------

LOOP_LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                           5.0, float("inf"))
LOOP_TICK_S: Final = 0.25
REDIS_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                        0.25, 0.5, 1.0, 2.5, float("inf"))
REDIS_COMMANDS: Final = frozenset({
    "ACL", "CLIENT", "DEL", "EVAL", "EVALSHA", "EVALSHA_RO", "EXEC", "EXISTS", "EXPIRE",
    "FCALL", "GET",
    "HDEL", "HGET", "HGETALL", "HINCRBY", "HMGET", "HSET", "HSETNX", "INCR", "INCRBY", "INFO",
    "KEYS", "MGET", "MULTI", "PEXPIRE", "PING", "PTTL", "PUBLISH", "SADD", "SCAN", "SCARD",
    "SCRIPT", "SET", "SISMEMBER", "SMEMBERS", "SREM", "SSCAN", "TTL", "TYPE", "WATCH", "XADD",
    "XLEN", "XRANGE", "XREAD", "XREVRANGE", "XTRIM", "ZADD", "ZCARD", "ZRANGE",
    "ZRANGEBYSCORE", "ZREM", "ZREMRANGEBYSCORE", "ZSCORE", "PIPELINE",
})
"""The values of ``command``: the commands the project sends; any other is ``OTHER``."""
REDIS_ERRORS: Final = ("connection", "timeout", "response", "other")

LOOP_LAG = Histogram(
    "stud_event_loop_lag_seconds", "How late the asyncio loop ran a timer due every "
    f"{LOOP_TICK_S} s (the process's saturation).", buckets=LOOP_LAG_BUCKETS, registry=None)
REDIS_SECONDS = Histogram(
    "stud_redis_call_seconds", "One Redis call's round trip, by command (a pipeline: "
    "PIPELINE).", ("command",), buckets=REDIS_BUCKETS, registry=None)
REDIS_FAILURES = Counter(
    "stud_redis_errors", "Redis calls that failed, by command and kind of error "
    "(connection, timeout, response, other).", ("command", "error"), registry=None)
PROCESS_COLLECTORS: Final = (LOOP_LAG, REDIS_SECONDS, REDIS_FAILURES)

_redis_children: dict[str, Any] = {}


def register_process(registry: CollectorRegistry) -> None:
    """Put the process-wide families on ``registry`` (a server's own)."""
    for collector in PROCESS_COLLECTORS:
        with contextlib.suppress(ValueError):  # already there
            registry.register(collector)


def redis_command(args: tuple[Any, ...]) -> str:
    """The ``command`` label of a call (its name upper-cased, from the closed set).

    >>> redis_command(("evalsha", "ab", 1)), redis_command((b"XRANGE",)), redis_command(())
    ('EVALSHA', 'XRANGE', 'OTHER')
    >>> redis_command(("FLUSHALL",))
    'OTHER'
    """
    if not args:
        return "OTHER"
    name = args[0]
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    name = str(name).split(" ", 1)[0].upper()
    return name if name in REDIS_COMMANDS else "OTHER"


def redis_error_kind(exc: BaseException) -> str:
    import redis.exceptions as rexc

    if isinstance(exc, rexc.TimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, rexc.ConnectionError | ConnectionError):
        return "connection"
    if isinstance(exc, rexc.ResponseError):
        return "response"
    return "other"


def observe_redis(command: str, seconds: float, error: BaseException | None = None) -> None:
    """Count one Redis call (``command`` from :func:`redis_command`)."""
    child = _redis_children.get(command)
    if child is None:
        child = _redis_children[command] = REDIS_SECONDS.labels(command=command)
    child.observe(seconds)
    if error is not None and not isinstance(error, asyncio.CancelledError):
        REDIS_FAILURES.labels(command=command, error=redis_error_kind(error)).inc()


async def watch_loop_lag(tick_s: float = LOOP_TICK_S) -> None:
    """Measure the running loop's lag for ever (a background task of each service)."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + tick_s
        await asyncio.sleep(tick_s)
        LOOP_LAG.observe(max(0.0, loop.time() - due))


def now() -> float:
    return time.perf_counter()
