"""Dependencies wired explicitly, in one function: the Redis client and event store, the
channels and clients to the dealer and the wallet (signed as ``service:table``), the app,
the token verifier and the metrics registry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import grpc

from studhistory.pgarchive import HandArchive
from studkit.auth import ServiceTokenSource, TokenVerifier
from studkit.metrics import Metrics
from studkit.redis_client import Client, connect
from studkit.store import EventStore
from table.actor import ActorDeps
from table.alarms import Alarms
from table.app import TableApp
from table.clients import DealerClient, Retry, WalletClient
from table.config import Settings
from table.metrics import TableGauges, register
from table.port import CHECKS_AT_ONCE, Driving, System


@dataclass
class TableDeps:
    """Everything the server needs."""

    app: TableApp
    redis: Client
    events: EventStore
    verifier: TokenVerifier
    channels: tuple[grpc.aio.Channel, ...]
    metrics: Metrics = field(default_factory=Metrics)
    gauges: TableGauges | None = None
    _streams: asyncio.Task[None] | None = None

    @property
    def store(self) -> TableDeps:
        """What the service shell pings before serving (the Redis connection)."""
        return self

    async def ping(self) -> bool:
        """Whether Redis answers."""
        return bool(await self.redis.ping())

    async def start(self) -> None:
        """Rebuild every table from its log and drive it."""
        await self.app.start()
        if self.gauges is not None:  # the longest streams' lengths, every few seconds
            self._streams = asyncio.create_task(self.gauges.keep_streams(self.redis))

    async def draining(self) -> None:
        """On SIGTERM, before the drain: hand every table over (leases released)."""
        await self.app.stop()

    async def close(self) -> None:
        """Stop the tables' drivers, close the channels and the Redis connections."""
        if self._streams is not None:
            self._streams.cancel()
        await self.app.stop()
        for channel in self.channels:
            await channel.close()
        if isinstance(self.app.history, HandArchive):
            await self.app.history.aclose()
        await self.redis.aclose()


def build_deps(settings: Settings) -> TableDeps:
    """The table service's dependencies for ``settings`` (call within a running loop)."""
    client = connect(settings.redis_url, socket_timeout=10,
                     health_check_interval=30)
    events = EventStore(client, page_size=settings.events_page)
    source = ServiceTokenSource(settings.service_key, settings.service_name)
    retry = Retry(deadline_s=settings.call_deadline_s)
    dealer_channel = grpc.aio.insecure_channel(settings.dealer_target)
    wallet_channel = grpc.aio.insecure_channel(settings.wallet_target)
    dealer = DealerClient(dealer_channel, lambda: source.metadata("dealer"), retry)
    wallet = WalletClient(wallet_channel, lambda: source.metadata("wallet"), retry)
    metrics = Metrics()
    statuses = metrics.counter(
        "stud_table_status_changes",
        "Table status changes, by status (open, waiting for the dealer or wallet, stopped by "
        "a failed reconciliation, closed).",
        {"status": ("open", "waiting", "stopped", "closed")})

    def on_status(_table_id: str, status: str, _reason: str) -> None:
        statuses.inc(status=status)

    alarms = Alarms()  # one timer for every table of the replica
    checks = asyncio.Semaphore(CHECKS_AT_ONCE)  # and one set of turns to ask the wallet

    def deps_for() -> ActorDeps:
        return ActorDeps(store=events, redis=client, watcher_buffer=settings.watch_buffer,
                         snapshot_every=settings.snapshot_every)

    driving = Driving(System(dealer=dealer, wallet=wallet), alarms=alarms, checks=checks,
                      on_status=on_status)
    app = TableApp(events, deps_for, driving)
    if settings.history_dsn:  # hands the archiver moved to PostgreSQL stay readable
        app.history = HandArchive(settings.history_dsn)
    gauges = register(metrics, lambda: app.actors)  # docs/operations.md "Metrics"
    return TableDeps(app=app, redis=client, events=events,
                     verifier=TokenVerifier(settings.auth_keys, audience="table"),
                     channels=(dealer_channel, wallet_channel), metrics=metrics,
                     gauges=gauges)
