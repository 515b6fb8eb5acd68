"""Dependencies wired explicitly, in one function: stores, the public table view, the app, the
token verifier and the metrics registry (gRPC and domain counters)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dealer.app import DealerApp
from dealer.config import Settings
from dealer.dealing import HONEST, Dealing
from dealer.store import DealerStore, TableReader
from dealer.tables import PublicTables
from studkit.auth import TokenVerifier
from studkit.mapping import event_from_envelope
from studkit.metrics import Metrics
from studkit.store import EventStore
from studkit.tailer import StreamTailer


@dataclass(frozen=True, slots=True)
class DealerDeps:
    """Everything the server needs."""

    app: DealerApp
    store: DealerStore
    events: EventStore
    tailer: StreamTailer
    verifier: TokenVerifier
    metrics: Metrics = field(default_factory=Metrics)
    watchers: DealerStore | None = None
    """The tailer's own client (a bounded pool apart from ``store``'s), closed with the rest."""

    async def close(self) -> None:
        """Stop the stream readers and release the Redis connections."""
        await self.tailer.aclose()
        if self.watchers is not None:
            await self.watchers.close()
        await self.store.close()


def build_deps(settings: Settings, dealing: Dealing = HONEST) -> DealerDeps:
    """The dealer's dependencies for ``settings`` (call within a running loop). One Redis
    client, the dealer ACL user's, serves the deck store and the reads of tables' streams; a
    second one, on its own bounded pool, tails the streams for ``WatchMyCards``. ``dealing``
    is honest; ``python -m dealer`` passes nothing else (only the test support's rigged
    dealer does, in process or as ``python -m studtest.rigged_dealer``)."""
    store = DealerStore.from_url(settings.redis_url)
    # Watchers block in XREAD, one connection per table watched: on a pool of their own they
    # can never take the connections that StartHand and Deal need.
    watchers = DealerStore.from_url(settings.redis_url,
                                    max_connections=settings.watch_redis_connections)
    events = EventStore(store.client)
    tables = PublicTables(events, event_from_envelope, tail=TableReader(events).tail)
    metrics = Metrics()
    app = DealerApp(store, tables, table_services=settings.table_services,
                    conflict_retries=settings.conflict_retries, metrics=metrics,
                    seed_wait_ms=settings.seed_wait_ms, dealing=dealing)
    return DealerDeps(app=app, store=store, events=events, tailer=StreamTailer(watchers.client),
                      watchers=watchers,
                      verifier=TokenVerifier(settings.auth_keys, audience="dealer"),
                      metrics=metrics)
