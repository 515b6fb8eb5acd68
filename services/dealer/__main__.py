"""``python -m dealer``: read the settings, configure logging, serve gRPC and ``/metrics`` until
SIGTERM."""

from __future__ import annotations

import asyncio

import structlog

from dealer.bootstrap import build_deps
from dealer.config import Settings
from dealer.server import create_server
from studkit.grpc_server import run_until_signalled
from studkit.log import configure_logging
from studkit.metrics import metrics_endpoint

log = structlog.get_logger("dealer")


async def serve(settings: Settings) -> None:
    """Serve the dealer until SIGTERM/SIGINT, then stop gracefully."""
    deps = build_deps(settings)
    try:
        await deps.store.ping()
        server, port = create_server(settings, deps)
        with metrics_endpoint(deps.metrics.registry, settings.metrics_port) as metrics:
            await server.start()
            log.info("dealer_started", addr=settings.addr, port=port,
                     metrics_port=metrics.port if metrics else None,
                     redis=settings.redis_url_redacted,
                     table_services=list(settings.table_services))
            await run_until_signalled(server, settings.shutdown_grace_s)
    finally:
        await deps.close()
    log.info("dealer_stopped")


def main() -> None:
    settings = Settings.from_env()
    configure_logging(settings.log_level)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
