"""``make protection``: player protection under races (issue 34). A real Redis and the wallet
over gRPC; many players, each with random deposit, loss and wager limits over a day, a week
or a month, some raising them (the raise waits 24 hours: it must not apply in the run), some
taking a break or excluded by an operator; then rounds in which every player fires many
deposits, buy-ins (top-ups), tournament entries and cash-outs at once.

Then an audit from what the wallet recorded, independent of what the callers saw: each
player's protection events (folded at each move's time) and their moves in the order the
wallet applied them (the usage list, newest first). A violation is:

- a deposit, buy-in or entry applied that, with the moves before it, passed a limit in force
  at its time (the lowest of them), or applied while the player was excluded;
- a checked move in the ledger that the usage list does not count (or the reverse);
- money created or lost (the ledger's sum, its replay against the balances).

Limit changes and exclusions are made between rounds (a player's protection is then fixed
while their moves race), so every move's limits are known exactly.

Last line: ``players=… limits_hit=… exclusions=… violations=0``; exit status 1 on a
violation, or when the run hit no limit or excluded nobody (a run that proved nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import sys
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from stud.v1 import wallet_pb2 as pb
from studkit.auth import Principal
from studkit.grpc_server import rpc_error_reason
from studtest.wallet import OPERATOR, TABLE, TOURNAMENT, RunningWallet, player, running_wallet
from studtools.devkeys import DevKeys
from studtools.redis_server import RedisServer
from wallet.config import Settings
from wallet.ledger import replay
from wallet.model import AccountKind, TxKind
from wallet.protection import (
    LimitExceeded,
    LimitKind,
    Protection,
    ProtectionEvent,
    ProtectRule,
    check,
    evolve,
)
from wallet.protection_store import ProtectionStore

KINDS = (pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_KIND_LOSS, pb.LIMIT_KIND_WAGER)
WINDOWS = (pb.LIMIT_WINDOW_DAY, pb.LIMIT_WINDOW_WEEK, pb.LIMIT_WINDOW_MONTH)
PERIODS = (pb.EXCLUSION_PERIOD_DAY, pb.EXCLUSION_PERIOD_WEEK, pb.EXCLUSION_PERIOD_MONTH,
           pb.EXCLUSION_PERIOD_SIX_MONTHS, pb.EXCLUSION_PERIOD_INDEFINITE)
BUY_IN, FEE = 100, 10
TIMEOUT_S = 30.0


class Run:
    """One campaign: the wallet, the players and the tallies."""

    def __init__(self, wallet: RunningWallet, players: int, moves: int, rng: random.Random):
        self.wallet = wallet
        self.stub = wallet.client.stub
        self.names = [f"p{i:03d}" for i in range(players)]
        self.moves = moves
        self.rng = rng
        self.outcomes: Counter[str] = Counter()
        self.exclusions = 0
        self.entries = 0

    def md(self, who: Principal) -> Any:
        return self.wallet.client.metadata(who)

    async def call(self, method: str, request: Any, who: Principal) -> Any:
        return await getattr(self.stub, method)(request, metadata=self.md(who),
                                                timeout=TIMEOUT_S)

    async def open(self) -> None:
        for name in self.names:
            await self.call("CreateAccount", pb.CreateAccountRequest(player_id=name),
                            OPERATOR)

    async def change(self, name: str, first: bool) -> None:
        """Between rounds: set, lower or raise a few limits; now and then a break or an
        operator's exclusion."""
        rng = self.rng
        for _ in range(rng.randint(1, 3) if first else rng.randint(0, 2)):
            amount = rng.choice([0, 150, 400, 1_000, 3_000]) if not first \
                else rng.choice([150, 400, 1_000, 3_000])
            await self.call("SetLimit", pb.SetLimitRequest(
                player_id=name, kind=rng.choice(KINDS), window=rng.choice(WINDOWS),
                amount=amount), player(name))
        roll = rng.random()
        if not first and roll < 0.08:
            await self.call("SelfExclude", pb.SelfExcludeRequest(
                player_id=name, period=rng.choice(PERIODS)), player(name))
            self.exclusions += 1
        elif not first and roll < 0.12:
            await self.call("ExcludePlayer", pb.ExcludePlayerRequest(
                player_id=name, period=rng.choice(PERIODS), reason="campaign: flagged"),
                OPERATOR)
            self.exclusions += 1

    async def blast(self, name: str, round_: int) -> None:
        """A player's moves of one round, all at once."""
        rng = random.Random(self.rng.random())
        calls: list[Callable[[], Awaitable[Any]]] = []
        for i in range(self.moves):
            roll, amount = rng.random(), rng.choice([50, 120, 300, 700])
            key = f"r{round_}-{i}"
            if roll < 0.3:
                request: Any = pb.DepositRequest(player_id=name, amount=amount,
                                                 idempotency_key=key)
                calls.append(functools.partial(self.call, "Deposit", request, OPERATOR))
            elif roll < 0.65:
                request = pb.BuyInRequest(player_id=name, table_id=f"t-{name}",
                                          seat=rng.randint(1, 3), amount=amount,
                                          idempotency_key=key)
                calls.append(functools.partial(self.call, "BuyIn", request, TABLE))
            elif roll < 0.8:
                self.entries += 1
                request = pb.EnterTournamentRequest(
                    player_id=name, tournament_id="campaign", entry_id=f"{name}-{key}",
                    buy_in=BUY_IN, fee=FEE, idempotency_key=f"{name}-{key}")
                calls.append(functools.partial(self.call, "EnterTournament", request, TOURNAMENT))
            else:
                request = pb.CashOutRequest(player_id=name, table_id=f"t-{name}",
                                            seat=rng.randint(1, 3), idempotency_key=key)
                calls.append(functools.partial(self.call, "CashOut", request, TABLE))

        async def one(call: Callable[[], Awaitable[Any]]) -> None:
            try:
                await call()
                self.outcomes["applied"] += 1
            except grpc.aio.AioRpcError as exc:
                self.outcomes[rpc_error_reason(exc) or exc.code().name.lower()] += 1

        await asyncio.gather(*(one(c) for c in calls))

    @property
    def limits_hit(self) -> int:
        return sum(n for reason, n in self.outcomes.items() if reason.endswith("_limit"))


async def audit(run: Run) -> list[str]:
    """Every violation found in what the wallet recorded."""
    store = run.wallet.deps.store
    protection = ProtectionStore(store.client)
    problems: list[str] = []
    ledger = await store.ledger()
    balances = await store.balances()
    if sum(balances.values()) != 0 or replay(ledger) != balances:
        problems.append("the ledger does not sum to zero or replay to the balances")
    checked = Counter[str]()
    for entry in ledger:
        if entry.kind in (TxKind.DEPOSIT, TxKind.BUY_IN, TxKind.TOURNAMENT_ENTRY):
            for posting in entry.postings:
                if posting.account.kind is AccountKind.PLAYER:
                    checked[posting.account.player_id] += 1
    for name in run.names:
        events: list[ProtectionEvent] = [e for _, e in await protection.events(name)]
        moves = list(reversed(await protection.usage(name)))  # oldest first: applied order
        counted = sum(1 for u in moves if u.deposit > 0 or u.wager > 0)
        if counted != checked[name]:
            problems.append(f"{name}: {checked[name]} checked moves in the ledger, "
                            f"{counted} counted")
        for i, move in enumerate(moves):
            kinds = (LimitKind.DEPOSIT,) if move.deposit > 0 else \
                (LimitKind.WAGER, LimitKind.LOSS) if move.wager > 0 else ()
            if not kinds:
                continue
            state = Protection()
            for event in events:
                if event.at_ms <= move.at_ms:
                    state = evolve(state, event)
            try:
                check(state, moves[:i], ProtectRule(name, kinds, True, move), move.at_ms)
            except LimitExceeded as exc:
                problems.append(f"{name}: a move at {move.at_ms} passed {exc}")
            except Exception as exc:  # Excluded
                problems.append(f"{name}: a move at {move.at_ms} applied while {exc}")
    return problems


async def campaign(players: int, rounds: int, moves: int, seed: int) -> int:
    rng = random.Random(seed)
    keys = DevKeys.generate()
    redis = RedisServer(appendonly=False, passwords={"wallet": uuid.uuid4().hex})
    redis.start()
    try:
        settings = Settings(addr="127.0.0.1:0", redis_url=redis.url_for("wallet"),
                            auth_keys=keys.key_set())
        async with running_wallet(settings, keys) as wallet:
            run = Run(wallet, players, moves, rng)
            await run.open()
            for name in run.names:
                await run.call("Deposit", pb.DepositRequest(
                    player_id=name, amount=2_000, idempotency_key="seed"), OPERATOR)
            for round_ in range(rounds):
                await asyncio.gather(*(run.change(name, round_ == 0) for name in run.names))
                await asyncio.gather(*(run.blast(name, round_) for name in run.names))
            problems = await audit(run)
    finally:
        redis.stop()
    for problem in problems[:20]:
        print(f"violation: {problem}")
    print(f"outcomes: {dict(sorted(run.outcomes.items()))}")
    print(f"players={players} limits_hit={run.limits_hit} exclusions={run.exclusions} "
          f"violations={len(problems)}")
    proved = run.limits_hit > 0 and run.exclusions > 0
    if not proved:
        print("the run hit no limit or excluded nobody: it proved nothing", file=sys.stderr)
    return 0 if not problems and proved else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m campaigns.protection",
                                     description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--players", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--moves", type=int, default=30, help="each player's moves a round")
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args(argv)
    return asyncio.run(campaign(args.players, args.rounds, args.moves, args.seed))


if __name__ == "__main__":
    sys.exit(main())
