"""The simulated wallet store against the real one: ``wallet/apply.lua`` on a real Redis and
its Python port in :mod:`sim.scripts` answer the same transactions alike. Each case runs the
wallet's use cases (``WalletApp`` over ``WalletStore``, as the simulator runs them) on both;
the outcomes (applied, replayed, each refusal), every reply of the script, and every wallet
key afterwards (balances,
idempotency records, seat holders, last hands, the ledger and each account's statement) must
agree, the stream ids aside: Redis draws them from its own clock, so they are compared by
their order."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from sim.redis import Data, SimRedis
from studkit.auth import Principal, Role
from studkit.redis_client import connect
from tests.sim.conftest import Recording
from wallet.app import WalletApp
from wallet.model import AccountId, BuyIn, CashOut, Deposit, SeatResult, SettleHand, Withdraw
from wallet.protection import (
    LimitIncreaseRequested,
    LimitKind,
    LimitSet,
    Period,
    SelfExcluded,
    SessionLimitSet,
    Window,
    fold,
    projection,
)
from wallet.store import (
    ACCOUNTS,
    BALANCES,
    IDEMPOTENCY,
    LAST_HAND,
    LEDGER,
    PROTECTION,
    SESSIONS,
    WalletStore,
    postings_key,
    seats_key,
    usage_key,
)

OPERATOR = Principal(Role.OPERATOR, "contract")
TABLE = Principal(Role.SERVICE, "table")
MAX = 9007199254740991
MINUTE = 60_000
"""The largest balance ``apply.lua`` accepts (2^53 - 1)."""

Case = Callable[[WalletApp], Awaitable[list[object]]]


async def outcome(call: Awaitable[Any]) -> object:
    """What a use case answered, as comparable data (a refusal by its class and text)."""
    try:
        applied = await call
    except Exception as exc:
        return ("refused", type(exc).__name__, str(exc))
    return ("ok", applied.balances, applied.amount, applied.replayed, sorted(applied.excluded))


def deposit(player: str, amount: int, key: str) -> Deposit:
    return Deposit(player_id=player, amount=amount, idempotency_key=key)


async def deposits(app: WalletApp) -> list[object]:
    await app.create_account(OPERATOR, "p1")
    return [await outcome(app.deposit(OPERATOR, deposit("p1", 500, "d1"))),
            await outcome(app.deposit(OPERATOR, deposit("p1", 500, "d1"))),  # a replay
            await outcome(app.deposit(OPERATOR, deposit("p1", 700, "d1"))),  # key reused
            await outcome(app.deposit(OPERATOR, deposit("p9", 5, "d9"))),  # no account
            await outcome(app.withdraw(OPERATOR, Withdraw(player_id="p1", amount=501,
                                                          idempotency_key="w1"))),
            await outcome(app.withdraw(OPERATOR, Withdraw(player_id="p1", amount=200,
                                                          idempotency_key="w2"))),
            await outcome(app.deposit(OPERATOR, deposit("p1", MAX, "big")))]  # balance_limit


def buy_in(player: str, seat: int, amount: int, key: str, sit_down: bool = False) -> BuyIn:
    return BuyIn(player_id=player, table_id="t1", seat=seat, amount=amount,
                 idempotency_key=key, sit_down=sit_down)


async def seats(app: WalletApp) -> list[object]:
    for player in ("p1", "p2"):
        await app.create_account(OPERATOR, player)
        await app.deposit(OPERATOR, deposit(player, 1000, f"d-{player}"))
    return [await outcome(app.buy_in(TABLE, buy_in("p1", 1, 300, "b1"))),
            await outcome(app.buy_in(TABLE, buy_in("p1", 1, 300, "b1"))),  # a replay
            await outcome(app.buy_in(TABLE, buy_in("p2", 1, 300, "b2"))),  # seat taken
            await outcome(app.buy_in(TABLE, buy_in("p1", 1, 100, "b3"))),  # a top-up
            await outcome(app.buy_in(TABLE, buy_in("p2", 2, 2000, "b4"))),  # too much
            await outcome(app.buy_in(TABLE, buy_in("p2", 2, 500, "b5"))),
            await outcome(app.cash_out(TABLE, CashOut(table_id="t1", seat=3, player_id="p2",
                                                      idempotency_key="c0"))),  # not held
            await outcome(app.cash_out(TABLE, CashOut(table_id="t1", seat=1, player_id="p1",
                                                      idempotency_key="c1"))),
            await outcome(app.cash_out(TABLE, CashOut(table_id="t1", seat=1, player_id="p1",
                                                      idempotency_key="c1"))),  # a replay
            await outcome(app.buy_in(TABLE, buy_in("p2", 1, 100, "b6"))),  # seat freed
            # A sit-down's buy-in takes only a free seat (review finding F3).
            await outcome(app.buy_in(TABLE, buy_in("p2", 1, 100, "b7", True))),  # own escrow
            await outcome(app.buy_in(TABLE, buy_in("p1", 2, 100, "b8", True))),  # another's
            await outcome(app.buy_in(TABLE, buy_in("p1", 3, 100, "b9", True))),  # free
            await outcome(app.buy_in(TABLE, buy_in("p1", 3, 100, "b9", True)))]  # a replay


def settle(hand: str, *results: tuple[int, str, int, int]) -> SettleHand:
    return SettleHand(table_id="t1", hand_id=hand, results=tuple(
        SeatResult(seat=s, player_id=p, amount_in=i, amount_won=w) for s, p, i, w in results))


async def settlements(app: WalletApp) -> list[object]:
    for seat, player in ((1, "p1"), (2, "p2")):
        await app.create_account(OPERATOR, player)
        await app.deposit(OPERATOR, deposit(player, 1000, f"d-{player}"))
        await app.buy_in(TABLE, buy_in(player, seat, 400, f"b-{player}"))
    # Which settled players are excluded now, read by the settlement's script (issue 35): p2
    # excluded since sitting down, p1's exclusion over before the wallet's clock (1,000).
    for player, until_ms in (("p1", 500), ("p2", 604_800_000)):
        await app._store._redis.hset(PROTECTION, player, projection(fold([SelfExcluded(
            at_ms=0, period=Period.WEEK, until_ms=until_ms)])))
    return [await outcome(app.settle_hand(TABLE, settle("h1", (1, "p1", 50, 100),
                                                        (2, "p2", 50, 0)))),
            await outcome(app.settle_hand(TABLE, settle("h1", (1, "p1", 50, 100),
                                                        (2, "p2", 50, 0)))),  # a replay
            await outcome(app.settle_hand(TABLE, settle("h1", (1, "p1", 50, 0),
                                                        (2, "p2", 50, 100)))),  # reused
            await outcome(app.settle_hand(TABLE, settle("h2", (1, "p1", 500, 1000),
                                                        (2, "p2", 500, 0)))),  # too much
            await outcome(app.settle_hand(TABLE, settle("h3", (1, "p2", 10, 20),
                                                        (2, "p1", 10, 0)))),  # wrong holders
            await outcome(app.settle_hand(TABLE, settle("h4", (1, "p1", 0, 0),
                                                        (2, "p2", 0, 0)))),  # a void hand
            await outcome(app.cash_out(TABLE, CashOut(table_id="t1", seat=2, player_id="p2",
                                                      idempotency_key="c2")))]


async def limits(app: WalletApp) -> list[object]:
    """Player protection (issue 34): p1 with a daily deposit limit and a weekly wager limit
    (and a raise that waits), p2 self-excluded."""
    store = app._store
    p1 = fold([LimitSet(at_ms=0, kind=LimitKind.DEPOSIT, window=Window.DAY, amount=800),
               LimitSet(at_ms=0, kind=LimitKind.WAGER, window=Window.WEEK, amount=500),
               LimitSet(at_ms=0, kind=LimitKind.LOSS, window=Window.MONTH, amount=450),
               LimitIncreaseRequested(at_ms=0, kind=LimitKind.WAGER, window=Window.WEEK,
                                      amount=5_000, effective_ms=86_400_000)])
    p2 = fold([SelfExcluded(at_ms=0, period=Period.WEEK, until_ms=604_800_000)])
    for player, state in (("p1", p1), ("p2", p2)):
        await app.create_account(OPERATOR, player)
        await store._redis.hset(PROTECTION, player, projection(state))
    return [await outcome(app.deposit(OPERATOR, deposit("p1", 500, "d1"))),
            await outcome(app.deposit(OPERATOR, deposit("p1", 500, "d2"))),  # deposit_limit
            await outcome(app.deposit(OPERATOR, deposit("p1", 300, "d3"))),
            await outcome(app.buy_in(TABLE, buy_in("p1", 1, 300, "b1"))),
            await outcome(app.buy_in(TABLE, buy_in("p1", 1, 300, "b2"))),  # wager_limit
            await outcome(app.cash_out(TABLE, CashOut(table_id="t1", seat=1, player_id="p1",
                                                      idempotency_key="c1"))),
            await outcome(app.buy_in(TABLE, buy_in("p1", 1, 200, "b3"))),  # loss 0: fits
            await outcome(app.buy_in(TABLE, buy_in("p1", 1, 1, "b4"))),  # wager_limit
            await outcome(app.deposit(OPERATOR, deposit("p2", 10, "d4")))]  # self_excluded


async def sessions(app: WalletApp) -> list[object]:
    """The session time limit (issue 34), checked and recorded by a buy-in's script: p1,
    with 60 minutes, buys in (a session starts), again at 25 and 50 minutes (it goes on, a
    buy-in at most 30 minutes after the last), is refused
    session_limit at 60 while a retry of the first is answered as applied; p2, with no
    limit, buys in and is recorded too; 30 minutes after p1's last buy-in a new session
    starts and p1's buy-in is applied."""
    store, now = app._store, [1_000]
    clocked = WalletApp(store, clock_ms=lambda: now[0])
    for player in ("p1", "p2"):
        await app.create_account(OPERATOR, player)
        await app.deposit(OPERATOR, deposit(player, 1_000, f"d-{player}"))
    await store._redis.hset(PROTECTION, "p1", projection(fold([SessionLimitSet(
        at_ms=0, minutes=60, effective_ms=0)])))
    out = [await outcome(clocked.buy_in(TABLE, buy_in("p1", 1, 100, "b1")))]
    now[0] += 25 * MINUTE
    out += [await outcome(clocked.buy_in(TABLE, buy_in("p1", 1, 100, "b2"))),
            await outcome(clocked.buy_in(TABLE, buy_in("p2", 2, 100, "b3")))]
    now[0] += 25 * MINUTE
    out += [await outcome(clocked.buy_in(TABLE, buy_in("p1", 1, 100, "b6")))]
    now[0] += 10 * MINUTE
    out += [await outcome(clocked.buy_in(TABLE, buy_in("p1", 1, 100, "b4"))),  # the limit
            await outcome(clocked.buy_in(TABLE, buy_in("p1", 1, 100, "b1"))),  # a replay
            await outcome(clocked.buy_in(TABLE, buy_in("p2", 2, 100, "b5")))]
    now[0] += 20 * MINUTE  # 30 minutes after p1's last buy-in: a new session
    out += [await outcome(clocked.buy_in(TABLE, buy_in("p1", 1, 100, "b4")))]
    return out


CASES: dict[str, Case] = {"deposits": deposits, "seats": seats, "settlements": settlements,
                          "limits": limits, "sessions": sessions}
ACCOUNT_KEYS = ["player:p1", "player:p2", "seat:t1:1", "seat:t1:2", "external"]


async def stored(client: Recording) -> list[object]:
    """Every key the cases write and every reply of the script, the stream ids replaced by
    their order in the ledger."""
    ledger = await client.xrange(LEDGER)
    order = {entry_id: f"tx{i}" for i, (entry_id, _fields) in enumerate(ledger)}

    def plain(text: str) -> str:
        return re.sub(r"[0-9]+-[0-9]+", lambda m: order.get(m.group(0), m.group(0)), text)

    def parsed(value: object) -> object:
        """JSON as data (cjson and Python's json space and order keys differently)."""
        if isinstance(value, str) and value.startswith("{"):
            return parsed(json.loads(plain(value)))
        if isinstance(value, dict):
            return {k: parsed(v) for k, v in value.items()}
        return plain(value) if isinstance(value, str) else value

    def hash_(raw: dict[str, str]) -> dict[str, object]:
        return {name: parsed(value) for name, value in raw.items()}

    rows: list[object] = [[parsed(fields) for _id, fields in ledger],
                          [[parsed(part) for part in reply] for reply in client.replies]]
    for key in (BALANCES, IDEMPOTENCY, ACCOUNTS, seats_key("t1"), LAST_HAND, SESSIONS):
        rows.append((key, hash_(await client.hgetall(key))))
    for player in ("p1", "p2"):
        rows.append((usage_key(player), await client.lrange(usage_key(player), 0, -1)))
    for account in ACCOUNT_KEYS:
        key = postings_key(AccountId.parse(account))
        rows.append((key, [{k: plain(v) for k, v in fields.items()}
                           for _id, fields in await client.xrange(key)]))
    return rows


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_simulated_apply_answers_as_apply_lua(redis_url: str, name: str,
                                                  recording: type[Recording]) -> None:
    case = CASES[name]

    async def run(client: Recording) -> list[object]:
        app = WalletApp(WalletStore(client), clock_ms=lambda: 1_000)  # type: ignore[arg-type]
        return [*await case(app), *await stored(client)]

    async def real() -> list[object]:
        client = connect(redis_url, decode_responses=True)
        try:
            return await run(recording(client))
        finally:
            await client.aclose()

    on_redis = asyncio.run(real())
    answers = [o for o in on_redis if isinstance(o, tuple) and o[0] in ("ok", "refused")]
    assert {o[0] for o in answers} == {"ok", "refused"}  # each case both applies and refuses
    assert asyncio.run(run(recording(SimRedis(Data(), decode=True)))) == on_redis
