"""``make tournament``: a multi-table tournament of bots at fast levels over the room as
processes (Redis, the dealer, the wallet, three table replicas and the tournament service),
with each kind of process in turn (the tournament service, a random table replica, the
dealer, the wallet, Redis; ``--kinds``) killed with SIGKILL at random points of the running
tournament and started again (``campaigns.chaos.kill_and_restart`` for all but the
tournament service). The bots are ``stud bots --tournament ID`` processes (eight players
each at most). While it runs, every second or so an observation joins the tables' views with
the tournament's log (``campaigns.tourney_checks.observe``); at the end, each a comparison
that can come out false:

- chips conserved at every observation: the stacks at the tables (with what is in the hand
  in progress) plus the stacks in moves equal entrants × starting stack, and nobody is seated
  twice, nowhere, or at a table though not in the field;
- the tournament finished; every prize due was paid, once (each player's wallet balance is
  their prize: the bots were funded with exactly the buy-in and fee); the prizes sum to the
  pool, the entrants' buy-ins; the wallet's pool account ends empty;
- the places are a permutation of the field (ties share a range as wide as their number);
- ``stud replay tournament --id T`` verified the history against the tables' logs;
- at least one hand, one move and one kill, and at least one determinate observation; every
  kind asked for killed at least once (with ``--kills`` at least the number of kinds);
- hand for hand entered and left, from the tournament's log, when the bubble (paid places + 1
  left) needs more than one table and the field came down to it (not when a hand busting
  several skipped it);
- every bot process's last line says ``errors=0``.

Every wait has a deadline. Before the last: ``killed tournament=… table=… dealer=… wallet=…
redis=…`` and ``hand_for_hand=…`` (``entered_and_left``, ``entered``, ``never``,
``skipped``, ``not_due``). Last line: ``entrants=… tables=… hands=… moves=… breaks=… kills=…
chips_conserved=yes payouts_ok=yes``; exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc
import redis.exceptions

from campaigns.chaos import kill_and_restart
from campaigns.room import CampaignRoom, campaign_room, retry_unavailable
from campaigns.tourney_checks import (
    EntrySeen,
    Observation,
    Seat,
    TableSeen,
    bot_problems,
    bust_rounds,
    enough,
    hand_for_hand_problems,
    hand_for_hand_state,
    kill_problems,
    observe,
    payout_problems,
    places_problems,
)
from stud.v1 import table_pb2 as tpb
from stud.v1 import tournament_pb2 as pb
from stud.v1 import tournament_pb2_grpc as pb_grpc
from stud.v1 import wallet_pb2 as wpb
from studtest.processes import CHANNEL_OPTIONS, ServiceProcess
from studtest.tournament_service import OPERATOR, TournamentClient
from studtest.wallet import TOURNAMENT
from studtools.replay_source import RedisSource
from studtools.replay_tournament import Record, read_records
from tournament import events as ev
from tournament.app import TournamentApp, tournament_store
from tournament.state import Tournament

TID: Final = "campaign-mtt"
BUY_IN: Final = 1000
FEE: Final = 100
STACK: Final = 1000
BOTS_PER_PROCESS: Final = 8
SETTLING: Final = frozenset({tpb.HAND_PHASE_SETTLING, tpb.HAND_PHASE_SHOWDOWN})
START_S: Final = 12
"""Seconds from creating the tournament to its start, plus one per three entrants: time for
the bot processes to start and register on a loaded machine (a field short of its minimum at
the start is cancelled)."""
KINDS: Final = ("tournament", "table", "dealer", "wallet", "redis")
"""What is killed, in turn (``table``: a random replica of the three)."""
UNREADABLE: Final = (grpc.aio.AioRpcError, redis.exceptions.RedisError, OSError)
"""What reading the room raises while Redis or a service is down."""


def levels(level_s: int) -> list[pb.TournamentLevel]:
    """Fast levels on a 1,000-chip stack, each big bet double the last from 100 on (ante a
    tenth, bring-in a fifth, small bet a half of it) up to 51,200, whose ante (5,120) is more
    than half the short run's 8,000 chips: from there every hand has a player all in from
    the ante, so a field that lasts that long ends soon (no long heads-up at a level too
    small for its stacks); the last repeats."""
    return [pb.TournamentLevel(ante=big // 10, bring_in=big // 5, small_bet=big // 2,
                               big_bet=big, seconds=level_s)
            for big in (100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200)]


@dataclass
class Outcome:
    entrants: int = 0
    tables: int = 0
    hands: int = 0
    moves: int = 0
    breaks: int = 0
    kills: int = 0
    kills_asked: int = 0
    kinds: tuple[str, ...] = KINDS
    """The kinds of process asked to be killed, in turn."""
    killed: Counter[str] = field(default_factory=Counter)
    hand_for_hand: str = "never"
    observations: int = 0
    indeterminate: int = 0
    chip_problems: list[str] = field(default_factory=list)
    payout_problems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    bot_lines: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"entrants={self.entrants} tables={self.tables} hands={self.hands} "
                f"moves={self.moves} breaks={self.breaks} kills={self.kills} "
                f"chips_conserved={'no' if self.chip_problems else 'yes'} "
                f"payouts_ok={'no' if self.payout_problems else 'yes'}")

    def killed_line(self) -> str:
        return "killed " + " ".join(f"{k}={self.killed[k]}"
                                    for k in dict.fromkeys((*self.kinds, *self.killed)))

    def judge(self) -> None:
        if not self.observations:
            self.chip_problems.append("no determinate observation was made")
        self.problems.extend(enough(self.hands, self.moves, self.kills))
        asked = [self.kinds[i % len(self.kinds)] for i in range(self.kills_asked)]
        self.problems.extend(kill_problems(asked, self.killed))
        if self.problems:  # a run that did not do what it must cannot pass
            self.payout_problems.extend(self.problems)


def tournament_process(room: CampaignRoom, work: Path, tick_s: float) -> ServiceProcess:
    return ServiceProcess("tournament", {
        "METRICS_PORT": "0", "LOG_LEVEL": "INFO", **room.keys.env("tournament"),
        "REDIS_URL": room.redis.url_for("tournament"),
        "TOURNAMENT_WALLET_TARGET": room.procs.wallet.target,
        "TOURNAMENT_TABLE_TARGET": room.tables[0].target,
        "TOURNAMENT_TICK_S": str(tick_s), "TOURNAMENT_SHUTDOWN_GRACE": "1"},
        work / "logs" / "tournament.log")


def bot_processes(room: CampaignRoom, service: ServiceProcess, work: Path, entrants: int,
                  seed: int) -> list[subprocess.Popen[str]]:
    """``stud bots --tournament`` processes fielding ``entrants`` bots between them."""
    room.keys.write(work / "keys")
    env = {**os.environ, "STUD_TABLE_TARGET": room.tables[0].target,
           "STUD_DEALER_TARGET": room.procs.dealer.target,
           "STUD_WALLET_TARGET": room.procs.wallet.target,
           "STUD_TOURNAMENT_TARGET": service.target,
           "STUD_ISSUER_KEY": str(work / "keys" / "issuer.pem")}
    procs = []
    for i, first in enumerate(range(0, entrants, BOTS_PER_PROCESS)):
        players = min(BOTS_PER_PROCESS, entrants - first)
        with (work / "logs" / f"bots{i}.log").open("w") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "studtools.cli", "bots", "--tournament", TID,
                 "--players", str(max(2, players)), "--prefix", f"tc{i}", "--strategy",
                 "random", "--seed", str(seed + i), "--timeout", "3600"],
                env=env, stdout=log, stderr=subprocess.STDOUT, text=True))
    return procs


async def table_seen(room: CampaignRoom, table_id: str) -> TableSeen | None:
    """A table as its view shows it (None: closed, or unreadable now)."""
    try:
        view = await room.router.view(table_id, OPERATOR)
    except grpc.aio.AioRpcError:
        return None
    in_hand = {}
    settling = False
    if view.hand_in_progress and view.HasField("hand"):
        settling = view.hand.phase in SETTLING
        in_hand = {p.seat: p.hand_total for p in view.hand.players}
    return TableSeen(table_id, tuple(Seat(s.player_id, s.stack, in_hand.get(s.seat, 0))
                                     for s in view.seats if s.player_id), settling)


def entries_seen(t: Tournament) -> tuple[list[EntrySeen], list[str]]:
    """The entries still in as the log has them, and the players out."""
    alive, out = [], []
    for e in t.field():
        if not e.paid:
            continue
        if e.bust is not None:
            out.append(e.player_id)
            continue
        moving = t.move is not None and t.move.entry_id == e.entry_id
        alive.append(EntrySeen(e.entry_id, e.player_id, e.chips,
                               placed=bool(e.table_id) or moving,
                               moving_unrecorded=moving and t.move_stack < 0))
    return alive, out


async def observation(room: CampaignRoom, app: TournamentApp) -> Observation | None:
    """One observation, or None when the log moved on while the tables were read."""
    before = await app.load(TID)
    if before.phase != "running":
        return None
    seen = [await table_seen(room, table_id) for table_id in before.tables
            if table_id not in before.closed]
    after = await app.load(TID)
    if after.version != before.version or any(s is None for s in seen):
        return None
    alive, out = entries_seen(after)
    return observe([s for s in seen if s is not None], alive, out)


async def watch_chips(room: CampaignRoom, app: TournamentApp, out: Outcome,
                      stop: asyncio.Event, total: int) -> None:
    while not stop.is_set():
        try:
            seen = await observation(room, app)
        except UNREADABLE:  # Redis restarting: this observation is skipped
            seen = None
        if seen is not None:
            out.chip_problems.extend(seen.problems[:5])
            if seen.chips is None:
                out.indeterminate += 1
            else:
                out.observations += 1
                if seen.chips != total:
                    out.chip_problems.append(f"{seen.chips} chips seen, {total} in play "
                                             f"(log version {(await app.load(TID)).version})")
        else:
            out.indeterminate += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


async def running(app: TournamentApp) -> bool:
    """Whether the tournament is running (False too while its log is unreadable)."""
    try:
        return (await app.load(TID)).phase == "running"
    except UNREADABLE:
        return False


async def chaos(room: CampaignRoom, service: ServiceProcess, app: TournamentApp,
                rng: random.Random, kills: int, gap_s: tuple[float, float], out: Outcome,
                stop: asyncio.Event) -> None:
    """Kill each kind of process of ``out.kinds`` in turn at random points of the running
    tournament, each started again."""
    out.kills_asked = kills
    while out.kills < kills and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*gap_s))
        if stop.is_set() or not await running(app):
            continue
        kind = out.kinds[out.kills % len(out.kinds)]
        out.kills += 1
        out.killed[kind] += 1
        print(f"kill {out.kills}: {kind}", flush=True)
        if kind != "tournament":
            await kill_and_restart(kind, rng, room)
            continue
        await asyncio.to_thread(service.kill)
        await asyncio.sleep(rng.uniform(0.1, 1.0))
        service.start()
        await service.wait_serving()


async def final_checks(room: CampaignRoom, service: ServiceProcess, t: Tournament, work: Path,
                       out: Outcome, seats: int) -> None:
    log = [r.event for r in await TournamentApp(tournament_store(room.admin)).records(TID, 0)]
    out.tables = sum(isinstance(e, ev.TableOpened) for e in log)
    out.hands = sum(isinstance(e, ev.HandEnded) for e in log)
    out.breaks = sum(isinstance(e, ev.BreakStarted) for e in log)
    out.moves = t.moves
    out.entrants = sum(1 for e in t.field() if e.paid)
    out.hand_for_hand, problems = hand_for_hand_problems(
        hand_for_hand_state([e.on for e in log if isinstance(e, ev.HandForHand)]),
        out.entrants, t.paid_places(), seats,
        bust_rounds(e.round for e in log if isinstance(e, ev.Busted)))
    out.problems.extend(problems)
    if t.phase != "finished":
        out.payout_problems.append(f"the tournament is {t.phase}, not finished")
    prizes = {p.payment_id: p for p in t.payments.values() if isinstance(p, ev.PrizeDue)}
    refunds = [p for p in t.payments.values() if isinstance(p, ev.RefundDue)]
    if refunds:
        out.payout_problems.append(f"{len(refunds)} refunds in a tournament played out")
    players = {e.entry_id: e.player_id for e in t.field()}
    won: dict[str, int] = {}
    for p in prizes.values():
        won[players[p.entry_id]] = won.get(players[p.entry_id], 0) + p.amount
    pool = await retry_unavailable(functools.partial(
        room.wallet.GetPool, wpb.GetPoolRequest(tournament_id=TID),
        metadata=room.md(TOURNAMENT), timeout=10))
    balances = {}
    for player in sorted(set(players.values())):
        reply = await retry_unavailable(functools.partial(
            room.wallet.GetBalance, wpb.GetBalanceRequest(
                account=wpb.AccountRef(player_id=player)), metadata=room.md(), timeout=10))
        balances[player] = int(reply.balance)
    out.payout_problems.extend(payout_problems(
        {k: p.amount for k, p in prizes.items()}, t.paid, out.entrants * BUY_IN,
        int(pool.balance), balances, won))
    if pool.buy_ins != out.entrants * BUY_IN:
        out.payout_problems.append(f"the pool took {pool.buy_ins} in buy-ins, the entrants "
                                   f"paid {out.entrants * BUY_IN}")
    out.payout_problems.extend(places_problems(await final_places(room, service)))
    replay = replay_tournament(room, work)
    print(f"replay: {replay}", flush=True)
    if not replay.endswith("verified=yes"):
        out.payout_problems.append(f"stud replay tournament: {replay}")


async def final_places(room: CampaignRoom,
                       service: ServiceProcess) -> list[tuple[int, int]]:
    """Each paid entry's place range, as the tournament's own API shows it."""
    async with grpc.aio.insecure_channel(service.target, options=CHANNEL_OPTIONS) as channel:
        client = TournamentClient(pb_grpc.TournamentServiceStub(  # type: ignore[no-untyped-call]
            channel), room.keys)
        view = await retry_unavailable(functools.partial(client.get, TID))
    return [(e.place, e.place_to) for e in view.entries if e.paid]


def replay_tournament(room: CampaignRoom, work: Path) -> str:
    """``stud replay tournament --id`` over the room, as an auditor; its last line."""
    env = {**os.environ, "STUD_REPLAY_REDIS_URL": room.redis.url_for("auditor"),
           "STUD_ISSUER_KEY": str(work / "keys" / "issuer.pem")}
    try:
        run = subprocess.run([sys.executable, "-m", "studtools.cli", "replay", "tournament",
                              "--id", TID], env=env, capture_output=True, text=True,
                             timeout=600)
    except subprocess.TimeoutExpired:
        return "no answer in 600s"
    lines = (run.stdout + run.stderr).strip().splitlines()
    for line in lines:
        if line.startswith(("FAILED", "note")):
            print(f"replay {line}", flush=True)
    return lines[-1] if lines else f"exited {run.returncode} saying nothing"


async def campaign(entrants: int, kills: int, seed: int, work: Path, level_s: int,
                   gap_s: tuple[float, float], limit_s: float, seats: int = 8,
                   kinds: Sequence[str] = KINDS) -> Outcome:
    rng = random.Random(seed)
    out = Outcome(kinds=tuple(kinds))
    async with campaign_room(work, replicas=3) as room:
        service = tournament_process(room, work, tick_s=0.2)
        service.start()
        app = TournamentApp(tournament_store(room.admin))
        try:
            await service.wait_serving()
            async with grpc.aio.insecure_channel(service.target,
                                                 options=CHANNEL_OPTIONS) as channel:
                client = TournamentClient(pb_grpc.TournamentServiceStub(  # type: ignore[no-untyped-call]
                    channel), room.keys)
                await client.create(TID, pb.TournamentConfig(
                    name="campaign", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=BUY_IN,
                    fee=FEE, seats=seats, min_entrants=entrants, max_entrants=entrants,
                    structure=pb.TournamentStructure(
                        starting_stack=STACK, break_every=3, break_seconds=2,
                        levels=levels(level_s)),
                    start_at={"seconds": int(time.time()) + START_S + entrants // 3}))
            bots = bot_processes(room, service, work, entrants, seed)
            stop = asyncio.Event()
            tasks = [asyncio.create_task(watch_chips(room, app, out, stop, entrants * STACK)),
                     asyncio.create_task(chaos(room, service, app, rng, kills, gap_s, out,
                                               stop))]
            over = False
            try:
                t = await wait_finished(app, limit_s)
                over = True
            except AssertionError:
                await explain(room, app, work)
                raise
            finally:
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
                out.bot_lines = await asyncio.to_thread(reap, bots, work, 60.0 if over else 0.0)
            out.problems.extend(bot_problems({
                name: last for name, _, last in (b.partition(": ") for b in out.bot_lines)}))
            await final_checks(room, service, t, work, out, seats)
        finally:
            service.terminate()
    out.judge()
    return out


async def wait_finished(app: TournamentApp, limit_s: float) -> Tournament:
    """The tournament once it has finished (or been cancelled) and every payment is made;
    raises past ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        with contextlib.suppress(Exception):
            t = await app.load(TID)
            if t.phase in ("finished", "cancelled") and set(t.payments) <= t.paid:
                return t
        if time.monotonic() > deadline:
            raise AssertionError(f"the tournament is not over after {limit_s:.0f}s")
        await asyncio.sleep(0.5)


async def explain(room: CampaignRoom, app: TournamentApp, work: Path) -> None:
    """What a tournament that did not finish was waiting for (printed for the failure's
    report): its last events, its tables as they are, and the last warnings and errors of its
    service and of the tables."""
    with contextlib.suppress(*UNREADABLE):
        records = await replay_tournament_records(room)
        for record in records[-40:]:
            kind = record.event.WhichOneof("kind") or "?"
            print(f"#{record.sequence} {kind}: "
                  f"{str(getattr(record.event, kind, '')).strip()!r}"[:240], flush=True)
        t = await app.load(TID)
        print(f"phase={t.phase} level={t.level} move={t.move} payments={sorted(t.payments)} "
              f"paid={sorted(t.paid)}", flush=True)
        for table_id in t.tables:
            view = await room.router.view(table_id, OPERATOR)
            print(f"{table_id}: closed={table_id in t.closed} hands={view.hands_started} "
                  f"in_progress={view.hand_in_progress} paused={view.dealing_paused} "
                  f"reason={view.pause_reason!r} seats="
                  f"{[(s.seat, s.player_id, s.stack) for s in view.seats]}", flush=True)
    for log in sorted((work / "logs").glob("t*.log")):  # the tournament's and the tables'
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if '"level": "info"' not in line]
        for line in lines[-15:]:
            print(f"{log.name}: {line[:300]}", flush=True)


async def replay_tournament_records(room: CampaignRoom) -> list[Record]:
    """The tournament's log, as ``stud replay tournament`` reads it."""
    return await read_records(RedisSource(room.admin), TID)


def reap(bots: list[subprocess.Popen[str]], work: Path, timeout_s: float) -> list[str]:
    """Each bot process's last line (those still running ``timeout_s`` from now killed)."""
    lines = []
    deadline = time.monotonic() + timeout_s
    for i, proc in enumerate(bots):
        try:
            proc.wait(timeout=max(0.01, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        text = (work / "logs" / f"bots{i}.log").read_text().strip().splitlines()
        lines.append(f"bots{i} exit {proc.returncode}: {text[-1] if text else ''}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make tournament", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entrants", type=int, default=60)
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--level-seconds", type=int, default=20)
    parser.add_argument("--gap", type=float, nargs=2, default=(4.0, 12.0),
                        help="seconds between kills, drawn in this range")
    parser.add_argument("--limit", type=float, default=1800.0,
                        help="seconds the tournament may take")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="the kinds of process killed, in turn")
    parser.add_argument("--keep", default=None, help="keep the run's files (logs) here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stud-tournament-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        out = asyncio.run(campaign(args.entrants, args.kills, args.seed, work,
                                   args.level_seconds, tuple(args.gap), args.limit,
                                   kinds=args.kinds))
    for line in out.bot_lines:
        print(line)
    for problem in [*out.chip_problems[:20], *out.payout_problems[:20]]:
        print(f"FAILED {problem}")
    print(out.killed_line())
    print(f"hand_for_hand={out.hand_for_hand}")
    print(f"observations={out.observations} indeterminate={out.indeterminate} "
          f"seconds={time.monotonic() - started:.0f}")
    print(out.line())
    return 0 if not (out.chip_problems or out.payout_problems) else 1


if __name__ == "__main__":
    sys.exit(main())
