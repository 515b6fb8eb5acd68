"""Dependencies wired explicitly, in one function: store, app, token verifier and the metrics
registry (gRPC and domain counters)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog

from studkit.auth import TokenVerifier
from studkit.metrics import Metrics
from wallet.app import WalletApp
from wallet.config import Settings
from wallet.history import store_for
from wallet.metrics import LedgerGauge
from wallet.protection_app import ProtectionApp
from wallet.protection_store import ProtectionStore
from wallet.store import WalletStore


@dataclass(frozen=True, slots=True)
class WalletDeps:
    """Everything the server needs."""

    app: WalletApp
    store: WalletStore
    verifier: TokenVerifier
    protection: ProtectionApp
    """Player protection's use cases (issue 34)."""
    metrics: Metrics = field(default_factory=Metrics)
    ledger: LedgerGauge | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        """Keep the ledger's balance gauge (docs/operations.md "Metrics")."""
        if self.ledger is not None:
            self.background.append(asyncio.create_task(self.ledger.keep(self.store.client)))

    async def prepare(self) -> None:
        """Before serving: adopt the wallet keys of the layout before the hash tag."""
        moved = await self.store.adopt_legacy_keys()
        if moved:
            structlog.get_logger("wallet").info("wallet_legacy_keys_adopted", keys=moved)

    async def close(self) -> None:
        """Release the Redis connections."""
        for task in self.background:
            task.cancel()
        await self.store.close()


def build_deps(settings: Settings) -> WalletDeps:
    """The wallet's dependencies for ``settings`` (call within a running loop)."""
    store = store_for(settings.redis_url, settings.history_dsn)
    metrics = Metrics()
    return WalletDeps(
        app=WalletApp(store, table_services=settings.table_services,
                      tournament_services=settings.tournament_services,
                      conflict_retries=settings.conflict_retries, metrics=metrics),
        store=store,
        protection=ProtectionApp(ProtectionStore(store.client),
                                 retries=settings.conflict_retries),
        verifier=TokenVerifier(settings.auth_keys, audience="wallet"),
        metrics=metrics,
        ledger=LedgerGauge(metrics),
    )
