"""``make failover``: three table-service replicas (separate processes) over one Redis, with
the dealer and the wallet, while bots play through any replica (following ``not_owner``
redirects); one replica is killed with SIGKILL mid-hand, one is frozen (SIGSTOP) until its
tables were taken over and then let go on (SIGCONT), and all three are restarted one at a
time (a rolling restart). Afterwards nothing may be lost or written twice:

- every command a bot got an answer for is in its table's stream, once (by command id);
- each table's stream is gapless and its events fold to the stacks the table shows;
- chips: deposits == player balances + escrows + house;
- a frozen former owner appended nothing after its tables were taken over (its attempts are
  refused by the fence: counted from its log).

Last line: ``tables=… takeovers=… max_takeover_s=… lost_events=0 duplicate_events=0
chips_lost=0 stale_appends_refused=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio as aredis

from rules import TableConfig, fold
from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from stud.v1 import wallet_pb2 as wpb
from studkit import keys as studkeys
from studkit.auth import DevKeys, Principal, Role, TokenBook
from studkit.grpc_server import rpc_error_info, rpc_error_reason
from studkit.mapping import config_to_proto, event_from_envelope
from studkit.redis_server import RedisServer
from studkit.store import EventStore
from table.processes import CHANNEL_OPTIONS, RoomProcesses, ServiceProcess, restartable_port
from table.testing import _RPC, fast_settings

OPERATOR = Principal(Role.OPERATOR, "ops")
DEPOSIT = 1_000_000
LEASE_MS = 1500


@dataclass
class Report:
    tables: int = 0
    takeovers: int = 0
    max_takeover_s: float = 0.0
    lost_events: int = 0
    duplicate_events: int = 0
    chips_lost: int = 0
    stale_appends_refused: int = 0
    actions: int = 0
    acknowledged: dict[str, set[str]] = field(default_factory=dict)

    def line(self) -> str:
        return (f"tables={self.tables} takeovers={self.takeovers} "
                f"max_takeover_s={self.max_takeover_s:.2f} lost_events={self.lost_events} "
                f"duplicate_events={self.duplicate_events} chips_lost={self.chips_lost} "
                f"stale_appends_refused={self.stale_appends_refused}")


class Router:
    """Calls any replica and follows ``not_owner`` redirects; retries while tables change
    hands (UNAVAILABLE, a not-yet-taken table)."""

    def __init__(self, addresses: list[str], tokens: TokenBook) -> None:
        self.tokens = tokens
        self.channels = {a: grpc.aio.insecure_channel(a, options=CHANNEL_OPTIONS)
                         for a in addresses}
        self.stubs = {a: pb_grpc.TableServiceStub(c)  # type: ignore[no-untyped-call]
                      for a, c in self.channels.items()}
        self.home: dict[str, str] = {}

    async def call(self, table_id: str, method: str, request: Any, who: Principal,
                   limit_s: float = 60.0) -> Any:
        deadline = time.monotonic() + limit_s
        addresses = list(self.stubs)
        address = self.home.get(table_id, addresses[0])
        while True:
            try:
                reply = await getattr(self.stubs[address], method)(
                    request, metadata=self.tokens.metadata(who), timeout=5)
                self.home[table_id] = address
                return reply
            except grpc.aio.AioRpcError as exc:
                reason = rpc_error_reason(exc)
                info = rpc_error_info(exc)
                owner = info.metadata.get("owner", "") if info is not None else ""
                if reason == "not_owner" and owner in self.stubs and owner != address:
                    address = owner
                    continue
                retry = exc.code() in (grpc.StatusCode.UNAVAILABLE,
                                       grpc.StatusCode.DEADLINE_EXCEEDED,
                                       grpc.StatusCode.CANCELLED) or reason == "not_owner"
                if not retry or time.monotonic() > deadline:
                    raise
                address = random.choice(addresses)
                await asyncio.sleep(0.1)

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()


async def bot(router: Router, table_id: str, report: Report, stop: asyncio.Event,
              rng: random.Random) -> None:
    """Act for whoever is to act at ``table_id`` until ``stop``."""
    acknowledged = report.acknowledged.setdefault(table_id, set())
    while not stop.is_set():
        try:
            view: pb.TableView = await router.call(
                table_id, "GetTable", pb.GetTableRequest(table_id=table_id), OPERATOR)
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.2)
            continue
        hand = view.hand
        if hand.phase != pb.HAND_PHASE_BETTING or not hand.to_act \
                or not hand.legal_actions.actions:
            await asyncio.sleep(0.02)
            continue
        holder = next(s.player_id for s in view.seats if s.seat == hand.to_act)
        action = rng.choice(list(hand.legal_actions.actions))
        method, request_type = _RPC[action.kind]
        command_id = uuid.uuid4().hex
        request = request_type(table_id=table_id, seat=hand.to_act, command_id=command_id,
                               expected_sequence=view.version)
        if method in ("Complete", "Bet", "Raise"):
            request.to = action.to
        try:
            await router.call(table_id, method, request, Principal(Role.PLAYER, holder))
        except grpc.aio.AioRpcError:
            continue  # stale, or the clock acted first: look again
        acknowledged.add(f"c:player:{holder}:{command_id}")
        report.actions += 1


async def seat_players(router: Router, wallet: Any, tokens: TokenBook, table_ids: list[str],
                       deposit: int) -> list[str]:
    """Open each table, fund three players and seat them; the players."""
    players: list[str] = []
    for table_id in table_ids:
        await router.call(table_id, "OpenTable", pb.OpenTableRequest(
            table_id=table_id, command_id=f"open-{table_id}",
            config=config_to_proto(TableConfig()),
            settings=fast_settings(action_time_s=5, time_bank_s=5, outage_limit_s=10)),
            OPERATOR)
        for seat in (1, 2, 3):
            name = f"{table_id}-p{seat}"
            players.append(name)
            md = tokens.metadata(OPERATOR)
            await retry_unavailable(lambda n=name, m=md: wallet.CreateAccount(
                wpb.CreateAccountRequest(player_id=n), metadata=m, timeout=10))
            await retry_unavailable(lambda n=name, m=md: wallet.Deposit(wpb.DepositRequest(
                player_id=n, amount=deposit, command_id=f"dep-{n}"), metadata=m, timeout=10))
            await router.call(table_id, "SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=20_000, command_id=f"sit-{name}"),
                Principal(Role.PLAYER, name))
    return players


async def retry_unavailable(call: Any, limit_s: float = 60.0) -> Any:
    """``call()`` again while the callee is restarting."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def settled(router: Router, wallet: Any, tokens: TokenBook, table_ids: list[str],
                  limit_s: float = 60.0) -> None:
    """Wait until no hand is in progress and every seat's escrow equals its stack at every
    table (the last settlements have landed); fail past ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        pending = []
        for table_id in table_ids:
            view = await router.call(table_id, "GetTable",
                                     pb.GetTableRequest(table_id=table_id), OPERATOR)
            escrows = await retry_unavailable(lambda t=table_id: wallet.Reconcile(
                wpb.ReconcileRequest(table_id=t), metadata=tokens.metadata(OPERATOR),
                timeout=10))
            held = {s.seat: s.balance for s in escrows.seats if s.balance}
            in_hand = view.HasField("hand") and view.hand.phase != pb.HAND_PHASE_COMPLETE
            if in_hand or held != {s.seat: s.stack for s in view.seats if s.stack}:
                pending.append(table_id)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"tables not settled within {limit_s}s: {pending}")
        await asyncio.sleep(0.2)


async def finish(router: Router, table_ids: list[str], report: Report,
                 limit_s: float = 90.0) -> dict[str, pb.TableView]:
    """Sit everyone out and let the bots play the hands in progress to their end; the final
    views."""
    for table_id in table_ids:
        view = await router.call(table_id, "GetTable", pb.GetTableRequest(table_id=table_id),
                                 OPERATOR)
        for seat in view.seats:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await router.call(table_id, "SitOut", pb.SitOutRequest(
                    table_id=table_id, seat=seat.seat, command_id=f"end-{seat.player_id}"),
                    Principal(Role.PLAYER, seat.player_id))
    stop = asyncio.Event()
    finishers = [asyncio.create_task(bot(router, t, report, stop, random.Random(1)))
                 for t in table_ids]
    deadline = time.monotonic() + limit_s
    views: dict[str, pb.TableView] = {}
    while time.monotonic() < deadline:
        views = {t: await router.call(t, "GetTable", pb.GetTableRequest(table_id=t),
                                      OPERATOR) for t in table_ids}
        if all(not v.HasField("hand") or v.hand.phase == pb.HAND_PHASE_COMPLETE
               for v in views.values()):
            break
        await asyncio.sleep(0.2)
    stop.set()
    await asyncio.gather(*finishers)
    return views


async def chips_lost(wallet: Any, tokens: TokenBook, players: list[str],
                     table_ids: list[str], deposit: int = DEPOSIT) -> int:
    """Deposits minus what the players, the seats and the house hold (0: nothing lost)."""
    md = tokens.metadata(OPERATOR)
    balances = 0
    for name in players:
        reply = await wallet.GetBalance(wpb.GetBalanceRequest(
            account=wpb.AccountRef(player_id=name)), metadata=md, timeout=10)
        balances += reply.balance
    escrows = 0
    for table_id in table_ids:
        reply = await wallet.Reconcile(wpb.ReconcileRequest(
            table_id=table_id), metadata=md, timeout=10)
        escrows += reply.total
    house = (await wallet.GetBalance(wpb.GetBalanceRequest(
        account=wpb.AccountRef(system=wpb.SYSTEM_ACCOUNT_HOUSE)), metadata=md,
        timeout=10)).balance
    return int(deposit * len(players) - (balances + escrows + house))


async def owners(client: aredis.Redis, table_ids: list[str]) -> dict[str, tuple[str, int]]:
    out = {}
    for table_id in table_ids:
        replica, epoch = await client.hmget(studkeys.table_owner(table_id),
                                            ["replica", "epoch"])
        text = replica.decode() if isinstance(replica, bytes) else (replica or "")
        out[table_id] = (text, int(epoch or 0))
    return out


async def wait_taken_over(client: aredis.Redis, tables: dict[str, tuple[str, int]],
                          gone: str, limit_s: float = 30.0) -> float:
    """Seconds until every table ``gone`` owned has a new owner (a higher epoch)."""
    started = time.monotonic()
    victims = {t: epoch for t, (owner, epoch) in tables.items() if owner == gone}
    while time.monotonic() - started < limit_s:
        now = await owners(client, list(victims))
        if all(now[t][0] != gone and now[t][1] > e for t, e in victims.items()):
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"tables of {gone} not taken over within {limit_s}s")


@contextlib.asynccontextmanager
async def room(work: Path, replicas: int) -> AsyncIterator[tuple[RoomProcesses, list[
        ServiceProcess], RedisServer, DevKeys]]:
    keys = DevKeys.generate()
    passwords = {n: uuid.uuid4().hex for n in ("table", "dealer", "wallet", "auditor")}
    redis = RedisServer(data_dir=work / "redis", passwords=passwords, port=restartable_port())
    redis.start()
    procs = RoomProcesses(redis.url_for, keys, work / "logs",
                          table_env={"TABLE_LEASE_MS": str(LEASE_MS)})
    tables = [procs.table]
    for i in range(1, replicas):
        extra = ServiceProcess("table", dict(procs.table.env), work / "logs" / f"table{i}.log")
        tables.append(extra)
    for i, proc in enumerate(tables):
        proc.env["TABLE_REPLICA_ID"] = f"table-{i}"
    try:
        for proc in (procs.dealer, procs.wallet, *tables):
            proc.start()
        for proc in (procs.dealer, procs.wallet, *tables):
            await proc.wait_serving()
        yield procs, tables, redis, keys
    finally:
        for proc in tables:
            if proc.proc is not None and proc.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.proc.send_signal(signal.SIGCONT)
            proc.terminate(timeout=10)
        procs.dealer.terminate(timeout=10)
        procs.wallet.terminate(timeout=10)
        redis.stop()


async def campaign(n_tables: int, seconds_between: float, seed: int, work: Path) -> Report:
    report = Report(tables=n_tables)
    rng = random.Random(seed)
    async with room(work, 3) as (procs, tables, redis, keys):
        tokens = TokenBook(keys)
        router = Router([p.target for p in tables], tokens)
        admin = aredis.Redis.from_url(redis.url)
        wallet_channel = grpc.aio.insecure_channel(procs.wallet.target)
        from stud.v1 import wallet_pb2_grpc
        wallet = wallet_pb2_grpc.WalletServiceStub(wallet_channel)  # type: ignore[no-untyped-call]
        table_ids = [f"fo-{i}" for i in range(n_tables)]
        players = await seat_players(router, wallet, tokens, table_ids, DEPOSIT)
        stop = asyncio.Event()
        bots = [asyncio.create_task(bot(router, t, report, stop, random.Random(rng.random())))
                for t in table_ids]

        async def pause() -> None:
            await asyncio.sleep(seconds_between)

        # 1. kill -9 one replica mid-hand.
        await pause()
        before = await owners(admin, table_ids)
        victim = tables[0]
        victim.kill()
        took = await wait_taken_over(admin, before, "table-0")
        report.max_takeover_s = max(report.max_takeover_s, took)
        victim.start()
        await victim.wait_serving()
        # 2. freeze one replica until its tables are taken over, then let it go on.
        await pause()
        before = await owners(admin, table_ids)
        frozen = tables[1]
        assert frozen.proc is not None
        frozen.proc.send_signal(signal.SIGSTOP)
        took = await wait_taken_over(admin, before, "table-1")
        report.max_takeover_s = max(report.max_takeover_s, took)
        frozen.proc.send_signal(signal.SIGCONT)
        # 3. a rolling restart, one replica at a time (graceful: leases handed back).
        for proc in tables:
            await pause()
            proc.terminate(timeout=15)
            proc.start()
            await proc.wait_serving()
        await pause()
        stop.set()
        await asyncio.gather(*bots)

        views = await finish(router, table_ids, report)
        store = EventStore(admin)
        await settled(router, wallet, tokens, table_ids)

        # The checks.
        for table_id in table_ids:
            stored = await store.read(table_id)
            runs: dict[str, int] = {}
            previous = None
            for item in stored:
                cid = item.envelope.command_id
                if cid != previous:
                    runs[cid] = runs.get(cid, 0) + 1
                previous = cid
            report.duplicate_events += sum(n - 1 for n in runs.values() if n > 1)
            report.lost_events += sum(1 for cid in report.acknowledged.get(table_id, ())
                                      if cid not in runs)
            assert [s.envelope.sequence for s in stored] == list(range(1, len(stored) + 1))
            state = fold([event_from_envelope(s.envelope) for s in stored])
            view = views[table_id]
            assert {n: state.stack(n) for n in range(1, 9) if state.seat(n)} == {
                s.seat: s.stack for s in view.seats}, table_id
        end = await owners(admin, table_ids)
        report.takeovers = sum(epoch - 1 for _owner, epoch in end.values())
        report.chips_lost = await chips_lost(wallet, tokens, players, table_ids)
        report.stale_appends_refused = sum(p.logs().count('"stale_append_refused"')
                                           for p in tables)
        await router.close()
        await wallet_channel.close()
        await admin.aclose()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make failover", description=__doc__)
    parser.add_argument("--tables", type=int, default=6)
    parser.add_argument("--seconds-between", type=float, default=3.0,
                        help="play between the faults")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stud-failover-") as work:
        report = asyncio.run(campaign(args.tables, args.seconds_between, args.seed,
                                      Path(work)))
    print(f"actions={report.actions}")
    print(report.line())
    ok = report.lost_events == 0 and report.duplicate_events == 0 and report.chips_lost == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
