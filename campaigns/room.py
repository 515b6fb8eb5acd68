"""The campaigns' one room: a Redis server of its own (AOF, ``appendfsync always``, on a port
it can be restarted on), the dealer, the wallet and ``replicas`` table replicas as processes
(:mod:`studtest.processes`), the :class:`~campaigns.router.Router` over the replicas, and the
steps every campaign shares: open tables and seat funded players, stop the play and let the
hands in progress end, wait until every escrow equals its stack, count the chips.

Every wait has a deadline, past which it raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import grpc
import redis.asyncio as aredis

from campaigns.bot import OPERATOR, Bot, Choose, Tally, any_action
from campaigns.router import Router
from rules import TableConfig
from stud.v1 import dealer_pb2_grpc, wallet_pb2_grpc
from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit import keys as studkeys
from studkit.auth import Principal, Role, TokenBook
from studkit.commandwindow import new_id
from studkit.mapping import config_to_proto
from studtest.processes import RoomProcesses, ServiceProcess, restartable_port
from studtest.table import fast_settings
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer

DEPOSIT: Final = 1_000_000
T = TypeVar("T")


@dataclass
class CampaignRoom:
    """The running room and the clients every campaign uses."""

    procs: RoomProcesses
    redis: RedisServer
    keys: DevKeys
    tokens: TokenBook
    router: Router
    wallet: Any
    """The wallet's stub."""
    dealer: Any
    """The dealer's stub."""
    admin: aredis.Redis
    """Redis as its admin (what the campaign reads to check)."""
    players: list[str] = field(default_factory=list)
    deposits: int = 0

    @property
    def tables(self) -> list[ServiceProcess]:
        return self.procs.tables

    def md(self, who: Principal = OPERATOR) -> tuple[tuple[str, str]]:
        return self.tokens.metadata(who)

    def bots(self, table_ids: Sequence[str], tally: Tally, rng: random.Random,
             choose: Choose = any_action, think: tuple[float, float] = (0.0, 0.0)
             ) -> list[Bot]:
        """One bot per table, each with its own random source drawn from ``rng``."""
        return [Bot(self.router, t, tally, random.Random(rng.random()), choose, think)
                for t in table_ids]

    async def open_tables(self, table_ids: Sequence[str], players: int = 3,
                          buy_in: int = 20_000, deposit: int = DEPOSIT,
                          config: Callable[[int], TableConfig] = lambda _i: TableConfig(),
                          settings: pb.TableSettings | None = None) -> None:
        """Open each table and seat ``players`` funded players (``<table>-p<seat>``)."""
        settings = settings or fast_settings(action_time_s=5, time_bank_s=5,
                                             outage_limit_s=10)
        for i, table_id in enumerate(table_ids):
            await self.router.call(table_id, "OpenTable", pb.OpenTableRequest(
                table_id=table_id, command_id=f"open-{table_id}",
                config=config_to_proto(config(i)), settings=settings), OPERATOR)
            for seat in range(1, players + 1):
                name = f"{table_id}-p{seat}"
                await retry_unavailable(functools.partial(
                    self.wallet.CreateAccount, wpb.CreateAccountRequest(player_id=name),
                    metadata=self.md(), timeout=10))
                await retry_unavailable(functools.partial(
                    self.wallet.Deposit, wpb.DepositRequest(
                        player_id=name, amount=deposit, command_id=f"dep-{name}"),
                    metadata=self.md(), timeout=10))
                self.players.append(name)
                self.deposits += deposit
                await self.router.call(table_id, "SitDown", pb.SitDownRequest(
                    table_id=table_id, seat=seat, buy_in=buy_in, command_id=new_id(f"sit-{name}")),
                    Principal(Role.PLAYER, name))

    async def hands_started(self, table_ids: Sequence[str]) -> int:
        """Hands started at the tables, by their views."""
        views = [await self.router.view(t, OPERATOR) for t in table_ids]
        return sum(v.hands_started for v in views)

    async def finish(self, table_ids: Sequence[str], tally: Tally,
                     limit_s: float = 90.0) -> dict[str, pb.TableView]:
        """Sit everyone out and let bots play the hands in progress to their end; the final
        views. Raises if a hand is still in progress after ``limit_s``."""
        for table_id in table_ids:
            view = await self.router.view(table_id, OPERATOR)
            for seat in view.seats:
                try:
                    await self.router.call(table_id, "SitOut", pb.SitOutRequest(
                        table_id=table_id, seat=seat.seat,
                        command_id=new_id(f"end-{seat.player_id}")),
                        Principal(Role.PLAYER, seat.player_id))
                except grpc.aio.AioRpcError as exc:
                    if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                        raise  # sitting out already is fine; anything else is not
        stop = asyncio.Event()
        finishers = [asyncio.create_task(b.run(stop))
                     for b in self.bots(table_ids, tally, random.Random(1))]
        try:
            views = await wait_until(
                lambda: self.views(table_ids),
                lambda vs: all(not v.HasField("hand") or v.hand.phase == pb.HAND_PHASE_COMPLETE
                               for v in vs.values()),
                limit_s, "hands still in progress")
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*finishers), 30)
        return views

    async def views(self, table_ids: Sequence[str]) -> dict[str, pb.TableView]:
        return {t: await self.router.view(t, OPERATOR) for t in table_ids}

    async def settled(self, table_ids: Sequence[str], limit_s: float = 60.0) -> None:
        """Wait until no hand is in progress and every seat's escrow equals its stack at
        every table (the last settlements have landed)."""
        async def pending() -> list[str]:
            out = []
            for table_id in table_ids:
                view = await self.router.view(table_id, OPERATOR)
                escrows = await retry_unavailable(functools.partial(
                    self.wallet.Reconcile, wpb.ReconcileRequest(table_id=table_id),
                    metadata=self.md(), timeout=10))
                held = {s.seat: s.balance for s in escrows.seats if s.balance}
                in_hand = view.HasField("hand") and view.hand.phase != pb.HAND_PHASE_COMPLETE
                if in_hand or held != {s.seat: s.stack for s in view.seats if s.stack}:
                    out.append(table_id)
            return out

        await wait_until(pending, lambda left: not left, limit_s, "tables not settled")

    async def chips_lost(self, table_ids: Sequence[str]) -> int:
        """Deposits minus what the players, the seats and the house hold (0: nothing
        lost)."""
        balances = 0
        for name in self.players:
            reply = await self.wallet.GetBalance(wpb.GetBalanceRequest(
                account=wpb.AccountRef(player_id=name)), metadata=self.md(), timeout=10)
            balances += reply.balance
        escrows = 0
        for table_id in table_ids:
            reply = await self.wallet.Reconcile(wpb.ReconcileRequest(
                table_id=table_id), metadata=self.md(), timeout=10)
            escrows += reply.total
        house = (await self.wallet.GetBalance(wpb.GetBalanceRequest(
            account=wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE)), metadata=self.md(),
            timeout=10)).balance
        return int(self.deposits - (balances + escrows + house))

    async def owners(self, table_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """Each table's owner record: (replica id, epoch)."""
        out = {}
        for table_id in table_ids:
            replica, epoch = await self.admin.hmget(studkeys.table_owner(table_id),
                                                    ["replica", "epoch"])
            text = replica.decode() if isinstance(replica, bytes) else (replica or "")
            out[table_id] = (text, int(epoch or 0))
        return out

    async def wait_taken_over(self, before: dict[str, tuple[str, int]], gone: str,
                              limit_s: float = 30.0) -> float:
        """Seconds until every table ``gone`` owned in ``before`` has a new owner (a higher
        epoch)."""
        started = time.monotonic()
        victims = {t: epoch for t, (owner, epoch) in before.items() if owner == gone}
        await wait_until(
            lambda: self.owners(list(victims)),
            lambda now: all(now[t][0] != gone and now[t][1] > e for t, e in victims.items()),
            limit_s, f"tables of {gone} not taken over", every_s=0.05)
        return time.monotonic() - started


async def wait_until(look: Callable[[], Awaitable[T]], done: Callable[[T], bool],
                     limit_s: float, what: str, every_s: float = 0.2) -> T:
    """``look()`` until ``done`` says so; raises ``AssertionError(what)`` past ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        seen = await look()
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} after {limit_s:.0f}s: {seen!r}"[:2000])
        await asyncio.sleep(every_s)


async def retry_unavailable(call: Callable[[], Awaitable[T]], limit_s: float = 60.0) -> T:
    """``call()`` again while the callee is restarting."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def campaign_room(work: Path, replicas: int = 3, lease_ms: int | None = 1500,
                        metrics: bool = False, watches_per_connection: int | None = None
                        ) -> AsyncIterator[CampaignRoom]:
    """The room under ``work`` (its Redis data and the services' logs), started, and stopped
    on exit whatever happened (frozen processes let go on first). ``watches_per_connection``
    lifts the table's limit of open watches on one connection, for a campaign whose router
    opens more than the default's 16 over its one connection to a replica."""
    keys = DevKeys.generate()
    passwords = {n: uuid.uuid4().hex for n in ("table", "dealer", "wallet", "auditor",
                                                  "tournament")}
    redis = RedisServer(data_dir=work / "redis", passwords=passwords, port=restartable_port())
    redis.start()
    table_env = {"TABLE_LEASE_MS": str(lease_ms)} if lease_ms is not None else {}
    if watches_per_connection is not None:
        table_env["TABLE_WATCHES_PER_CONNECTION"] = str(watches_per_connection)
    procs = RoomProcesses(redis.url_for, keys, work / "logs", table_env=table_env,
                          replicas=replicas, metrics=metrics)
    tokens = TokenBook(keys)
    router = Router([p.target for p in procs.tables], tokens)
    admin = aredis.Redis.from_url(redis.url)
    try:
        await procs.start()
        async with grpc.aio.insecure_channel(procs.wallet.target) as wallet_channel, \
                grpc.aio.insecure_channel(procs.dealer.target) as dealer_channel:
            yield CampaignRoom(
                procs=procs, redis=redis, keys=keys, tokens=tokens, router=router,
                wallet=wallet_pb2_grpc.WalletServiceStub(  # type: ignore[no-untyped-call]
                    wallet_channel),
                dealer=dealer_pb2_grpc.DealerServiceStub(  # type: ignore[no-untyped-call]
                    dealer_channel),
                admin=admin)
    finally:
        await router.close()
        await admin.aclose()
        procs.stop()
        redis.stop()
