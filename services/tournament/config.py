"""The tournament service's settings, read from the environment here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from stud.v1 import table_pb2 as tpb
from studkit.auth import KeySet, SigningKey, key_set_from_env, signing_key_from_env
from studkit.metrics import DEFAULT_METRICS_ADDR, host_address, port_number
from studkit.service import redact_url

DEFAULT_METRICS_PORT = 9104
DEFAULT_ADDR = "[::]:50054"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Configuration of one tournament process.

    ``TOURNAMENT_ADDR`` (default ``[::]:50054``), ``REDIS_URL`` (the tournament ACL user's:
    ``stud:tournament:*``), ``TOURNAMENT_WALLET_TARGET`` (the wallet's gRPC address,
    ``127.0.0.1:50053``), ``TOURNAMENT_TABLE_TARGET`` (the table service's,
    ``127.0.0.1:50051``), ``STUD_AUTH_PUBLIC_KEYS``
    (required: the public key set), ``STUD_SERVICE_KEY`` (required: the private key that signs
    its ``service:tournament`` tokens), ``TOURNAMENT_TICK_S`` (how often the process manager
    looks at each tournament, ``1``), ``TOURNAMENT_CALL_TIMEOUT_S`` (the deadline of each
    outgoing call, ``5``), ``TOURNAMENT_WATCHES_PER_PLAYER`` and
    ``TOURNAMENT_WATCHES_PER_CONNECTION`` (open ``WatchTournament`` streams one caller and one
    connection may hold, ``8`` and ``16``), ``LOG_LEVEL`` (``INFO``),
    ``TOURNAMENT_SHUTDOWN_GRACE`` (seconds, ``5``), ``METRICS_PORT`` (``9104``; ``0`` serves
    none), ``METRICS_ADDR``, ``TOURNAMENT_LEASE_MS`` (a tournament's lease: a replica that
    stops renewing loses its tournaments after this long and another takes them over,
    ``3000``), ``TOURNAMENT_REPLICA_ID`` (default ``<hostname>-<pid>``; in Kubernetes the
    pod name), ``TOURNAMENT_HISTORY_DSN`` (PostgreSQL as its read-only role,
    ``stud_tournament_reader``: a finished tournament the archiver moved out of Redis is read there;
    empty: such a tournament is ``NOT_FOUND`` and the service says why, at start and in
    each refusal).
    """

    addr: str = DEFAULT_ADDR
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    auth_keys: KeySet
    service_key: SigningKey = field(repr=False)
    wallet_target: str = "127.0.0.1:50053"
    table_target: str = "127.0.0.1:50051"
    tick_s: float = 1.0
    call_timeout_s: float = 5.0
    watches_per_player: int = 8
    watches_per_connection: int = 16
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_addr: str = DEFAULT_METRICS_ADDR
    lease_ms: int = 3000
    replica_id: str = ""
    table_settings: tpb.TableSettings | None = None
    """The room settings of the tables it opens (None: the table service's defaults)."""
    history_dsn: str = field(default="", repr=False)
    """``TOURNAMENT_HISTORY_DSN``: the archive of record as the tournament reader role
    (empty: none)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        return cls(
            addr=env.get("TOURNAMENT_ADDR", DEFAULT_ADDR),
            redis_url=env.get("REDIS_URL", DEFAULT_REDIS_URL),
            auth_keys=key_set_from_env(env),
            service_key=signing_key_from_env(env, "STUD_SERVICE_KEY"),
            wallet_target=env.get("TOURNAMENT_WALLET_TARGET", "127.0.0.1:50053"),
            table_target=env.get("TOURNAMENT_TABLE_TARGET", "127.0.0.1:50051"),
            tick_s=float(env.get("TOURNAMENT_TICK_S", "1")),
            call_timeout_s=float(env.get("TOURNAMENT_CALL_TIMEOUT_S", "5")),
            watches_per_player=int(env.get("TOURNAMENT_WATCHES_PER_PLAYER", "8")),
            watches_per_connection=int(env.get("TOURNAMENT_WATCHES_PER_CONNECTION", "16")),
            log_level=env.get("LOG_LEVEL", "INFO"),
            shutdown_grace_s=float(env.get("TOURNAMENT_SHUTDOWN_GRACE", "5")),
            metrics_port=port_number(env.get("METRICS_PORT", str(DEFAULT_METRICS_PORT))),
            metrics_addr=host_address(env.get("METRICS_ADDR", DEFAULT_METRICS_ADDR)),
            lease_ms=int(env.get("TOURNAMENT_LEASE_MS", "3000")),
            replica_id=env.get("TOURNAMENT_REPLICA_ID", ""),
            history_dsn=env.get("TOURNAMENT_HISTORY_DSN", ""),
        )

    @property
    def redis_url_redacted(self) -> str:
        return redact_url(self.redis_url)
