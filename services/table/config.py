"""The table service's settings, read from the environment here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from studkit.auth import KeySet, key_set_from_env
from studkit.auth.config import SERVICE_KEY_ENV, signing_key_from_env
from studkit.auth.signing import SigningKey
from studkit.metrics import DEFAULT_METRICS_ADDR, host_address, port_number
from studkit.service import redact_url

DEFAULT_METRICS_PORT = 9101
DEFAULT_ADDR = "[::]:50051"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_DEALER = "127.0.0.1:50052"
DEFAULT_WALLET = "127.0.0.1:50053"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Configuration of one table-service process.

    ``TABLE_ADDR`` (default ``[::]:50051``), ``REDIS_URL`` (the table ACL user: it owns
    ``stud:table:*``), ``TABLE_DEALER_TARGET`` (else the dealer's ``DEALER_ADDR``, else
    ``127.0.0.1:50052``), ``TABLE_WALLET_TARGET`` (else ``WALLET_ADDR``, else
    ``127.0.0.1:50053``), ``STUD_AUTH_PUBLIC_KEYS`` (the public key set),
    ``STUD_SERVICE_KEY`` (this service's private key; it signs as ``service:table``),
    ``LOG_LEVEL`` (``INFO``), ``TABLE_SHUTDOWN_GRACE`` (seconds, ``5``),
    ``TABLE_CALL_DEADLINE`` (seconds per call to the dealer or wallet, ``3``),
    ``TABLE_WATCH_BUFFER`` (events a watcher may fall behind before it is cut off, ``1000``, at
    least 1),
    ``TABLE_WATCHES_PER_PLAYER`` (open watches per caller, ``8``),
    ``TABLE_WATCHES_PER_CONNECTION`` (open watches per client connection, ``16``),
    ``TABLE_SNAPSHOT_EVERY`` (hands between the repository's snapshots, ``25``),
    ``TABLE_EVENTS_PAGE`` (events per read of a table's stream: a watch's catch-up and one
    hand's history are read a page at a time, ``500``),
    ``TABLE_ADVERTISE_ADDR`` (where clients reach this replica; default ``127.0.0.1:<port>``),
    ``TABLE_REPLICA_ID`` (default the advertised address; in Kubernetes the pod name),
    ``TABLE_LEASE_MS`` (a table's lease: an owner that stops renewing loses its tables after
    this long, ``3000``; see docs/scaling.md), ``METRICS_PORT``
    (``9101``; ``0`` serves none), ``METRICS_ADDR`` (the IP ``/metrics`` binds; all
    interfaces by default, loopback in ``make run``), ``TABLE_HISTORY_DSN`` (PostgreSQL as
    the support role: ``GetHandHistory`` of a hand the archiver moved out of Redis is read
    there; empty: such a hand is NOT_FOUND ``archived``).
    """

    addr: str = DEFAULT_ADDR
    redis_url: str = field(default=DEFAULT_REDIS_URL, repr=False)
    dealer_target: str = DEFAULT_DEALER
    wallet_target: str = DEFAULT_WALLET
    auth_keys: KeySet
    service_key: SigningKey = field(repr=False)
    service_name: str = "table"
    log_level: str = "INFO"
    shutdown_grace_s: float = 5.0
    call_deadline_s: float = 3.0
    watch_buffer: int = 1000
    watches_per_player: int = 8
    watches_per_connection: int = 16
    snapshot_every: int = 25
    events_page: int = 500
    replica_id: str = ""
    advertise_addr: str = ""
    lease_ms: int = 3000
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_addr: str = DEFAULT_METRICS_ADDR
    history_dsn: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if self.watch_buffer < 1:  # 0 would cut off every watch at its first live event
            raise ValueError("TABLE_WATCH_BUFFER must be at least 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``env`` (default ``os.environ``)."""
        env = os.environ if env is None else env
        return cls(
            addr=env.get("TABLE_ADDR", DEFAULT_ADDR),
            redis_url=env.get("REDIS_URL", DEFAULT_REDIS_URL),
            dealer_target=env.get("TABLE_DEALER_TARGET") or _dialable(
                env.get("DEALER_ADDR", DEFAULT_DEALER)),
            wallet_target=env.get("TABLE_WALLET_TARGET") or _dialable(
                env.get("WALLET_ADDR", DEFAULT_WALLET)),
            auth_keys=key_set_from_env(env),
            service_key=signing_key_from_env(env, SERVICE_KEY_ENV),
            log_level=env.get("LOG_LEVEL", "INFO"),
            shutdown_grace_s=float(env.get("TABLE_SHUTDOWN_GRACE", "5")),
            call_deadline_s=float(env.get("TABLE_CALL_DEADLINE", "3")),
            watch_buffer=int(env.get("TABLE_WATCH_BUFFER", "1000")),
            watches_per_player=int(env.get("TABLE_WATCHES_PER_PLAYER", "8")),
            watches_per_connection=int(env.get("TABLE_WATCHES_PER_CONNECTION", "16")),
            snapshot_every=int(env.get("TABLE_SNAPSHOT_EVERY", "25")),
            events_page=int(env.get("TABLE_EVENTS_PAGE", "500")),
            replica_id=env.get("TABLE_REPLICA_ID", ""),
            advertise_addr=env.get("TABLE_ADVERTISE_ADDR", ""),
            lease_ms=int(env.get("TABLE_LEASE_MS", "3000")),
            metrics_port=port_number(env.get("METRICS_PORT", str(DEFAULT_METRICS_PORT))),
            metrics_addr=host_address(env.get("METRICS_ADDR", DEFAULT_METRICS_ADDR)),
            history_dsn=env.get("TABLE_HISTORY_DSN", ""),
        )

    @property
    def redis_url_redacted(self) -> str:
        """``redis_url`` without its password, for logs."""
        return redact_url(self.redis_url)


def _dialable(addr: str) -> str:
    """A service's bind address as an address to call: ``[::]:50052`` -> ``127.0.0.1:50052``.

    >>> _dialable("[::]:50052"), _dialable("0.0.0.0:1"), _dialable("dealer:50052")
    ('127.0.0.1:50052', '127.0.0.1:1', 'dealer:50052')
    """
    host, _, port = addr.rpartition(":")
    return f"127.0.0.1:{port}" if host in ("[::]", "0.0.0.0", "") else addr
