"""Dependencies wired explicitly, in one function: the store over the tournament's keys, the
app, the wallet client with the service's own tokens, the leases of the tournaments this
replica drives, the process manager's task, the token verifier and the metrics registry."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from dataclasses import dataclass, field

import grpc
import structlog

from studkit import keys
from studkit.auth import ServiceTokenSource, TokenVerifier
from studkit.metrics import Metrics
from studkit.ownership import Ownership, Replica
from studkit.redis_client import Client, connect
from tournament import driver, metrics
from tournament.app import Clock, TournamentApp, tournament_store
from tournament.clients import WalletClient
from tournament.config import Settings
from tournament.history import NO_ARCHIVE, ArchivedTournaments
from tournament.leases import Fenced, Leases
from tournament.table_steps import TableSteps
from tournament.tables import TableClient


@dataclass
class TournamentDeps:
    app: TournamentApp
    redis: Client
    verifier: TokenVerifier
    wallet: WalletClient
    tables: TableClient
    channels: tuple[grpc.aio.Channel, ...]
    tick_s: float
    leases: Leases
    metrics: Metrics = field(default_factory=Metrics)
    task: asyncio.Task[None] | None = None
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    writer: Fenced = field(init=False)

    def __post_init__(self) -> None:
        self.writer = Fenced(self.app, self.leases, self.metrics)
        metrics.register(self.metrics, lambda: self.leases.held)  # docs/operations.md

    @property
    def store(self) -> TournamentDeps:
        """What the service shell pings before serving (the Redis connection)."""
        return self

    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    async def start(self) -> None:
        """Before serving: the leases' keeper and the process manager's rounds begin."""
        self.leases.start()
        self.task = asyncio.create_task(
            driver.run(self.app, self.wallet, self.tick_s, self.stopping,
                       TableSteps(self.writer, self.tables), writer=self.writer,
                       leases=self.leases))

    async def stop_driver(self, grace_s: float = 5.0) -> None:
        """Stop the process manager after its current step (cancelled after ``grace_s``),
        then hand every lease back (another replica takes over at once)."""
        self.stopping.set()
        if self.task is not None:
            done, _ = await asyncio.wait([self.task], timeout=grace_s)
            if not done:
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self.task
            self.task = None
        await self.leases.stop()

    async def draining(self) -> None:
        """On SIGTERM, before the drain: no new round of the process manager."""
        await self.stop_driver()

    async def close(self) -> None:
        await self.stop_driver()
        await self.tables.aclose()
        if self.app.archive is not None:
            await self.app.archive.aclose()
        for channel in self.channels:
            await channel.close()
        await self.redis.aclose()


def build_deps(settings: Settings, clock: Clock = time.time) -> TournamentDeps:
    """The tournament service's dependencies for ``settings`` (call within a running loop);
    ``clock``: the time its app decides by (a test's clock it moves)."""
    client = connect(settings.redis_url, socket_timeout=10, health_check_interval=30)
    source = ServiceTokenSource(settings.service_key, "tournament")
    wallet_channel = grpc.aio.insecure_channel(settings.wallet_target)
    wallet = WalletClient(wallet_channel, lambda: source.metadata("wallet"),
                          settings.call_timeout_s)
    table_channel = grpc.aio.insecure_channel(settings.table_target)
    tables = TableClient(table_channel, lambda: source.metadata("table"),
                         settings.call_timeout_s, settings.table_settings)
    replica = Replica(settings.replica_id or f"{socket.gethostname()}-{os.getpid()}",
                      settings.addr)
    ownership = Ownership(client, replica, lease_ms=settings.lease_ms,
                          owner_key=keys.tournament_owner,
                          replicas_key=keys.tournament_replicas())
    archive = ArchivedTournaments(settings.history_dsn) if settings.history_dsn else None
    if archive is None:
        structlog.get_logger("tournament").warning("tournament_archive_not_configured",
                                                    detail=NO_ARCHIVE)
    return TournamentDeps(
        app=TournamentApp(tournament_store(client), clock=clock, archive=archive),
        redis=client,
        verifier=TokenVerifier(settings.auth_keys, audience="tournament"), wallet=wallet,
        tables=tables, channels=(wallet_channel, table_channel), tick_s=settings.tick_s,
        leases=Leases(ownership))
