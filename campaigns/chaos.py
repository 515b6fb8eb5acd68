"""``make chaos``: faults across a fixed number of hands. Redis (AOF, ``appendfsync always``),
the dealer, the wallet and three table replicas run as separate processes while the bots play
at several tables; at random points one of them is killed with SIGKILL and started again — a
table replica, the dealer, the wallet or Redis itself. Afterwards, each a comparison that can
come out false:

- every hand is complete, and settled exactly once (or voided by RULES 9.8 and settled as a
  void): one settlement transaction per hand in the wallet's ledger;
- the ledger sums to zero: deposits == player balances + escrows + house, and every escrow
  equals its stack;
- ``stud replay verify --all`` verified every hand played (``verified`` equals the hands
  played), each with every check (the rules re-decided every command, chips conserved, the
  wallet's settlement equal to the fold, every dealt card from the committed deck), and no
  note says that something was not checked;
- at least one action and one hand, and no bot error.

Every wait has a deadline. Last line: ``hands=… kills=… chips_lost=0 duplicate_settlements=0
unverified=0`` (``unverified``: hands played that the replay did not verify in full); the exit
status is 1 if any check failed. Guarantees and the fsync policy each needs:
docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import operator
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aredis

from campaigns.bot import Tally
from campaigns.checks import ReplayCheck, check_replay, enough_play
from campaigns.room import CampaignRoom, campaign_room, wait_until
from studtools.redis_server import RedisServer
from wallet.store import LEDGER

TARGETS = ("table", "table", "dealer", "wallet", "redis")
HANDS_PER_KILL_S = 120.0
"""Longest wait for the hands between two kills."""
VERIFY_TIMEOUT_S = 600


@dataclass
class Outcome:
    hands: int = 0
    kills: int = 0
    chips_lost: int = 0
    duplicate_settlements: int = 0
    unverified: int = 0
    tally: Tally = field(default_factory=Tally)
    replay: ReplayCheck = field(default_factory=ReplayCheck)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"hands={self.hands} kills={self.kills} chips_lost={self.chips_lost} "
                f"duplicate_settlements={self.duplicate_settlements} "
                f"unverified={self.unverified}")

    def judge(self) -> None:
        if self.chips_lost:
            self.problems.append(f"{self.chips_lost} chips lost")
        if self.duplicate_settlements:
            self.problems.append(f"{self.duplicate_settlements} hands settled twice")
        if self.unverified:
            self.problems.append(f"{self.unverified} of {self.hands} hands not verified in "
                                 "full")
        self.problems.extend(self.replay.problems[:20])
        self.problems.extend(enough_play(self.tally.actions, self.hands))
        if self.tally.errors:
            self.problems.append(f"{len(self.tally.errors)} bot errors, first: "
                                 f"{self.tally.errors[0]}")


async def campaign(hands: int, kills: int, n_tables: int, seed: int, work: Path) -> Outcome:
    rng = random.Random(seed)
    out = Outcome()
    async with campaign_room(work, replicas=3) as room:
        table_ids = [f"chaos-{i}" for i in range(n_tables)]
        await room.open_tables(table_ids)
        stop = asyncio.Event()
        bots = [asyncio.create_task(b.run(stop))
                for b in room.bots(table_ids, out.tally, rng)]
        per_kill = max(1, hands // (kills + 1))
        try:
            for k in range(kills):
                target = TARGETS[k] if k < len(TARGETS) else rng.choice(TARGETS)
                due = await room.hands_started(table_ids) + per_kill
                await wait_until(functools.partial(room.hands_started, table_ids),
                                 functools.partial(operator.le, due), HANDS_PER_KILL_S,
                                 f"fewer than {per_kill} hands before kill {k + 1}")
                await asyncio.sleep(rng.random())  # somewhere inside a hand
                await kill_and_restart(target, rng, room)
                out.kills += 1
            await wait_until(functools.partial(room.hands_started, table_ids),
                             functools.partial(operator.le, hands),
                             max(HANDS_PER_KILL_S, hands * 2.0), f"fewer than {hands} hands")
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*bots), 60)
        await room.finish(table_ids, out.tally)
        await room.settled(table_ids)
        out.hands = await room.hands_started(table_ids)
        out.chips_lost = await room.chips_lost(table_ids)
        out.duplicate_settlements = await duplicate_settlements(room.redis)
        out.replay = check_replay(verify_all(room, work), out.hands)
        out.unverified = out.replay.unverified
    out.judge()
    return out


async def kill_and_restart(target: str, rng: random.Random, room: CampaignRoom) -> None:
    """SIGKILL one process and start it again (same port, same data)."""
    if target == "redis":
        room.redis.kill()
        await asyncio.sleep(0.5)
        room.redis.start()
        return
    proc = rng.choice(room.tables) if target == "table" else getattr(room.procs, target)
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


def verify_all(room: CampaignRoom, work: Path) -> dict[str, Any]:
    """``stud replay verify --all --json -v`` over the room, as an auditor with the dealer
    (cards checked); its JSON report (a report of one failure when it gives none)."""
    env = {**os.environ, "STUD_REPLAY_REDIS_URL": room.redis.url_for("auditor"),
           "STUD_DEALER_TARGET": room.procs.dealer.target}
    room.keys.write(work / "keys")
    env["STUD_ISSUER_KEY"] = str(work / "keys" / "issuer.pem")
    try:
        run = subprocess.run([sys.executable, "-m", "studtools.cli", "replay", "verify",
                              "--all", "--json", "-v"], env=env, capture_output=True,
                             text=True, timeout=VERIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"notes": [f"stud replay verify gave no answer in {VERIFY_TIMEOUT_S}s"]}
    try:
        report: dict[str, Any] = json.loads(run.stdout)
    except json.JSONDecodeError:
        return {"notes": [f"stud replay verify exited {run.returncode} without a report: "
                          f"{(run.stdout + run.stderr)[-2000:]}"]}
    print(f"replay verify: hands={report.get('hands')} verified={report.get('verified')} "
          f"failed={report.get('failed')}", flush=True)
    for failure in (report.get("failures") or [])[:5]:
        print(f"replay FAILED {failure}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hands", type=int, default=300)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stud-chaos-") as work:
        out = asyncio.run(campaign(args.hands, args.kills, args.tables, args.seed, Path(work)))
    for problem in out.problems:
        print(f"FAILED {problem}")
    print(f"actions={out.tally.actions} moved_on={out.tally.moved_on} "
          f"bot_errors={len(out.tally.errors)} verified={out.replay.verified} "
          f"verified_in_full={out.replay.in_full} "
          f"seconds={time.monotonic() - started:.0f}")
    print(out.line())
    return 0 if not out.problems else 1


if __name__ == "__main__":
    sys.exit(main())
