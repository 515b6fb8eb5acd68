"""Test support: the whole room in one process — a real dealer, wallet and table service, each
a real ``grpc.aio`` server on a free port over one real Redis (each through its own ACL user
when the session runs its own server) — and :class:`TableClient`, a typed client that calls
the table as any principal. Bots written for the tests use only this public API.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import grpc

from dealer.config import Settings as DealerSettings
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import Principal, Role, TokenBook
from studkit.commandwindow import new_id
from studtest.dealer import RunningDealer, running_dealer
from studtest.redis import TestRedis
from studtest.rigged_dealer import RiggedDealing
from studtest.wallet import RunningWallet, running_wallet
from studtools.devkeys import DevKeys
from table.bootstrap import TableDeps, build_deps
from table.config import Settings
from table.server import create_server
from wallet.config import Settings as WalletSettings

if TYPE_CHECKING:
    import pytest

OPERATOR: Final = Principal(Role.OPERATOR, "ops")
AUDITOR: Final = Principal(Role.AUDITOR, "audit")
TOURNAMENT: Final = Principal(Role.SERVICE, "tournament")
"""The tournament service (DESIGN 5c): the only caller of the tournament-table RPCs."""
TIMEOUT_S: Final = 10.0
_ids = itertools.count(1)


def player(name: str) -> Principal:
    """The principal of player ``name``."""
    return Principal(Role.PLAYER, name)


def fast_settings(**overrides: Any) -> pb.TableSettings:
    """Room settings for tests: no delay between hands, a generous clock."""
    values: dict[str, Any] = dict(action_time_s=30, time_bank_s=30, buy_in_min=1,
                                  buy_in_max=1_000_000, next_hand_delay_ms=0,
                                  next_hand_delay_set=True)
    values.update(overrides)
    return pb.TableSettings(**values)


@dataclass
class TableClient:
    """The table stub plus tokens for any principal."""

    stub: pb_grpc.TableServiceStub
    tokens: TokenBook

    def md(self, who: Principal) -> tuple[tuple[str, str], ...]:
        return tuple(self.tokens.metadata(who))

    async def call(self, method: str, request: Any, who: Principal) -> Any:
        """Call ``method`` as ``who`` (a timed command id, :func:`studkit.commandwindow.new_id`,
        is filled in when the request has one and it is empty)."""
        if hasattr(request, "command_id") and not request.command_id:
            request.command_id = new_id()
        return await getattr(self.stub, method)(request, metadata=self.md(who),
                                                timeout=TIMEOUT_S)

    async def open_table(self, table_id: str | None = None, config: Any = None,
                         settings: pb.TableSettings | None = None) -> str:
        from rules import TableConfig
        from studkit.mapping import config_to_proto
        table_id = table_id or f"t-{next(_ids)}-{uuid.uuid4().hex[:6]}"
        await self.call("OpenTable", pb.OpenTableRequest(
            table_id=table_id, config=config_to_proto(config or TableConfig()),
            settings=settings or fast_settings()), OPERATOR)
        return table_id

    async def view(self, table_id: str, who: Principal = OPERATOR) -> pb.TableView:
        reply: pb.TableView = await self.stub.GetTable(
            pb.GetTableRequest(table_id=table_id), metadata=self.md(who), timeout=TIMEOUT_S)
        return reply

    async def wait_for(self, table_id: str, condition: Callable[[pb.TableView], bool],
                       who: Principal = OPERATOR, timeout: float = 20.0) -> pb.TableView:
        """Poll the view until ``condition`` holds."""
        async with asyncio.timeout(timeout):
            while True:
                view = await self.view(table_id, who)
                if condition(view):
                    return view
                await asyncio.sleep(0.02)


@dataclass
class Room:
    """The running room: dealer, wallet, table and clients."""

    dealer: RunningDealer
    wallet: RunningWallet
    table_deps: TableDeps
    table_port: int
    client: TableClient
    keys: DevKeys

    async def fund(self, name: str, amount: int = 1_000_000) -> None:
        """Open ``name``'s wallet account with ``amount``."""
        await self.wallet.client.create_account(name)
        await self.wallet.client.deposit(name, amount, f"dep-{name}-{uuid.uuid4().hex[:8]}")


def _url(redis_server: TestRedis, admin_url: str, user: str) -> str:
    return redis_server.server.url_for(user) if redis_server.server is not None else admin_url


@contextlib.asynccontextmanager
async def running_table(settings: Settings) -> AsyncIterator[tuple[TableDeps, int]]:
    """A table service for ``settings`` (``addr="127.0.0.1:0"``), started and stopped."""
    deps = build_deps(settings)
    server, port = create_server(settings, deps)
    await server.start()
    await deps.start()
    try:
        yield deps, port
    finally:
        await server.stop(None)
        await deps.close()


def table_settings(redis_server: TestRedis, admin_url: str, keys: DevKeys, dealer_port: int,
                   wallet_port: int, **overrides: Any) -> Settings:
    """Settings of an in-process table service of the room."""
    values: dict[str, Any] = dict(
        addr="127.0.0.1:0", redis_url=_url(redis_server, admin_url, "table"),
        dealer_target=f"127.0.0.1:{dealer_port}", wallet_target=f"127.0.0.1:{wallet_port}",
        auth_keys=keys.key_set(), service_key=keys.service_key("table"), metrics_port=0,
        call_deadline_s=2.0)
    values.update(overrides)
    return Settings(**values)


@contextlib.asynccontextmanager
async def running_room(redis_server: TestRedis, admin_url: str, keys: DevKeys,
                       dealer_overrides: dict[str, Any] | None = None,
                       rig: RiggedDealing | None = None,
                       **table_overrides: Any) -> AsyncIterator[Room]:
    """Dealer, wallet and table, in process, over the session's Redis; ``rig``: a rigged
    dealer (stacked decks, a dishonest dealer: :mod:`studtest.rigged_dealer`)."""
    dealer_settings = DealerSettings(addr="127.0.0.1:0", auth_keys=keys.key_set(),
                                     redis_url=_url(redis_server, admin_url, "dealer"),
                                     **(dealer_overrides or {}))
    wallet_settings = WalletSettings(addr="127.0.0.1:0", auth_keys=keys.key_set(),
                                     redis_url=_url(redis_server, admin_url, "wallet"))
    async with running_dealer(dealer_settings, keys, rig) as dealer, \
            running_wallet(wallet_settings, keys) as wallet:
        settings = table_settings(redis_server, admin_url, keys, dealer.port, wallet.port,
                                  **table_overrides)
        async with running_table(settings) as (deps, port), \
                grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
            yield Room(dealer=dealer, wallet=wallet, table_deps=deps, table_port=port,
                       client=TableClient(stub, TokenBook(keys)), keys=keys)


# --- a random-legal bot over the public API -------------------------------------------------

_RPC = {
    1: ("PostBringIn", pb.PostBringInRequest),
    2: ("Complete", pb.CompleteRequest),
    3: ("Bet", pb.BetRequest),
    4: ("Raise", pb.RaiseRequest),
    5: ("Call", pb.CallRequest),
    6: ("Check", pb.CheckRequest),
    7: ("Fold", pb.FoldRequest),
}


async def act_once(client: TableClient, table_id: str, view: pb.TableView,
                   choose: Callable[[list[Any]], Any]) -> bool:
    """If someone is to act in ``view``, act for them with a legal action ``choose`` picks
    (the table tells each viewer what is legal); True if an action was accepted."""
    hand = view.hand
    if not view.HasField("hand") or hand.phase != pb.HAND_PHASE_BETTING or not hand.to_act:
        return False
    seat = next((s for s in view.seats if s.seat == hand.to_act), None)
    if seat is None or seat.leaving or not hand.legal_actions.actions:
        return False  # a leaving seat is checked or folded by the table itself, at once
    holder = seat.player_id
    action = choose(list(hand.legal_actions.actions))
    method, request_type = _RPC[action.kind]
    request = request_type(table_id=table_id, seat=hand.to_act,
                           expected_sequence=view.version)
    if method in ("Complete", "Bet", "Raise"):
        request.to = action.to
    try:
        await client.call(method, request, player(holder))
    except grpc.aio.AioRpcError as exc:
        if exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
            return False  # the table moved on (stale) or the clock acted first
        if exc.code() is grpc.StatusCode.PERMISSION_DENIED:
            # The seat is checked for its holder before the view's version: a seat stood up
            # since the view (its leave, asked during the hand, done when the hand ended) is
            # "not yours". Anything else denied is a failure.
            now = await client.view(table_id)
            if all(s.player_id != holder for s in now.seats if s.seat == request.seat):
                return False
        raise
    return True


async def play_until(client: TableClient, table_id: str, hands: int,
                     choose: Callable[[list[Any]], Any], timeout: float = 60.0) -> pb.TableView:
    """Act for whoever is to act until ``hands`` hands have been completed and settled."""
    async with asyncio.timeout(timeout):
        while True:
            view = await client.view(table_id)
            done = view.hands_started > hands or (
                view.hands_started == hands and view.HasField("hand")
                and view.hand.phase == pb.HAND_PHASE_COMPLETE)
            if done:
                return view
            if not await act_once(client, table_id, view, choose):
                await asyncio.sleep(0.01)


def slow_watch(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.2) -> None:
    """Every watch's batches each ``seconds`` late (``TableApp.watch_batches``, which
    ``WatchTable`` and ``Play`` read): a reply is ready before the records written before
    its action have left."""
    from table.app import TableApp

    original = TableApp.watch_batches

    async def late(self: TableApp, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for batch in original(self, *args, **kwargs):
            await asyncio.sleep(seconds)
            yield batch

    monkeypatch.setattr(TableApp, "watch_batches", late)
