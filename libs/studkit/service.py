"""The life of one service process, the same for every service: settings from the environment,
logging, dependencies, the gRPC server and ``/metrics``, until SIGTERM, then a graceful stop."""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import structlog

from studkit import telemetry
from studkit.auth import KeySet
from studkit.grpc_server import GrpcServer, run_until_signalled
from studkit.log import configure_logging
from studkit.metrics import Metrics, metrics_endpoint


def redact_url(url: str) -> str:
    """``url`` without its password, for logs.

    >>> redact_url("redis://wallet:s3cret@redis:6379/0")
    'redis://wallet:***@redis:6379/0'
    >>> redact_url("redis://127.0.0.1:6379/0")
    'redis://127.0.0.1:6379/0'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True)
class GcSettings:
    """How a service process sets Python's cyclic garbage collector (measured in
    docs/benchmarks.md, "The room's tail"): ``threshold`` is ``gc.set_threshold``'s (None:
    Python's own, 700/10/10), set before anything is built; with ``freeze``, what start-up
    made (modules, protobuf descriptors, the stores' scripts, the tables loaded) is
    collected once and frozen (``gc.freeze``) when the server starts, so no later collection
    walks it again.

    >>> GcSettings.from_env({"STUD_GC_THRESHOLD": "7000,20,10", "STUD_GC_FREEZE": "0"})
    GcSettings(threshold=(7000, 20, 10), freeze=False)
    >>> GcSettings.from_env({})
    GcSettings(threshold=None, freeze=True)
    """

    threshold: tuple[int, ...] | None = None
    freeze: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> GcSettings:
        """``STUD_GC_THRESHOLD`` (one to three integers, comma-separated; 0 for gen0 turns
        automatic collection off; unset: Python's own) and ``STUD_GC_FREEZE`` (1, the
        default, or 0)."""
        raw = environ.get("STUD_GC_THRESHOLD", "").strip()
        threshold: tuple[int, ...] | None = None
        if raw:
            try:
                threshold = tuple(int(part) for part in raw.split(","))
            except ValueError:
                threshold = ()
            if not 1 <= len(threshold) <= 3 or min(threshold) < 0:
                raise ValueError(f"STUD_GC_THRESHOLD: one to three integers >= 0, not {raw!r}")
        freeze = environ.get("STUD_GC_FREEZE", "1").strip()
        if freeze not in ("0", "1"):
            raise ValueError(f"STUD_GC_FREEZE: 1 or 0, not {freeze!r}")
        return cls(threshold, freeze == "1")

    def at_start(self) -> None:
        """Before anything is built: the thresholds."""
        if self.threshold is not None:
            gc.set_threshold(*self.threshold)

    def when_serving(self) -> None:
        """Start-up done: what it made is frozen (with ``freeze``)."""
        if self.freeze:
            gc.collect()
            gc.freeze()

    @staticmethod
    def state() -> dict[str, object]:
        """What the process runs with, for the ``<name>_started`` line."""
        return {"gc_threshold": list(gc.get_threshold()), "gc_frozen": gc.get_freeze_count()}


class ServiceSettings(Protocol):
    """What every service's ``Settings`` carries."""

    @property
    def redis_url(self) -> str: ...
    @property
    def auth_keys(self) -> KeySet: ...
    @property
    def addr(self) -> str: ...
    @property
    def log_level(self) -> str: ...
    @property
    def shutdown_grace_s(self) -> float: ...
    @property
    def metrics_port(self) -> int: ...
    @property
    def metrics_addr(self) -> str: ...


class Pingable(Protocol):
    async def ping(self) -> Any: ...


class ServiceDeps(Protocol):
    """What every service's dependencies offer."""

    @property
    def store(self) -> Pingable: ...
    @property
    def metrics(self) -> Metrics: ...
    async def close(self) -> None: ...


S = TypeVar("S", bound=ServiceSettings)
D = TypeVar("D", bound=ServiceDeps)


async def serve(name: str, settings: S, build_deps: Callable[[S], D],
                create_server: Callable[[S, D], tuple[GrpcServer, int]],
                gc_settings: GcSettings | None = None, **started: object) -> None:
    """Serve until SIGTERM/SIGINT, then stop gracefully (in-flight calls get the grace).
    ``gc_settings`` (default: none) freezes what start-up made once the server starts."""
    log = structlog.get_logger(name)
    if settings.auth_keys.has_dev_keys:
        log.warning("insecure_dev_auth_keys", keys=len(settings.auth_keys),
                    hint="the key set trusts generated dev keys; never outside development")
    deps = build_deps(settings)
    lag = asyncio.create_task(telemetry.watch_loop_lag(), name="loop-lag")
    try:
        await deps.store.ping()
        prepare = getattr(deps, "prepare", None)
        if prepare is not None:  # e.g. the wallet adopts keys of an older layout
            await prepare()
        server, port = create_server(settings, deps)
        with metrics_endpoint(deps.metrics.registry, settings.metrics_port,
                              settings.metrics_addr) as metrics:
            start = getattr(deps, "start", None)
            if start is not None:  # e.g. the table service rebuilds and drives its tables:
                await start()      # done before the health check may answer SERVING
            await server.start()
            if gc_settings is not None:
                gc_settings.when_serving()
            log.info(f"{name}_started", addr=settings.addr, port=port,
                     metrics_port=metrics.port if metrics else None,
                     redis=redact_url(settings.redis_url), **GcSettings.state(), **started)
            await run_until_signalled(server, settings.shutdown_grace_s,
                                      before_stop=getattr(deps, "draining", None))
    finally:
        lag.cancel()
        await deps.close()
    log.info(f"{name}_stopped")


def main(name: str, settings: S, build_deps: Callable[[S], D],
         create_server: Callable[[S, D], tuple[GrpcServer, int]], **started: object) -> None:
    """Entry point of a service process (``python -m <name>``); the garbage collector as
    :class:`GcSettings` reads it from the environment."""
    configure_logging(settings.log_level)
    gc_settings = GcSettings.from_env()
    gc_settings.at_start()
    telemetry.setup(name)  # traces only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        asyncio.run(serve(name, settings, build_deps, create_server, gc_settings, **started))
    finally:
        telemetry.shutdown()  # the spans still buffered are exported
