"""The wallet's metrics (docs/operations.md "Metrics"): ``stud_wallet_settlement_seconds``, the
time to apply one SettleHand (applied, replayed or refused; a traced one's trace id as an
exemplar), and the ledger's balance as a gauge:
``stud_wallet_ledger_balance``, the sum of every account's balance (players, escrows, pools,
the house and the outside world), which must be 0; read every :data:`EVERY_S` seconds with
HSCAN (never one HGETALL of a million accounts), so a scrape never waits on Redis."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Final

import structlog
from prometheus_client import Gauge, Histogram

from studkit.metrics import Metrics
from studkit.redis_client import Client
from studkit.telemetry import exemplar
from wallet.keys import BALANCES

EVERY_S: Final = 30.0
SCAN_COUNT: Final = 1000

log = structlog.get_logger("wallet")

SETTLEMENT_SECONDS = Histogram(
    "stud_wallet_settlement_seconds", "Time to apply one SettleHand (applied, replayed or "
    "refused).", buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                          5.0, float("inf")), registry=None)


@contextlib.contextmanager
def timed_settlement() -> Iterator[None]:
    """Observe the block's time in ``stud_wallet_settlement_seconds``."""
    started = time.perf_counter()
    try:
        yield
    finally:
        SETTLEMENT_SECONDS.observe(time.perf_counter() - started, exemplar())


async def ledger_balance(redis: Client) -> int:
    """The sum of every account's balance (0 when the ledger is balanced)."""
    total = 0
    async for _account, value in redis.hscan_iter(BALANCES, count=SCAN_COUNT):
        total += int(value)
    return total


class LedgerGauge:
    """``stud_wallet_ledger_balance`` on ``metrics``' registry, kept by :meth:`keep`."""

    def __init__(self, metrics: Metrics) -> None:
        with contextlib.suppress(ValueError):  # already there
            metrics.registry.register(SETTLEMENT_SECONDS)
        self.gauge = Gauge("stud_wallet_ledger_balance", "The sum of every account of the "
                           "ledger (players, escrows, pools, the house, the outside world): "
                           "must be 0.", registry=metrics.registry)

    async def refresh(self, redis: Client) -> int:
        total = await ledger_balance(redis)
        self.gauge.set(total)
        if total:
            log.error("ledger_unbalanced", total=total)
        return total

    async def keep(self, redis: Client, every_s: float = EVERY_S) -> None:
        """:meth:`refresh` for ever (a background task of the service)."""
        while True:
            with contextlib.suppress(Exception):
                await self.refresh(redis)
            await asyncio.sleep(every_s)
