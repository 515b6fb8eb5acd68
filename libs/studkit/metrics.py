"""Prometheus metrics of a service process, in one place.

- :class:`Metrics` holds one :class:`~prometheus_client.CollectorRegistry` per server instance
  (several servers in one test process never collide) with the gRPC families
  ``stud_grpc_requests_total{service,method,code}``,
  ``stud_grpc_request_seconds{service,method}`` and
  ``stud_grpc_refusal_log_lines_suppressed_total{code}`` (refusals whose log line the
  sampler left out), and the process-wide families of :mod:`studkit.telemetry` (the event
  loop's lag, Redis calls). A traced call's latency carries its trace id as an exemplar.
  Services add their domain counters to the same registry with :meth:`Metrics.counter`.
- The gRPC families are fed by ``studkit.grpc_server.ErrorMappingInterceptor``, the one place
  that knows the status code each call ends with (see :meth:`Metrics.observe_rpc`).
- :func:`metrics_endpoint` serves the registry over HTTP (``/metrics``) on ``METRICS_PORT``
  (0 disables it) at ``METRICS_ADDR``: all interfaces by default, for Prometheus in a cluster;
  ``make run`` binds loopback, as it does gRPC.

Label values form a closed set, for cardinality and for secrecy: ``service`` and ``method``
come from the path of a *registered* handler (a call to an unknown method is not counted, so a
client cannot invent a label value), ``code`` is a status code name, and a domain counter
declares every value each label may take (:class:`ClosedCounter` refuses any other). Never a
card, a token, a player id or a table id.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import threading
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from studkit.telemetry import exemplar, register_process

if TYPE_CHECKING:
    import grpc

REQUESTS: Final = "stud_grpc_requests"
"""Exposed as ``stud_grpc_requests_total`` (the client library adds ``_total``)."""
REQUEST_SECONDS: Final = "stud_grpc_request_seconds"
SUPPRESSED_LINES: Final = "stud_grpc_refusal_log_lines_suppressed"
"""Exposed with ``_total``: refusals' log lines left out by the sampler."""
RPC_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf")
)
"""Seconds; calls are Redis round trips (ms). A server stream's duration is its lifetime."""
DEFAULT_METRICS_ADDR: Final = "0.0.0.0"
"""All interfaces: in Kubernetes, Prometheus scrapes the pod's address."""


def split_method(method: str) -> tuple[str, str]:
    """``/stud.v1.WalletService/Deposit`` -> ``("stud.v1.WalletService", "Deposit")``."""
    service, _, name = method.lstrip("/").partition("/")
    return service, name


class ClosedCounter:
    """A labelled counter whose label values are declared up front: every combination is
    exported from the start (at 0, so ``rate()`` sees the first increment) and any other
    value raises :class:`ValueError` instead of growing the series set."""

    def __init__(self, counter: Counter, values: Mapping[str, Sequence[str]]) -> None:
        self._counter = counter
        self._allowed = {label: frozenset(vals) for label, vals in values.items()}
        names = list(values)
        if names:
            for combo in itertools.product(*(values[n] for n in names)):
                counter.labels(**dict(zip(names, combo, strict=True)))

    def inc(self, amount: float = 1, /, **labels: str) -> None:
        """Add ``amount`` to the series named by ``labels`` (all declared values)."""
        if set(labels) != set(self._allowed):
            raise ValueError(f"labels must be {sorted(self._allowed)}, got {sorted(labels)}")
        for label, value in labels.items():
            if value not in self._allowed[label]:
                raise ValueError(f"{label}={value!r} is not a declared value")
        child = self._counter.labels(**labels) if labels else self._counter
        child.inc(amount)


class Metrics:
    """The metric families of one server instance, in their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._requests = Counter(
            REQUESTS, "gRPC calls handled, by status code.",
            ("service", "method", "code"), registry=self.registry,
        )
        self._seconds = Histogram(
            REQUEST_SECONDS, "Time to handle a gRPC call (a stream: its lifetime).",
            ("service", "method"), buckets=RPC_BUCKETS, registry=self.registry,
        )
        self._children: dict[tuple[str, grpc.StatusCode], tuple[Counter, Histogram]] = {}
        """The series of each (method, code) seen: methods are registered ones only."""
        self._suppressed_by_code: dict[grpc.StatusCode, Counter] = {}
        self._suppressed = Counter(
            SUPPRESSED_LINES, "Log lines of refused calls left out by sampling (each call is "
            "still counted in stud_grpc_requests_total), by status code.",
            ("code",), registry=self.registry,
        )
        register_process(self.registry)  # the loop's lag, Redis calls (studkit.telemetry)

    def suppressed_log_line(self, code: grpc.StatusCode) -> None:
        """Count one refusal's log line that sampling left out."""
        child = self._suppressed_by_code.get(code)
        if child is None:
            child = self._suppressed_by_code[code] = self._suppressed.labels(code=code.name)
        child.inc()

    def observe_rpc(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """Count one finished call of the registered ``method`` (its full path)."""
        children = self._children.get((method, code))
        if children is None:  # once per (method, code): a label lookup costs microseconds
            service, name = split_method(method)
            children = (self._requests.labels(service=service, method=name, code=code.name),
                        self._seconds.labels(service=service, method=name))
            self._children[(method, code)] = children
        children[0].inc()
        children[1].observe(seconds, exemplar())  # the trace id, when the call is traced

    def counter(
        self, name: str, documentation: str, values: Mapping[str, Sequence[str]] | None = None
    ) -> ClosedCounter:
        """A domain counter on this registry; ``values`` declares each label's values."""
        values = dict(values or {})
        counter = Counter(name, documentation, tuple(values), registry=self.registry)
        return ClosedCounter(counter, values)

    def sample(self, name: str, **labels: str) -> float:
        """The current value of one sample (0 when absent); for tests and tools."""
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """A running ``/metrics`` HTTP endpoint."""

    port: int
    server: WSGIServer
    thread: threading.Thread

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@contextlib.contextmanager
def metrics_endpoint(
    registry: CollectorRegistry, port: int, addr: str = DEFAULT_METRICS_ADDR
) -> Iterator[MetricsEndpoint | None]:
    """Serve ``registry`` at ``http://addr:port/metrics`` (a daemon thread) until the block
    exits; yields None and serves nothing when ``port`` is 0."""
    if port == 0:
        yield None
        return
    server, thread = start_http_server(port, addr=addr, registry=registry)
    endpoint = MetricsEndpoint(port=int(server.server_port), server=server, thread=thread)
    try:
        yield endpoint
    finally:
        endpoint.close()


def port_number(raw: str, name: str = "METRICS_PORT") -> int:
    """A port read from the environment (``0..65535``; for ``METRICS_PORT`` 0 disables), for
    the services' ``Settings.from_env``."""
    try:
        port = int(raw.strip())
    except ValueError:
        raise ValueError(f"{name} must be a port number, not {raw!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{name} must be 0..65535, not {port}")
    return port


def host_address(raw: str, name: str = "METRICS_ADDR") -> str:
    """An IP address to bind, read from the environment (``0.0.0.0``, ``127.0.0.1``, ``::1``),
    for the services' ``Settings.from_env``.

    >>> host_address(" 127.0.0.1 ")
    '127.0.0.1'
    >>> host_address("localhost")
    Traceback (most recent call last):
    ...
    ValueError: METRICS_ADDR must be an IP address, not 'localhost'
    """
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        raise ValueError(f"{name} must be an IP address, not {raw!r}") from None


def scrape(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> list[Sample]:
    """Every sample ``http://host:port/metrics`` serves, parsed (blocking; for tests and
    tools)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as reply:
        text = reply.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]
