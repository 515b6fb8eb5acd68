"""Players' sessions (issue 34) are a projection of the ledger: ``apply.lua`` writes a
player's session in the same script as the buy-in or the settlement that sees them (the
ledger entry records who and when), nothing else writes it, and the ledger alone rebuilds it
(``WalletStore.rebuild_sessions``)."""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

import wallet
from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal, Role
from studkit.errors import ServiceError
from studtest.redis import TestRedis
from studtest.wallet import RunningWallet, player
from wallet.app import WalletApp
from wallet.ledger import LedgerEntry
from wallet.model import BuyIn, Deposit, SeatResult, SettleHand
from wallet.protection import (
    SESSION_GAP_MS,
    Session,
    SetSessionLimit,
    replay_sessions,
    session_from_text,
    session_to_text,
)
from wallet.protection_app import ProtectionApp
from wallet.protection_store import ProtectionStore
from wallet.store import SESSIONS, WalletStore

from .conftest import wallet_url

pytestmark = pytest.mark.integration

T0 = 1_800_000_000_000
MINUTE = 60_000
TABLE = Principal(Role.SERVICE, "table")
OPERATOR = Principal(Role.OPERATOR, "ops")
SEATS = {"ann": 1, "bob": 2, "cat": 3}


class Room:
    """The wallet's use cases on a real Redis, three players at table t1, a clock the test
    moves."""

    def __init__(self, store: WalletStore) -> None:
        self.now = T0
        self.hands = 0
        self.store = store
        self.app = WalletApp(store, clock_ms=lambda: self.now)
        self.protection = ProtectionApp(ProtectionStore(store.client),
                                        clock_ms=lambda: self.now)

    async def buy_in(self, name: str, key: str) -> None:
        await self.app.buy_in(TABLE, BuyIn(player_id=name, table_id="t1", seat=SEATS[name],
                                           amount=100, idempotency_key=key))

    async def settle(self, *names: str, hand_id: str = "") -> dict[str, str]:
        if not hand_id:
            self.hands += 1
            hand_id = f"h{self.hands}"
        applied = await self.app.settle_hand(TABLE, SettleHand(
            table_id="t1", hand_id=hand_id, results=tuple(
                SeatResult(seat=SEATS[n], player_id=n, amount_in=10,
                           amount_won=10 * len(names) if i == 0 else 0)
                for i, n in enumerate(names))))
        return dict(applied.stood_up)

    async def sessions(self) -> dict[str, str]:
        raw: dict[str, str] = await self.store.client.hgetall(SESSIONS)
        return raw


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str) -> AsyncIterator[Room]:
    store = WalletStore.from_url(wallet_url(redis_server, redis_url))
    room = Room(store)
    for name in SEATS:
        await store.create_account(name, T0)
        await room.app.deposit(OPERATOR, Deposit(player_id=name, amount=10_000,
                                                 idempotency_key=f"d-{name}"))
    yield room
    await store.close()


async def play_a_while(room: Room) -> None:
    """Buy-ins, settled hands, a session past its limit refused a buy-in, a retried
    settlement, a gap that starts a new session, a player who sits out."""
    await room.protection.set_session_limit(Principal(Role.PLAYER, "bob"), SetSessionLimit(
        player_id="bob", minutes=30))
    for name in SEATS:
        await room.buy_in(name, f"b-{name}")
        room.now += MINUTE
    for _ in range(4):
        room.now += 10 * MINUTE
        await room.settle("ann", "bob", "cat")
    with pytest.raises(ServiceError):  # bob: his session has lasted 30 minutes
        await room.buy_in("bob", "b-bob-2")
    assert await room.settle("ann", "bob", "cat", hand_id="h4") == {"bob": "session_limit"}
    room.now += SESSION_GAP_MS  # cat sits out; ann too, then a new session of hers
    await room.settle("ann", "bob")
    room.now += 5 * MINUTE
    await room.buy_in("ann", "b-ann-2")


async def test_the_ledger_alone_rebuilds_every_session(room: Room) -> None:
    """After a while of play the sessions hash is the fold of the ledger's entries; deleted
    and rebuilt from the ledger, it holds the same sessions."""
    await play_a_while(room)
    before = await room.sessions()
    assert {p: session_from_text(t) for p, t in before.items()} == {
        "ann": Session(room.now - 5 * MINUTE, room.now),
        "bob": Session(room.now - 5 * MINUTE, room.now - 5 * MINUTE),
        "cat": Session(T0 + 2 * MINUTE, T0 + 43 * MINUTE)}
    assert {p: session_to_text(s) for p, s in
            replay_sessions(await room.store.ledger()).items()} == before
    await room.store.client.delete(SESSIONS)
    assert await room.sessions() == {}
    rebuilt = await room.store.rebuild_sessions()
    assert await room.sessions() == before
    assert {p: session_to_text(s) for p, s in rebuilt.items()} == before


async def test_a_rebuild_raced_by_a_transaction_reads_the_ledger_again(room: Room) -> None:
    """A buy-in lands between the rebuild's read of the ledger and its write: the write is
    refused and the rebuild reads again, so the buy-in's session is in what it writes."""
    await play_a_while(room)
    store, landed = room.store, []

    async def raced(batch: int = 1000) -> list[LedgerEntry]:
        entries = await WalletStore.ledger(store, batch)
        if not landed:
            room.now += MINUTE
            await room.buy_in("cat", "b-cat-2")
            landed.append(room.now)
        return entries

    expected = await room.sessions()  # and cat's buy-in, over 30 minutes after his last hand
    expected["cat"] = session_to_text(Session(room.now + MINUTE, room.now + MINUTE))
    store.ledger = raced  # type: ignore[method-assign]
    await store.client.delete(SESSIONS)
    await store.rebuild_sessions()
    assert landed == [room.now] and await room.sessions() == expected


@contextlib.contextmanager
def requests(monkeypatch: pytest.MonkeyPatch, wallet: RunningWallet) -> Iterator[list[str]]:
    """The name of every request the wallet's Redis client writes inside the block."""
    names: list[str] = []
    send = AbstractConnection.send_packed_command
    pool = wallet.deps.store.client.connection_pool

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True
                      ) -> None:
        if self in pool._in_use_connections:  # type: ignore[attr-defined]
            packed = command if isinstance(command, bytes) else b"".join(command)
            names.extend(m.decode().upper() for m in
                         re.findall(rb"\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n", packed))
        await send(self, command, check_health)

    with monkeypatch.context() as patch:
        patch.setattr(AbstractConnection, "send_packed_command", counted)
        yield names


async def test_a_settlement_and_its_sessions_are_one_script(
        wallet: RunningWallet, redis_server: TestRedis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Over gRPC, a settled hand (one player past a session limit, one without any limit)
    is one request to Redis, the settlement's script: it moved the money, recorded every
    player's session and said whom to stand up, so no crash can leave one without the
    other; a retry answers the same and writes nothing."""
    if redis_server.cluster:
        pytest.skip("a cluster client adds its own requests (slots, redirections)")
    client = wallet.client
    for name, seat in SEATS.items():
        await client.create_account(name)
        await client.deposit(name, 1_000, f"d-{name}")
        await client.buy_in(name, "t1", seat, 500, f"b-{name}")
    await client.stub.SetSessionLimit(pb.SetSessionLimitRequest(player_id="bob", minutes=1),
                                      metadata=client.metadata(player("bob")), timeout=10)
    store = wallet.deps.store.client
    before = await store.hgetall(SESSIONS)
    started = session_from_text(before["bob"]).started_ms
    await store.hset(SESSIONS, "bob", session_to_text(Session(started - 2 * MINUTE,
                                                              started)))
    request = pb.SettleHandRequest(
        table_id="t1", hand_id="h1",
        seats=[pb.SettlementSeat(seat=s, player_id=n, amount_in=100,
                                 amount_won=300 if s == 1 else 0) for n, s in SEATS.items()],
        ended_on_street=pb.SettleHandRequest.STREET_FIFTH)
    with requests(monkeypatch, wallet) as sent:
        settled = await client.settle(request)
    assert sent == ["EVALSHA"]
    assert (list(settled.excluded_seats), dict(settled.excluded_reasons)) == (
        [2], {2: "session_limit"})
    after = {p: session_from_text(t) for p, t in (await store.hgetall(SESSIONS)).items()}
    assert after["bob"].started_ms == started - 2 * MINUTE
    for name in SEATS:
        assert after[name].last_ms > session_from_text(before[name]).last_ms or \
            after[name].last_ms >= started, name
    (entry,) = [e for e in await wallet.deps.store.ledger() if e.hand_id == "h1"]
    assert entry.players_seen == tuple(SEATS) and entry.at_ms == after["ann"].last_ms
    with requests(monkeypatch, wallet) as sent:
        again = await client.settle(request)
    assert sent == ["EVALSHA"] and again.excluded_reasons == settled.excluded_reasons
    assert {p: session_from_text(t) for p, t in (await store.hgetall(SESSIONS)).items()} \
        == after


def test_no_python_of_the_wallet_writes_the_sessions_key() -> None:
    """The wallet's Python only reads the sessions hash (HMGET) or hands it to a script (the
    rebuild's): no HSET, HDEL, DEL or the like names it, so apply.lua is its only writer
    with the money (the source is read, so a new writer is seen here first)."""
    writes = {"hset", "hsetnx", "hmset", "hdel", "delete", "unlink", "rename", "expire"}
    package = Path(wallet.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in writes and any(
                        isinstance(a, ast.Name) and a.id == "SESSIONS" for a in node.args):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
    lua = (package / "apply.lua").read_text()
    assert lua.count("redis.call('HSET', KEYS[10]") == 2  # a buy-in's, a settlement's
