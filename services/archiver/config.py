"""The archiver's settings, read from the environment here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from studhistory.archiver import DEFAULT_HOT_HANDS
from studhistory.ledger_archive import DEFAULT_HOT_TRANSACTIONS
from studkit.auth import KeySet, SigningKey, key_set_from_env, signing_key_from_env
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.metrics import DEFAULT_METRICS_ADDR, host_address, port_number

DEFAULT_METRICS_PORT = 9105
DEFAULT_ADDR = "[::]:50055"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Configuration of one archiver process.

    ``REDIS_URL`` (the archiver ACL user's: reads ``stud:table:*``, trims the streams' heads),
    ``STUD_HISTORY_DSN`` (required: PostgreSQL as the ``stud_archiver`` role),
    ``STUD_HOT_HANDS`` (the hands each table keeps in Redis, ``20``),
    ``WALLET_HOT_TRANSACTIONS`` (the wallet's latest transactions its ledger and statements
    keep in Redis once archived; ``0``, the default: copied, never trimmed; set it only when
    the wallet reads the archive, ``WALLET_HISTORY_DSN``),
    ``ARCHIVER_TRIM_TOURNAMENTS`` (``1``: a tournament archived and verified leaves Redis
    once past the command window; ``0``, the default: copied, kept; set it only when the
    tournament service reads the archive, ``TOURNAMENT_HISTORY_DSN``),
    ``STUD_COMMAND_WINDOW_S`` (the least seconds a command record stays in Redis after its
    events, ``600``, never less: docs/history.md, "Expired commands"),
    ``ARCHIVER_INTERVAL_S`` (seconds between rounds over every table, ``2``),
    ``ARCHIVER_DEALER_TARGET`` (the dealer's ``host:port``, for its hand records; empty: not
    archived), ``STUD_SERVICE_KEY`` (the private key that signs its ``service:archiver``
    tokens for the dealer's ``GetAudit``), ``STUD_AUTH_PUBLIC_KEYS`` (the public key set),
    ``ARCHIVER_ADDR`` (gRPC health, ``[::]:50055``), ``LOG_LEVEL``, ``METRICS_PORT``
    (``9105``; ``0`` serves none), ``METRICS_ADDR``, ``ARCHIVER_SHUTDOWN_GRACE`` (``5``).
    """

    addr: str = DEFAULT_ADDR
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    history_dsn: str = field(repr=False)
    auth_keys: KeySet
    service_key: SigningKey | None = field(default=None, repr=False)
    hot_hands: int = DEFAULT_HOT_HANDS
    wallet_hot: int = DEFAULT_HOT_TRANSACTIONS
    trim_tournaments: bool = False
    command_window_s: float = COMMAND_WINDOW_S
    interval_s: float = 2.0
    dealer_target: str = ""
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_addr: str = DEFAULT_METRICS_ADDR

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        dsn = env.get("STUD_HISTORY_DSN", "")
        if not dsn:
            raise ValueError("STUD_HISTORY_DSN is required (PostgreSQL, the stud_archiver role)")
        hot = int(env.get("STUD_HOT_HANDS", str(DEFAULT_HOT_HANDS)))
        if hot < 1:
            raise ValueError("STUD_HOT_HANDS must be at least 1")
        wallet_hot = int(env.get("WALLET_HOT_TRANSACTIONS", str(DEFAULT_HOT_TRANSACTIONS)))
        if wallet_hot < 0:
            raise ValueError("WALLET_HOT_TRANSACTIONS must be 0 or more")
        window = float(env.get("STUD_COMMAND_WINDOW_S", str(COMMAND_WINDOW_S)))
        if window < COMMAND_WINDOW_S:
            raise ValueError(f"STUD_COMMAND_WINDOW_S must be at least {COMMAND_WINDOW_S} (the "
                             "tables' command_expired rule counts on it)")
        return cls(
            addr=env.get("ARCHIVER_ADDR", DEFAULT_ADDR),
            command_window_s=window,
            wallet_hot=wallet_hot,
            trim_tournaments=env.get("ARCHIVER_TRIM_TOURNAMENTS", "0") == "1",
            redis_url=env.get("REDIS_URL", DEFAULT_REDIS_URL),
            history_dsn=dsn,
            auth_keys=key_set_from_env(env),
            service_key=(signing_key_from_env(env, "STUD_SERVICE_KEY")
                         if env.get("STUD_SERVICE_KEY") else None),
            hot_hands=hot,
            interval_s=float(env.get("ARCHIVER_INTERVAL_S", "2")),
            dealer_target=env.get("ARCHIVER_DEALER_TARGET", ""),
            log_level=env.get("LOG_LEVEL", "INFO"),
            shutdown_grace_s=float(env.get("ARCHIVER_SHUTDOWN_GRACE", "5")),
            metrics_port=port_number(env.get("METRICS_PORT", str(DEFAULT_METRICS_PORT))),
            metrics_addr=host_address(env.get("METRICS_ADDR", DEFAULT_METRICS_ADDR)),
        )
