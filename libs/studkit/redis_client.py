"""The one way the project opens a Redis connection: :func:`connect`.

A URL whose scheme is ``redis+cluster://`` (or ``rediss+cluster://`` for TLS) gives a Redis
Cluster client (:class:`redis.asyncio.cluster.RedisCluster`): the host and port are any one
node, the client discovers the others and follows ``MOVED``/``ASK`` redirections. Any other
URL (``redis://``, ``rediss://``, ``unix://``) gives a plain client. The scheme travels with
``REDIS_URL`` to every service and tool, so one setting switches a whole deployment; see
``docs/redis.md`` for what stays in one slot and what is global.

Both clients offer every command the project uses: single-key commands, Lua scripts whose
keys share one hash tag (so one slot), pipelines, and ``MULTI``/``EXEC`` pipelines whose keys
share one slot. A transaction across slots raises ``CrossSlotTransactionError`` on a
cluster, which is why every multi-key write of the project is a single-slot script.

A plain client's pool is bounded and *blocking* (:data:`POOL_SIZE` connections, redis-py's
own default, unless ``max_connections`` says otherwise): a call that finds every connection
in use waits up to :data:`POOL_WAIT_S` for one to come back, instead of failing at once with
"Too many connections" (issue 17, F2: a burst of more calls than connections must queue,
never fail). A cluster client waits the same way for each node's pool
(:class:`ClusterClient`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.cluster
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import MaxConnectionsError
from redis.typing import EncodableT

from studkit.telemetry import observe_redis, redis_command

Client: TypeAlias = Redis | RedisCluster
"""What :func:`connect` returns; annotate with this, not with one of the two."""
SyncClient: TypeAlias = redis.Redis | redis.cluster.RedisCluster
"""What :func:`connect_sync` returns."""

POOL_SIZE: Final = 100
"""Connections per pool (per node on a cluster) when ``max_connections`` is not given:
redis-py's default."""
POOL_WAIT_S: Final = 5.0
"""How long a call waits for a free connection of a full pool before it fails
(``ConnectionError("No connection available.")``, reported as UNAVAILABLE like any lost
connection): long enough for a burst to drain, well under the clients' deadlines."""

CLUSTER_SCHEMES: Final = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
"""Cluster URL scheme -> the scheme of the node URL redis-py parses."""


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` asks for a Redis Cluster client.

    >>> is_cluster_url("redis+cluster://u:p@10.0.0.1:7000/0")
    True
    >>> is_cluster_url("redis://127.0.0.1:6379/0")
    False
    """
    return urlsplit(url).scheme.lower() in CLUSTER_SCHEMES


def node_url(url: str) -> str:
    """``url`` with a plain scheme: the URL of the one node a cluster URL names (the same URL
    for a non-cluster one).

    >>> node_url("rediss+cluster://u:p@h:7000/0")
    'rediss://u:p@h:7000/0'
    """
    parts = urlsplit(url)
    scheme = CLUSTER_SCHEMES.get(parts.scheme.lower())
    return url if scheme is None else urlunsplit(parts._replace(scheme=scheme))


def cluster_url(url: str) -> str:
    """The cluster form of a ``redis://`` or ``rediss://`` node URL (unchanged if already).

    >>> cluster_url("redis://u:p@127.0.0.1:7000/0")
    'redis+cluster://u:p@127.0.0.1:7000/0'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in CLUSTER_SCHEMES:
        return url
    if scheme not in ("redis", "rediss"):
        raise ValueError(f"a Redis Cluster is reached over redis:// or rediss://, not {scheme}")
    return urlunsplit(parts._replace(scheme=f"{scheme}+cluster"))


class ClusterClient(RedisCluster):
    """redis-py's asyncio :class:`RedisCluster`, initialized (slot map read, nodes created)
    before its first command runs, and waiting for a connection when its pools are full.

    redis-py 8.1 initializes lazily inside ``execute_command``, after it has resolved the
    command's routing on the not yet initialized client; concurrent first commands on a new
    client then sporadically fail (``AttributeError: 'NoneType' object has no attribute
    'writelines'``: a connection closed under another task's handshake). A burst of watches
    or lookups right after a service starts is exactly that, so every command first waits for
    the (locked, once-only) initialization.

    Each node's pool of ``max_connections`` refuses a call at once when it is full
    (``MaxConnectionsError``; redis-py has no blocking pool for a cluster). So at most
    ``max_connections`` commands and pipelines of this client run at a time, the others
    waiting up to ``pool_wait_s`` for their turn: each of them holds at most one connection
    of any node, so no node's pool is ever found full.
    """

    def __init__(self, *args: Any, pool_wait_s: float | None = POOL_WAIT_S,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool_wait_s = pool_wait_s
        self.turns = asyncio.Semaphore(kwargs.get("max_connections") or POOL_SIZE)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """A turn to use the nodes' connections (waiting up to ``pool_wait_s``)."""
        try:
            async with asyncio.timeout(self.pool_wait_s):
                await self.turns.acquire()
        except TimeoutError as exc:
            raise MaxConnectionsError("No connection available.") from exc
        try:
            yield
        finally:
            self.turns.release()

    async def execute_command(self, *args: EncodableT, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            async with self.turn():
                if self._initialize:
                    await self.initialize()
                reply = await super().execute_command(*args, **kwargs)
        except BaseException as exc:
            observe_redis(redis_command(args), time.perf_counter() - started, exc)
            raise
        observe_redis(redis_command(args), time.perf_counter() - started)
        return reply

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None
                 ) -> ClusterPipeline:
        if shard_hint:
            return super().pipeline(transaction, shard_hint)  # refused as redis-py does
        return _TurnPipeline(self, transaction)  # type: ignore[abstract]


class _TurnPipeline(ClusterPipeline):
    """A cluster pipeline that runs in one of its client's turns."""

    def __init__(self, client: ClusterClient, transaction: Any | None = None) -> None:
        super().__init__(client, transaction)
        self._turns = client

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True
                      ) -> list[Any]:
        started = time.perf_counter()
        try:
            async with self._turns.turn():
                if self._turns._initialize:
                    await self._turns.initialize()
                reply = await super().execute(raise_on_error, allow_redirections)
        except BaseException as exc:
            observe_redis("PIPELINE", time.perf_counter() - started, exc)
            raise
        observe_redis("PIPELINE", time.perf_counter() - started)
        return reply


class TimedRedis(Redis):
    """A plain client whose every call and pipeline is timed and its failures counted
    (``stud_redis_call_seconds``, ``stud_redis_errors_total``: :mod:`studkit.telemetry`)."""

    async def execute_command(self, *args: EncodableT, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except BaseException as exc:
            observe_redis(redis_command(args), time.perf_counter() - started, exc)
            raise
        observe_redis(redis_command(args), time.perf_counter() - started)
        return reply

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None
                 ) -> Pipeline:
        return _TimedPipeline(self.connection_pool, self.response_callbacks, transaction,
                              shard_hint)


class _TimedPipeline(Pipeline):
    """A plain client's pipeline, timed as one ``PIPELINE`` call."""

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        started = time.perf_counter()
        try:
            reply = await super().execute(raise_on_error)
        except BaseException as exc:
            observe_redis("PIPELINE", time.perf_counter() - started, exc)
            raise
        observe_redis("PIPELINE", time.perf_counter() - started)
        return reply


def connect(url: str, *, pool_wait_s: float | None = POOL_WAIT_S, **kwargs: Any) -> Client:
    """A new asyncio client for ``url``: a :class:`RedisCluster` for a ``redis+cluster://``
    or ``rediss+cluster://`` URL, else a :class:`Redis`. ``kwargs`` are the client's options
    (``decode_responses``, ``socket_timeout``, ``max_connections``, ...); a None option is
    left to the client's default (for a cluster, ``max_connections`` is per node).

    A call that finds the pool full waits up to ``pool_wait_s`` for a connection (None: as
    long as it takes), then fails with ``redis.ConnectionError``."""
    options = {k: v for k, v in kwargs.items() if v is not None or k == "socket_timeout"}
    if is_cluster_url(url):
        return ClusterClient.from_url(node_url(url), pool_wait_s=pool_wait_s, **options)
    options.setdefault("retry", reconnecting())
    options.setdefault("retry_on_error", [redis.ConnectionError, redis.TimeoutError])
    options.setdefault("max_connections", POOL_SIZE)
    return TimedRedis.from_pool(BlockingConnectionPool.from_url(url, timeout=pool_wait_s,
                                                           **options))


def reconnecting() -> AsyncRetry:
    """How a plain client rides out a Redis restart: a command that meets a dropped
    connection is sent again on a fresh one, a few times with backoff (about 1.5 s in all).
    Safe here because every write of the project is idempotent (command ids, idempotency
    keys, versions checked by the scripts): a write that was applied before the connection
    dropped is answered as a replay the second time. Past that, callers see UNAVAILABLE
    (``store_unavailable``) and retry with the same key."""
    return AsyncRetry(ExponentialBackoff(cap=0.5, base=0.05), retries=6)


def connect_sync(url: str, **kwargs: Any) -> SyncClient:
    """The blocking twin of :func:`connect` (scripts, tools and test fixtures)."""
    options = {k: v for k, v in kwargs.items() if v is not None or k == "socket_timeout"}
    if is_cluster_url(url):
        return redis.cluster.RedisCluster.from_url(node_url(url), **options)
    return redis.Redis.from_url(url, **options)


def is_cluster(client: Client) -> bool:
    """Whether ``client`` talks to a Redis Cluster."""
    return isinstance(client, RedisCluster)
