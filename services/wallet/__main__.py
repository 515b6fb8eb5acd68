"""``python -m wallet``: read the settings, configure logging, serve gRPC and ``/metrics`` until
SIGTERM."""

from __future__ import annotations

import asyncio

import structlog

from studkit.auth import DEV_INSECURE_SECRET
from studkit.grpc_server import run_until_signalled
from studkit.log import configure_logging
from studkit.metrics import metrics_endpoint
from wallet.bootstrap import build_deps
from wallet.config import Settings
from wallet.server import create_server

log = structlog.get_logger("wallet")


async def serve(settings: Settings) -> None:
    """Serve the wallet until SIGTERM/SIGINT, then stop gracefully."""
    if settings.auth_secret == DEV_INSECURE_SECRET:
        log.warning("insecure_dev_auth_secret", hint="set STUD_AUTH_SECRET outside dev")
    deps = build_deps(settings)
    try:
        await deps.store.ping()
        server, port = create_server(settings, deps)
        with metrics_endpoint(deps.metrics.registry, settings.metrics_port) as metrics:
            await server.start()
            log.info("wallet_started", addr=settings.addr, port=port,
                     metrics_port=metrics.port if metrics else None,
                     redis=settings.redis_url_redacted)
            await run_until_signalled(server, settings.shutdown_grace_s)
    finally:
        await deps.close()
    log.info("wallet_stopped")


def main() -> None:
    """Entry point of the wallet process."""
    settings = Settings.from_env()
    configure_logging(settings.log_level)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
