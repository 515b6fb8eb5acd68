"""``make chaos``: faults across a fixed number of hands. Redis (AOF, ``appendfsync always``),
the dealer, the wallet and three table replicas run as separate processes while bots play at
several tables; at random points one of them is killed with SIGKILL and started again — a
table replica, the dealer, the wallet or Redis itself. Afterwards:

- every hand is complete, and settled exactly once (or voided by RULES 9.8 and settled as a
  void): one settlement transaction per hand in the wallet's ledger;
- the ledger sums to zero: deposits == player balances + escrows + house, and every escrow
  equals its stack;
- ``stud replay verify --all`` passes (every hand's events legal, chips conserved, the
  wallet's settlement equal to the fold, every dealt card from the committed deck).

Last line: ``hands=… kills=… chips_lost=0 duplicate_settlements=0 unverified=0``.
Guarantees and the fsync policy each needs: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio as aredis

from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2_grpc
from studkit.auth import DevKeys, TokenBook
from studkit.redis_server import RedisServer
from table.failover import (
    DEPOSIT,
    OPERATOR,
    Report,
    Router,
    bot,
    chips_lost,
    finish,
    room,
    seat_players,
    settled,
)
from table.processes import RoomProcesses, ServiceProcess
from wallet.store import LEDGER


async def campaign(hands: int, kills: int, n_tables: int, seed: int, work: Path
                   ) -> dict[str, int]:
    rng = random.Random(seed)
    report = Report(tables=n_tables)
    out = {"hands": 0, "kills": 0, "chips_lost": 0, "duplicate_settlements": 0,
           "unverified": 0}
    async with room(work, 3) as (procs, tables, redis, keys):
        tokens = TokenBook(keys)
        router = Router([p.target for p in tables], tokens)
        wallet_channel = grpc.aio.insecure_channel(procs.wallet.target)
        wallet = wallet_pb2_grpc.WalletServiceStub(wallet_channel)  # type: ignore[no-untyped-call]
        table_ids = [f"chaos-{i}" for i in range(n_tables)]
        players = await seat_players(router, wallet, tokens, table_ids, DEPOSIT)
        stop = asyncio.Event()
        bots = [asyncio.create_task(bot(router, t, report, stop, random.Random(rng.random())))
                for t in table_ids]
        per_kill = max(1, hands // (kills + 1))
        targets = ["table", "table", "dealer", "wallet", "redis"]

        async def hands_started() -> int:
            total = 0
            for t in table_ids:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    view = await router.call(t, "GetTable", pb.GetTableRequest(table_id=t),
                                             OPERATOR)
                    total += view.hands_started
            return total

        for k in range(kills):
            target = targets[k % len(targets)] if k < len(targets) else rng.choice(targets)
            started = await hands_started()
            deadline = time.monotonic() + 120
            while await hands_started() < started + per_kill and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            await asyncio.sleep(rng.random())  # somewhere inside a hand
            await kill_and_restart(target, rng, procs, tables, redis)
            out["kills"] += 1
        while await hands_started() < hands:
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*bots)
        await finish(router, table_ids, Report())
        await settled(router, wallet, tokens, table_ids)
        out["hands"] = await hands_started()
        out["chips_lost"] = await chips_lost(wallet, tokens, players, table_ids)
        out["duplicate_settlements"] = await duplicate_settlements(redis)
        out["unverified"] = verify_all(redis, procs.dealer.target, keys, work)
        await router.close()
        await wallet_channel.close()
    return out


async def kill_and_restart(target: str, rng: random.Random, procs: RoomProcesses,
                           tables: list[ServiceProcess], redis: RedisServer) -> None:
    """SIGKILL one process and start it again (same port, same data)."""
    if target == "redis":
        redis.kill()
        await asyncio.sleep(0.5)
        redis.start()
        return
    proc = rng.choice(tables) if target == "table" else getattr(procs, target)
    await asyncio.to_thread(proc.kill)
    await asyncio.sleep(0.3)
    proc.start()
    await proc.wait_serving()


async def duplicate_settlements(redis: RedisServer) -> int:
    """Hands with more than one settlement transaction in the wallet's ledger stream (read as
    the admin: each transaction's plan names its kind, table and hand)."""
    admin = aredis.Redis.from_url(redis.url, decode_responses=True)
    seen: Counter[tuple[str, str]] = Counter()
    start = "-"
    try:
        while True:
            batch: list[Any] = list(await admin.xrange(LEDGER, min=start, count=1000) or [])
            for _entry_id, fields in batch:
                plan = json.loads((fields or {}).get("tx", "{}"))
                if plan.get("kind") == "settlement":
                    seen[(plan.get("table_id", ""), plan.get("hand_id", ""))] += 1
            if len(batch) < 1000:
                break
            start = f"({batch[-1][0]}"
    finally:
        await admin.aclose()
    return sum(1 for n in seen.values() if n > 1)


def verify_all(redis: RedisServer, dealer: str, keys: DevKeys, work: Path) -> int:
    """``stud replay verify --all`` over the room; the number of hands that failed."""
    env = {**os.environ, "STUD_REPLAY_REDIS_URL": redis.url_for("auditor"),
           "STUD_DEALER_TARGET": dealer}
    keys.write(work / "keys")
    env["STUD_ISSUER_KEY"] = str(work / "keys" / "issuer.pem")
    run = subprocess.run([sys.executable, "-m", "studkit.cli", "replay", "verify", "--all"],
                         env=env, capture_output=True, text=True, timeout=600)
    last = (run.stdout.strip().splitlines() or [""])[-1]
    print(f"replay verify: {last}", flush=True)
    failed = 0
    for part in last.split():
        if part.startswith("failed="):
            failed = int(part.split("=", 1)[1])
    if run.returncode != 0:
        print("\n".join(line for line in run.stdout.splitlines()
                        if "FAIL" in line.upper() or "wrong" in line)[-3000:], flush=True)
        print(run.stderr[-2000:], flush=True)
        failed = max(failed, 1)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make chaos", description=__doc__)
    parser.add_argument("--hands", type=int, default=300)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stud-chaos-") as work:
        out = asyncio.run(campaign(args.hands, args.kills, args.tables, args.seed, Path(work)))
    print(" ".join(f"{k}={v}" for k, v in out.items()))
    ok = out["chips_lost"] == 0 and out["duplicate_settlements"] == 0 \
        and out["unverified"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
