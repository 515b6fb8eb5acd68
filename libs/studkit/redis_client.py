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

A plain client's pool and connections are redis-py's with two costs of each command taken
out (issue 35; ``bench/bench_store.py --cpu`` measures them): the pool hands out and takes
back an idle connection without its lock, condition and timer when nobody waits for one
(:class:`FastPool`), and a connection sends a command without a task per write when the
socket takes it at once (:class:`_FastSend`). Everything else is redis-py's: the blocking
wait for a full pool, the read timeout, the retry on a lost connection, the tracing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.cluster
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError
from redis.exceptions import TimeoutError as RedisTimeoutError
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


_STOCK_SEND: Final = AbstractConnection.send_packed_command
"""redis-py's own send: while it is the class's, nothing wraps it (a test counting the requests
a service writes does), and :class:`_FastSend` may write its own way."""


class _FastSend(AbstractConnection):
    """A connection that writes a command without a task when the socket takes it.

    redis-py bounds each write by ``socket_timeout`` with ``asyncio.wait_for``, which on
    Python 3.11 makes a task and runs the loop twice for every command, though a write to a
    socket whose buffer has room never waits (``StreamWriter.drain`` returns at once unless
    the transport has paused its writer). This one writes, then waits only when the
    transport is paused, and then within the same ``socket_timeout``
    (``TimeoutError("Timeout writing to socket")`` as redis-py's, the connection closed).
    Anything unusual (not connected, no timeout, a closing transport, redis-py's send wrapped
    by someone) goes redis-py's way."""

    async def send_packed_command(self, command: bytes | str | Iterable[bytes],
                                  check_health: bool = True) -> None:
        writer = self._writer
        timeout = self.socket_timeout
        if writer is None or self._reader is None or not timeout \
                or writer.transport.is_closing() \
                or AbstractConnection.send_packed_command is not _STOCK_SEND:
            return await super().send_packed_command(command, check_health)
        if check_health:
            await self.check_health()  # type: ignore[no-untyped-call]  # a PING when due
            writer = self._writer
            if writer is None or self._reader is None:
                return await super().send_packed_command(command, False)
        if isinstance(command, str):
            command = command.encode()
        try:
            if isinstance(command, bytes):
                writer.write(command)
            else:
                writer.writelines(command)
            if getattr(writer._protocol, "_paused", True):  # type: ignore[attr-defined]
                async with asyncio.timeout(timeout):
                    await writer.drain()
            else:
                await writer.drain()  # returns at once (or raises a lost connection)
        except TimeoutError:
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            number, message = (("UNKNOWN", exc.args[0]) if len(exc.args) == 1
                               else (exc.args[0], exc.args[1]))
            raise RedisConnectionError(
                f"Error {number} while writing to socket. {message}.") from exc
        except BaseException:
            await self.disconnect(nowait=True)
            raise
        return None


class _FastConnection(_FastSend, Connection):
    """A TCP connection (``redis://``) that writes without a task (:class:`_FastSend`)."""


class _FastSSLConnection(_FastSend, SSLConnection):
    """A TLS connection (``rediss://``) that writes without a task (:class:`_FastSend`)."""


class _FastUnixConnection(_FastSend, UnixDomainSocketConnection):
    """A Unix socket connection (``unix://``) that writes without a task."""


_FAST_CONNECTIONS: Final[dict[type[AbstractConnection], type[AbstractConnection]]] = {
    Connection: _FastConnection,
    SSLConnection: _FastSSLConnection,
    UnixDomainSocketConnection: _FastUnixConnection,
}


class FastPool(BlockingConnectionPool):
    """A bounded, blocking pool (redis-py's :class:`BlockingConnectionPool`) whose common
    case costs no lock, condition or timer.

    redis-py's pool takes its condition, starts a timer and waits on the condition for every
    connection it hands out, and takes the condition and its lock again for every one it
    takes back: about a third of a command's client CPU on a fast Redis. When no call waits
    for a connection, nobody holds the pool's locks and an idle connection is there, this
    pool pops it (checked as redis-py checks it: connected, nothing unread) and puts it back
    in plain code, which nothing else can interleave with on one event loop. Otherwise (a
    full pool, waiters, a connection to reconnect or re-authenticate, maintenance) it is
    redis-py's own path: a call waits up to ``timeout`` for a connection, and the waiters
    are served in order and woken on each release."""

    def __init__(self, connection_class: type[AbstractConnection] = Connection,
                 **kwargs: Any) -> None:
        super().__init__(connection_class=_FAST_CONNECTIONS.get(connection_class,
                                                                connection_class),
                         **kwargs)

    def _quiet(self) -> bool:
        """Whether nobody waits for a connection nor holds the pool's locks."""
        condition = self._condition
        return not (self._in_maintenance or condition.locked() or self._lock.locked()
                    or condition._waiters)

    async def get_connection(
        self, command_name: Any = None, *keys: Any, **options: Any
    ) -> AbstractConnection:
        if command_name is not None or keys or options:
            return await super().get_connection(  # type: ignore[no-untyped-call,no-any-return]
                command_name, *keys, **options)
        if not self._available_connections or not self._quiet():
            return await super().get_connection()  # type: ignore[no-untyped-call,no-any-return]
        connection = self._available_connections.pop()
        self._in_use_connections.add(connection)
        try:
            await self.ensure_connection(connection)
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection: AbstractConnection) -> None:
        if (not self._quiet()
                or connection.should_reconnect()  # type: ignore[no-untyped-call]
                or getattr(connection, "_re_auth_token", None) is not None):
            await super().release(connection)
            return
        self._in_use_connections.remove(connection)
        self._available_connections.append(connection)


_STOCK_EXECUTE: Final = Redis.execute_command
"""redis-py's own ``Redis.execute_command``: while it is the class's, nothing (OpenTelemetry's
Redis instrumentation) wraps it, and :class:`TimedRedis` may run a command its lean way."""


class TimedRedis(Redis):
    """A plain client whose every call and pipeline is timed and its failures counted
    (``stud_redis_call_seconds``, ``stud_redis_errors_total``: :mod:`studkit.telemetry`).

    A command runs the way redis-py's ``execute_command`` runs it (a connection from the
    pool, the command sent, its reply read and parsed, the connection closed and the command
    sent again per the connection's ``retry`` on a retryable error, the connection given
    back) in one coroutine of its own, without redis-py's per-command closures and its own
    metrics' hooks (``redis.observability``, which the project does not turn on): about a
    sixth of a command's client CPU. When the class's ``execute_command`` is wrapped
    (tracing is on: OpenTelemetry's Redis instrumentation), for a single-connection client
    and for ``HIMPORT``, a command goes through redis-py's own, so spans are made as
    before."""

    async def execute_command(self, *args: EncodableT, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            if Redis.execute_command is _STOCK_EXECUTE and not self.single_connection_client \
                    and not _is_himport(args[0]):
                reply = await self._run(args, options)
            else:
                reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except BaseException as exc:
            observe_redis(redis_command(args), time.perf_counter() - started, exc)
            raise
        observe_redis(redis_command(args), time.perf_counter() - started)
        return reply

    async def _run(self, args: tuple[EncodableT, ...], options: dict[str, Any]) -> Any:
        """One command on a connection of the pool, retried as redis-py's ``Retry`` does
        (``Retry.call_with_retry``: the same errors, count, backoff and closing of the
        connection before each new attempt)."""
        pool = self.connection_pool
        name = args[0]
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            retry = conn.retry
            failures = 0
            while True:
                try:
                    await conn.send_command(*args)
                    return await self.parse_response(conn, name, **options)  # type: ignore[arg-type]
                except retry._supported_errors as error:
                    failures += 1
                    if failures == 1:
                        retry._backoff.reset()
                    await conn.disconnect(error=error, failure_count=failures)
                    if retry._retries >= 0 and failures > retry._retries:
                        raise
                    backoff = retry._backoff.compute(failures)
                    if backoff > 0:
                        await asyncio.sleep(backoff)
        finally:
            await pool.release(conn)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None
                 ) -> Pipeline:
        return _TimedPipeline(self.connection_pool, self.response_callbacks, transaction,
                              shard_hint)


def _is_himport(name: EncodableT) -> bool:
    """Whether a command is ``HIMPORT`` (redis-py sends its ``SET`` its own way)."""
    if isinstance(name, bytes):
        return name[:7].upper() == b"HIMPORT"
    return isinstance(name, str) and name[:7].upper() == "HIMPORT"


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
    return TimedRedis.from_pool(FastPool.from_url(url, timeout=pool_wait_s, **options))


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
