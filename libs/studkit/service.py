"""The life of one service process, the same for every service: settings from the environment,
logging, dependencies, the gRPC server and ``/metrics``, until SIGTERM, then a graceful stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
                **started: object) -> None:
    """Serve until SIGTERM/SIGINT, then stop gracefully (in-flight calls get the grace)."""
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
            log.info(f"{name}_started", addr=settings.addr, port=port,
                     metrics_port=metrics.port if metrics else None,
                     redis=redact_url(settings.redis_url), **started)
            await run_until_signalled(server, settings.shutdown_grace_s,
                                      before_stop=getattr(deps, "draining", None))
    finally:
        lag.cancel()
        await deps.close()
    log.info(f"{name}_stopped")


def main(name: str, settings: S, build_deps: Callable[[S], D],
         create_server: Callable[[S, D], tuple[GrpcServer, int]], **started: object) -> None:
    """Entry point of a service process (``python -m <name>``)."""
    configure_logging(settings.log_level)
    telemetry.setup(name)  # traces only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        asyncio.run(serve(name, settings, build_deps, create_server, **started))
    finally:
        telemetry.shutdown()  # the spans still buffered are exported
