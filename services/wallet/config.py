"""The wallet's settings, read from the environment here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from studkit.auth import KeySet, key_set_from_env, service_names
from studkit.metrics import DEFAULT_METRICS_ADDR, host_address, port_number
from studkit.service import redact_url

DEFAULT_METRICS_PORT = 9103
DEFAULT_ADDR = "[::]:50053"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Configuration of one wallet process.

    ``WALLET_ADDR`` (default ``[::]:50053``), ``REDIS_URL`` (default
    ``redis://127.0.0.1:6379/0``; use the wallet ACL user's credentials),
    ``STUD_AUTH_PUBLIC_KEYS`` (required: the public key set, a JSON file or inline JSON; see
    ``studkit.auth``), ``WALLET_TABLE_SERVICES`` (comma-separated service names allowed to buy
    in, settle and cash out; ``table``), ``WALLET_TOURNAMENT_SERVICES`` (comma-separated
    service names allowed to enter players into tournaments, refund entries and pay prizes;
    ``tournament``), ``LOG_LEVEL`` (``INFO``), ``WALLET_SHUTDOWN_GRACE``
    (seconds, ``5``), ``WALLET_CONFLICT_RETRIES`` (``5``), ``METRICS_PORT`` (Prometheus
    ``/metrics`` over HTTP, ``9103``; ``0`` serves none). The wallet calls no other service,
    so it holds no private key.
    """

    addr: str = DEFAULT_ADDR
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    auth_keys: KeySet
    table_services: tuple[str, ...] = ("table",)
    tournament_services: tuple[str, ...] = ("tournament",)
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0
    conflict_retries: int = 5
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_addr: str = DEFAULT_METRICS_ADDR
    """``METRICS_ADDR``: the IP ``/metrics`` binds (all interfaces; ``make run``: loopback)."""
    history_dsn: str = field(default="", repr=False)
    """``WALLET_HISTORY_DSN``: PostgreSQL as the read-only ``stud_support`` role, where
    statements' archived lines are read (``wallet.history``); empty: Redis only."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        return cls(
            addr=env.get("WALLET_ADDR", DEFAULT_ADDR),
            redis_url=env.get("REDIS_URL", DEFAULT_REDIS_URL),
            auth_keys=key_set_from_env(env),
            table_services=service_names(env, "WALLET_TABLE_SERVICES", "table"),
            tournament_services=service_names(env, "WALLET_TOURNAMENT_SERVICES", "tournament"),
            log_level=env.get("LOG_LEVEL", "INFO"),
            shutdown_grace_s=float(env.get("WALLET_SHUTDOWN_GRACE", "5")),
            conflict_retries=int(env.get("WALLET_CONFLICT_RETRIES", "5")),
            metrics_port=port_number(env.get("METRICS_PORT", str(DEFAULT_METRICS_PORT))),
            metrics_addr=host_address(env.get("METRICS_ADDR", DEFAULT_METRICS_ADDR)),
            history_dsn=env.get("WALLET_HISTORY_DSN", ""),
        )

    @property
    def redis_url_redacted(self) -> str:
        """``redis_url`` without its password, for logs."""
        return redact_url(self.redis_url)
