"""The wallet's settings, read from the environment here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from studkit.auth import secret_from_env
from studkit.metrics import DEFAULT_METRICS_ADDR, host_address, port_number
from studkit.service import redact_url

DEFAULT_METRICS_PORT = 9103
DEFAULT_ADDR = "[::]:50053"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Configuration of one wallet process.

    ``WALLET_ADDR`` (default ``[::]:50053``), ``REDIS_URL`` (default
    ``redis://127.0.0.1:6379/0``; use the wallet ACL user's credentials), ``STUD_AUTH_SECRET``
    (required unless ``STUD_ENV=dev``), ``LOG_LEVEL`` (``INFO``), ``WALLET_SHUTDOWN_GRACE``
    (seconds, ``5``), ``WALLET_CONFLICT_RETRIES`` (``5``), ``METRICS_PORT`` (Prometheus
    ``/metrics`` over HTTP, ``9103``; ``0`` serves none).
    """

    addr: str = DEFAULT_ADDR
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    auth_secret: str = field(repr=False)
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0
    conflict_retries: int = 5
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_addr: str = DEFAULT_METRICS_ADDR
    """``METRICS_ADDR``: the IP ``/metrics`` binds (all interfaces; ``make run``: loopback)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        return cls(
            addr=env.get("WALLET_ADDR", DEFAULT_ADDR),
            redis_url=env.get("REDIS_URL", DEFAULT_REDIS_URL),
            auth_secret=secret_from_env(env),
            log_level=env.get("LOG_LEVEL", "INFO"),
            shutdown_grace_s=float(env.get("WALLET_SHUTDOWN_GRACE", "5")),
            conflict_retries=int(env.get("WALLET_CONFLICT_RETRIES", "5")),
            metrics_port=port_number(env.get("METRICS_PORT", str(DEFAULT_METRICS_PORT))),
            metrics_addr=host_address(env.get("METRICS_ADDR", DEFAULT_METRICS_ADDR)),
        )

    @property
    def redis_url_redacted(self) -> str:
        """``redis_url`` without its password, for logs."""
        return redact_url(self.redis_url)
