"""The dealer's settings, read from the environment here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from studkit.auth import KeySet, key_set_from_env, service_names
from studkit.metrics import DEFAULT_METRICS_ADDR, host_address, port_number
from studkit.service import redact_url

DEFAULT_METRICS_PORT = 9102
DEFAULT_ADDR = "[::]:50052"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
TEST_ONLY_SETTINGS: Final = ("DEALER_CORRUPT", "DEALER_STACKED_DECKS")
"""Settings of the test support's rigged dealer (``python -m studtest.rigged_dealer``: a
dishonest dealer, stacked decks). The service has no such dealer: with any of them set (not
empty), ``python -m dealer`` refuses to start, whatever ``STUD_ENV`` says."""


class TestOnlySetting(RuntimeError):
    """Raised when the environment sets a test-only setting (:data:`TEST_ONLY_SETTINGS`)."""

    __test__ = False  # not a pytest test class

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(
            f"{', '.join(names)}: test-only setting(s) of the rigged test dealer, which the "
            "service does not contain; unset them (the test dealer is python -m "
            "studtest.rigged_dealer, in the repository's test support only)")


def test_only_settings(env: Mapping[str, str]) -> list[str]:
    """The test-only settings ``env`` sets (an empty value sets nothing).

    >>> test_only_settings({"DEALER_CORRUPT": "swap", "DEALER_STACKED_DECKS": ""})
    ['DEALER_CORRUPT']
    """
    return [name for name in TEST_ONLY_SETTINGS if env.get(name, "").strip()]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Configuration of one dealer process.

    ``DEALER_ADDR`` (default ``[::]:50052``), ``REDIS_URL`` (default
    ``redis://127.0.0.1:6379/0``; use the dealer ACL user's credentials: it owns
    ``stud:dealer:*`` and reads ``stud:table:*``), ``STUD_AUTH_PUBLIC_KEYS`` (required: the
    public key set, a JSON file or inline JSON; see ``studkit.auth``), ``LOG_LEVEL``
    (``INFO``), ``DEALER_SHUTDOWN_GRACE`` (seconds, ``5``),
    ``DEALER_TABLE_SERVICES`` (comma-separated service names allowed to start hands, deal and
    reveal; ``table``), ``DEALER_CONFLICT_RETRIES`` (``5``), ``METRICS_PORT`` (Prometheus
    ``/metrics`` over HTTP, ``9102``; ``0`` serves none). The dealer calls no other service, so
    it holds no private key.
    """

    addr: str = DEFAULT_ADDR
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    auth_keys: KeySet
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0
    table_services: tuple[str, ...] = ("table",)
    conflict_retries: int = 5
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_addr: str = DEFAULT_METRICS_ADDR
    """``METRICS_ADDR``: the IP ``/metrics`` binds (all interfaces; ``make run``: loopback)."""
    max_streams_per_player: int = 8
    """``DEALER_MAX_STREAMS_PER_PLAYER``: open WatchMyCards streams one caller may hold."""
    max_streams_per_connection: int = 16
    """``DEALER_MAX_STREAMS_PER_CONNECTION``: open streams one client connection may hold."""
    watch_redis_connections: int = 200
    """``DEALER_WATCH_REDIS_CONNECTIONS``: the watchers' own Redis pool, one connection per
    table being watched; dealing keeps the main pool to itself."""
    seed_wait_ms: int = 1000
    """``DEALER_SEED_WAIT_MS``: how long after a hand's cards are committed its first deal
    waits for the committed seeds of the players dealt in to be opened (docs/fairness.md);
    a seed not opened by then is left out of the deal order. A player who commits a seed
    and never opens it delays each first card by up to this (docs/fairness.md)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default ``os.environ``); :class:`TestOnlySetting` when
        ``env`` sets a test-only setting."""
        env = os.environ if env is None else env
        refused = test_only_settings(env)
        if refused:
            raise TestOnlySetting(refused)
        return cls(
            seed_wait_ms=int(env.get("DEALER_SEED_WAIT_MS", "1000")),
            addr=env.get("DEALER_ADDR", DEFAULT_ADDR),
            redis_url=env.get("REDIS_URL", DEFAULT_REDIS_URL),
            auth_keys=key_set_from_env(env),
            log_level=env.get("LOG_LEVEL", "INFO"),
            shutdown_grace_s=float(env.get("DEALER_SHUTDOWN_GRACE", "5")),
            table_services=service_names(env, "DEALER_TABLE_SERVICES", "table"),
            conflict_retries=int(env.get("DEALER_CONFLICT_RETRIES", "5")),
            metrics_port=port_number(env.get("METRICS_PORT", str(DEFAULT_METRICS_PORT))),
            metrics_addr=host_address(env.get("METRICS_ADDR", DEFAULT_METRICS_ADDR)),
            max_streams_per_player=int(env.get("DEALER_MAX_STREAMS_PER_PLAYER", "8")),
            max_streams_per_connection=int(env.get("DEALER_MAX_STREAMS_PER_CONNECTION", "16")),
            watch_redis_connections=int(env.get("DEALER_WATCH_REDIS_CONNECTIONS", "200")),
        )

    @property
    def redis_url_redacted(self) -> str:
        """``redis_url`` without its password, for logs."""
        return redact_url(self.redis_url)
