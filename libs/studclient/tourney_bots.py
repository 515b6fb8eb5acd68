"""``stud bots --tournament ID``: bots that enter a tournament and play it out, using only the
SDK (:mod:`studclient`, :meth:`~studclient.tournament.TournamentClient.follow`).

Each bot is a player account (``--prefix``-1..N, default ``bot-<random>-1..N``; a tournament
that is registering gets ``--players`` bots, a sit & go's free seats at most). A bot that
already holds a live entry plays it (so a second run with the same ``--prefix`` picks its
seats up again); otherwise it is funded with the buy-in and fee (operator deposit) and
registers. Then it follows the tournament: it plays at the table the tournament seats it at,
switches to the new table when it is moved (a line ``bot … moved T1 -> T2 seat S``), and stops
when it busts or the tournament ends. At the end a line per bot gives its place and prize, and
the last line is ``tournament=… bots=… actions=… moves=… busts=… errors=… phase=…``; the exit
status is 0 only when no unexpected error occurred and the tournament finished (or every bot
is out). Addresses and credentials as for ``stud bots``, plus ``STUD_TOURNAMENT_TARGET``
(default ``127.0.0.1:50054``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import random
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TextIO

from stud.v1 import tournament_pb2 as pb
from studclient.bot import Bot, Tally
from studclient.client import Client
from studclient.errors import (
    AlreadyExists,
    FailedPrecondition,
    NotFound,
    StudError,
)
from studclient.resume import RESUMABLE
from studclient.room_env import bots_credentials, connector
from studclient.strategies import strategy_for
from studclient.tournament import SeatTracker
from studclient.views import my_turn

TOURNAMENT_TARGET_ENV: Final = "STUD_TOURNAMENT_TARGET"
DEFAULT_TOURNAMENT_TARGET: Final = "127.0.0.1:50054"
PHASES: Final[dict[int, str]] = {pb.TOURNAMENT_PHASE_REGISTERING: "registering",
                 pb.TOURNAMENT_PHASE_RUNNING: "running",
                 pb.TOURNAMENT_PHASE_FINISHED: "finished",
                 pb.TOURNAMENT_PHASE_CANCELLED: "cancelled"}
OPEN_RETRY_S: Final = 0.1
REWATCH_MAX_S: Final = 2.0


def phase_name(phase: int) -> str:
    return PHASES.get(phase, "unknown")


@dataclass
class TourneyTally(Tally):
    moves: int = 0
    busts: int = 0
    rewatches: int = 0
    """Table watches opened again after they failed (counted, expected under faults)."""


@dataclass
class TourneyBot:
    """One bot in the tournament: follows it and plays at its current table."""

    name: str
    client: Client
    strategy_name: str
    bot: Bot
    tables: list[str] = field(default_factory=list)

    async def play(self, tournament_id: str, tally: TourneyTally, out: TextIO) -> None:
        tracker = SeatTracker(self.name)
        task: asyncio.Task[None] | None = None
        try:
            async for update in self.client.tournaments.follow(tournament_id, tracker=tracker):
                if update.moved is not None:
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
                    if self.tables:
                        tally.moves += 1
                        print(f"bot {self.name} moved {self.tables[-1]} -> "
                              f"{update.moved.table_id} seat {update.moved.seat}",
                              file=out, flush=True)
                    self.tables.append(update.moved.table_id)
                    task = asyncio.create_task(
                        self._play_table(update.moved.table_id, tally, out))
                    task.add_done_callback(functools.partial(self._ended, tally))
                if update.busted:
                    tally.busts += 1
                    print(f"bot {self.name} busted at {update.record.event.busted.table_id}",
                          file=out, flush=True)
                    if tracker.seat is None:
                        return
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _ended(self, tally: TourneyTally, task: asyncio.Task[None]) -> None:
        """A table's play that ended other than by being cancelled (moved, out) is an error
        of the run: the bot would stop acting there, silently."""
        if not task.cancelled() and (error := task.exception()) is not None:
            tally.error(f"{self.name} at {self.tables[-1] if self.tables else '?'}", error)

    async def _play_table(self, table_id: str, tally: TourneyTally, out: TextIO) -> None:
        """Act at each of the bot's turns at ``table_id`` until cancelled (moved, out). A
        watch that fails (the table's replicas changing hands, Redis restarting, a stream
        cut) is opened again after a pause, as a player's app reconnects: a bot that stopped
        watching would only be folded on time-out from then on."""
        self.bot.table_id = table_id
        pause = OPEN_RETRY_S
        while True:
            try:
                async with self.client.watch(table_id) as watch:
                    acted_at = -1
                    async for view in watch.views():
                        pause = OPEN_RETRY_S
                        if view.version > acted_at and my_turn(view):
                            acted_at = view.version
                            action = self.bot.strategy(view, self.bot.rng)
                            # A rate limit is the client's to keep under and retry
                            # (studclient.pace, Client._call).
                            if await self.bot._command(tally, "act", self.client.act(
                                    table_id, action, expected_sequence=view.version)):
                                tally.actions += 1
                return
            except NotFound:
                await asyncio.sleep(OPEN_RETRY_S)  # the tournament is opening it now
            except StudError as exc:
                if exc.code not in RESUMABLE and exc.reason != "not_owner":
                    raise  # not a fault that passes (a refusal): an error of the run
                tally.rewatches += 1
                print(f"bot {self.name} watches {table_id} again in {pause:.1f}s "
                      f"({exc.code.name} {exc.reason or exc})", file=out, flush=True)
                await asyncio.sleep(pause)
                pause = min(2 * pause, REWATCH_MAX_S)


def live_entry(view: pb.TournamentView, player_id: str) -> pb.TournamentEntryView | None:
    """The player's entry still in (not placed), if any."""
    return next((e for e in view.entries if e.player_id == player_id and not e.place), None)


async def _enter(ops: Client, bot: TourneyBot, view: pb.TournamentView, out: TextIO) -> bool:
    """Have ``bot`` hold an entry: its live one, else a new one (funded); False if it
    cannot."""
    held = live_entry(view, bot.name)
    if held is not None:
        print(f"bot {bot.name} holds entry {held.entry_id}", file=out, flush=True)
        return True
    if not view.registration_open:
        return False
    cost = view.config.buy_in + view.config.fee
    await ops.create_account(bot.name)
    balance = await ops.balance(bot.name)
    if balance < cost:
        await ops.deposit(bot.name, cost - balance)
    try:
        await bot.client.tournaments.register(view.tournament_id)
    except AlreadyExists:
        pass  # registered by an earlier run whose entry is still being paid
    except FailedPrecondition as exc:
        print(f"bot {bot.name} not registered: {exc.reason}", file=out, flush=True)
        return False
    print(f"bot {bot.name} registered", file=out, flush=True)
    return True


def _want(view: pb.TournamentView, players: int) -> int:
    """How many bots to field."""
    if view.config.format == pb.TOURNAMENT_FORMAT_SIT_AND_GO and view.config.seats:
        return min(players, max(0, view.config.seats - len(view.entries)))
    if view.config.max_entrants:
        return min(players, max(0, view.config.max_entrants - len(view.entries)))
    return players


async def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """The whole run; the exit status."""
    creds = bots_credentials(env)
    if creds is None:
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    prefix = args.prefix or f"bot-{uuid.uuid4().hex[:8]}"
    tid = args.tournament
    connect = connector(env, env.get(TOURNAMENT_TARGET_ENV) or DEFAULT_TOURNAMENT_TARGET)
    tally = TourneyTally()
    ops = connect(creds.operator)
    bots: list[TourneyBot] = []
    view = pb.TournamentView()
    try:
        async with asyncio.timeout(args.timeout):
            view = await ops.tournaments.get(tid)
            existing = {e.player_id for e in view.entries if not e.place}
            want = _want(view, args.players)
            for i in range(1, args.players + 1):
                name, token = creds.players(i - 1, f"{prefix}-{i}")
                strategy_name, strategy = strategy_for(args.strategy, i - 1)
                client = connect(token)
                bot = TourneyBot(name, client, strategy_name, Bot(
                    name, client, "", strategy_name, strategy, random.Random(f"{seed}-{i}")))
                if name not in existing and want <= 0:
                    await client.close()
                    continue
                if await _enter(ops, bot, view, out):
                    bots.append(bot)
                    want -= name not in existing
                else:
                    await client.close()
            if not bots:
                print(f"stud bots: no bot could enter {tid} "
                      f"({phase_name(view.phase)})", file=sys.stderr)
                return 1
            results = await asyncio.gather(*(b.play(tid, tally, out) for b in bots),
                                           return_exceptions=True)
            for bot, result in zip(bots, results, strict=True):
                if isinstance(result, BaseException):
                    tally.error(f"{bot.name} follow", result)
            view = await ops.tournaments.get(tid)
    except TimeoutError:
        tally.error("run", TimeoutError(f"not over after {args.timeout}s"))
    except StudError as exc:
        tally.error("run", exc)
    finally:
        for bot in bots:
            await bot.client.close()
        await ops.close()
    ours = {b.name for b in bots}
    for entry in view.entries:
        if entry.player_id in ours:
            place = (f"{entry.place}" if entry.place == entry.place_to or not entry.place_to
                     else f"{entry.place}-{entry.place_to}")
            print(f"bot {entry.player_id} entry {entry.entry_id}: place {place or '-'} "
                  f"prize {entry.prize}", file=out)
    for error in tally.errors[:10]:
        print(f"error: {error}", file=out)
    if tally.rewatches:
        print(f"rewatches={tally.rewatches} (table watches opened again after a failure)",
              file=out)
    phase = phase_name(view.phase)
    print(f"tournament={tid} bots={len(bots)} actions={tally.actions} moves={tally.moves} "
          f"busts={tally.busts} errors={len(tally.errors)} phase={phase}", file=out, flush=True)
    done = phase == "finished" or (bool(view.entries) and all(
        e.place for e in view.entries if e.player_id in ours))
    return 0 if not tally.errors and done else 1

