"""The wallet's tournament money next to its cash-table money, on a real local redis-server:
transactions/s through the wallet's app and store (decide, then ``apply.lua``), one call at a
time, for table buy-ins, tournament entries (buy-in plus fee), refunds (which read the pool
first) and prizes. Prints figures and their ratio to the buy-in rate; asserts nothing.

The kinds are measured in interleaved rounds (buy-in, entry, refund, prize, then again), and
each figure is the best of its rounds, so the machine's noise hits them alike; compare the
ratios, not the absolute rates. Run: ``.venv/bin/python bench/bench_wallet_tournament.py``
(``--budget`` seconds per kind, default 3; ``--aof`` for appendfsync always).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

from studkit.auth import Principal, Role
from studtools.redis_server import RedisServer
from wallet.app import WalletApp
from wallet.model import BuyIn, Deposit, EnterTournament, PayPrize, RefundEntry
from wallet.store import WalletStore

OPERATOR = Principal(Role.OPERATOR, "ops")
TABLE = Principal(Role.SERVICE, "table")
TOURNAMENT = Principal(Role.SERVICE, "tournament")
ROUNDS = 5
PLAYERS = 64


async def setup(app: WalletApp, store: WalletStore) -> None:
    for n in range(PLAYERS):
        await store.create_account(f"p{n}", 0)
        await app.deposit(OPERATOR, Deposit(player_id=f"p{n}", amount=10**12,
                                            idempotency_key=f"d{n}"))


def steps(app: WalletApp) -> dict[str, Callable[[int], Awaitable[object]]]:
    """One call of each kind, the i-th (fresh keys, entries and seats every time)."""
    def player(i: int) -> str:
        return f"p{i % PLAYERS}"

    async def buy_in(i: int) -> object:
        return await app.buy_in(TABLE, BuyIn(player_id=player(i), table_id=f"t{i}", seat=1,
                                             amount=100, idempotency_key=f"b{i}"))

    async def enter(i: int) -> object:
        return await app.enter_tournament(TOURNAMENT, EnterTournament(
            player_id=player(i), tournament_id="m1", entry_id=f"e{i}", buy_in=100, fee=10,
            idempotency_key=f"n{i}"))

    async def refund(i: int) -> object:
        await app.enter_tournament(TOURNAMENT, EnterTournament(
            player_id=player(i), tournament_id=f"r{i // 50}", entry_id=f"e{i}", buy_in=100,
            fee=10, idempotency_key=f"rn{i}"))
        return await app.refund_entry(TOURNAMENT, RefundEntry(
            player_id=player(i), tournament_id=f"r{i // 50}", entry_id=f"e{i}",
            idempotency_key=f"r{i}"))

    async def prize(i: int) -> object:
        return await app.pay_prize(TOURNAMENT, PayPrize(
            player_id=player(i), tournament_id="m1", amount=1, place=1,
            idempotency_key=f"p{i}"))

    return {"buy-in": buy_in, "entry": enter, "entry+refund (2 tx)": refund, "prize": prize}


async def run(url: str, budget: float) -> None:
    store = WalletStore.from_url(url)
    app = WalletApp(store)
    try:
        await setup(app, store)
        kinds = steps(app)
        best = dict.fromkeys(kinds, 0.0)
        counters = dict.fromkeys(kinds, 0)
        for _ in range(ROUNDS):
            for name, step in kinds.items():
                done, start = 0, time.perf_counter()
                while time.perf_counter() - start < budget / ROUNDS:
                    await step(counters[name])
                    counters[name] += 1
                    done += 1
                best[name] = max(best[name], done / (time.perf_counter() - start))
        base = best["buy-in"]
        print(f"{'kind':24} {'calls/s':>9} {'vs buy-in':>10}")
        for name, value in best.items():
            print(f"{name:24} {value:9.0f} {value / base:10.2f}")
        pool = await store.pool("m1")
        print(f"pool m1: {len(pool.entries)} entries, {len(pool.prizes)} prizes, "
              f"balance {pool.balance} = {pool.buy_ins} - {pool.prizes_paid}")
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=3.0, help="seconds per kind")
    parser.add_argument("--aof", action="store_true", help="AOF with appendfsync always")
    args = parser.parse_args()
    with RedisServer(appendonly=args.aof, passwords={"wallet": "bench-pw"}) as server:
        print(f"redis-server, aof {'always' if args.aof else 'off'}, one call at a time")
        asyncio.run(run(server.url_for("wallet"), args.budget))


if __name__ == "__main__":
    main()
