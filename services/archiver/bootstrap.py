"""Dependencies wired explicitly: the Redis store, the archiver's rounds, the dealer's
records, the token verifier (gRPC health only) and the metrics registry."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import grpc

from archiver.config import Settings
from archiver.loop import Archiver
from studhistory.dealer_records import DealerAudits
from studkit.auth import ServiceTokenSource, TokenVerifier
from studkit.metrics import Metrics
from studkit.redis_client import Client, connect
from studkit.store import EventStore


@dataclass
class ArchiverDeps:
    archiver: Archiver
    redis: Client
    verifier: TokenVerifier
    interval_s: float
    channel: grpc.aio.Channel | None = None
    metrics: Metrics = field(default_factory=Metrics)
    task: asyncio.Task[None] | None = None

    @property
    def store(self) -> ArchiverDeps:
        """What the service shell pings before serving (Redis, then PostgreSQL)."""
        return self

    async def ping(self) -> bool:
        await self.redis.ping()
        await (await self.archiver.connected()).ping()
        return True

    async def start(self) -> None:
        self.task = asyncio.create_task(self.archiver.run(self.interval_s))

    async def draining(self) -> None:
        """On SIGTERM: the current step ends (a step is safe to stop anywhere), no new one."""
        self.archiver.stopping.set()
        if self.task is not None:
            done, _ = await asyncio.wait([self.task], timeout=5.0)
            if not done:
                self.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self.task
            self.task = None

    async def close(self) -> None:
        await self.draining()
        await self.archiver.aclose()
        if self.channel is not None:
            await self.channel.close()
        await self.redis.aclose()


def build_deps(settings: Settings) -> ArchiverDeps:
    redis = connect(settings.redis_url)
    metrics = Metrics()
    channel = None
    dealer = None
    if settings.dealer_target and settings.service_key is not None:
        channel = grpc.aio.insecure_channel(settings.dealer_target)
        tokens = ServiceTokenSource(settings.service_key, "archiver")
        dealer = DealerAudits(channel, lambda: tokens.token("dealer"))
    archiver = Archiver(EventStore(redis), settings.history_dsn, metrics,
                        settings.hot_hands, dealer, wallet_hot=settings.wallet_hot,
                        command_window_s=settings.command_window_s,
                        trim_tournaments=settings.trim_tournaments)
    return ArchiverDeps(archiver, redis, TokenVerifier(settings.auth_keys),
                        settings.interval_s, channel, metrics)
