"""``python -m studclient.sitgo``: the demo sit & go ``make run`` starts beside the demo table.

It creates a sit & go (operator) ``sitgo-N`` of :data:`SEATS` seats with a fast demo
structure and waits for people: for a registration window (``STUD_SITGO_WINDOW_S``, default
30 s) only players take seats (``stud play --register sitgo-N``). When it closes, the bots
``sitgo-bot-1..`` take the seats left and play it out with ``stud bots --tournament``
(:mod:`studclient.tourney_bots`); a sit & go that people filled is played by them alone.
It prints one line when the sit & go ends (the winner and the prizes), then creates the
next one, for ever.

When the bots sit is the sit & go's ``config.start_at``, which the service stores and a sit
& go otherwise ignores (it starts when full): every client reads it, so ``stud play
--lobby`` shows the time left (:func:`bots_at`). A restarted run (``make run`` again, or this
process restarted after it died) carries on with the latest sit & go that is not over: the
bots play the entries they hold, and wait for the window of one still registering.

Addresses and credentials as for ``stud bots`` (``STUD_TOURNAMENT_TARGET`` for the
tournament service); ``STUD_SITGO_LEVEL_S``: the levels' length (default 60 s). It stops
on SIGTERM, SIGINT or SIGHUP.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TextIO

from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from studclient import tourney_bots
from studclient.bots import DEALER_TARGET_ENV, TABLE_TARGET_ENV, WALLET_TARGET_ENV, credentials
from studclient.bots import targets as room_targets
from studclient.client import Client
from studclient.errors import AlreadyExists, StudError

SEATS: Final = 4
PREFIX: Final = "sitgo"
BOTS: Final = "sitgo-bot"
PAUSE_S: Final = 5.0
"""Between one sit & go's end and the next one's start (and after a failed one)."""
BUY_IN, FEE = 1_000, 100
LEVEL_S_ENV: Final = "STUD_SITGO_LEVEL_S"
"""The demo ladder's level length in seconds (default 60)."""
WINDOW_ENV: Final = "STUD_SITGO_WINDOW_S"
"""The registration window in seconds: people only, then the bots take the seats left."""
WINDOW_S: Final = 30
POLL_S: Final = 1.0
"""How often the demo looks at its sit & go while it waits (the window, the end)."""
LADDER: Final = ((5, 10, 25), (10, 25, 50), (20, 40, 100), (40, 75, 200), (75, 150, 400),
                 (150, 300, 800), (300, 600, 1_600), (600, 1_200, 3_200))
"""A demo ladder (ante, bring-in, small bet): the small bet doubling; the stack is 80 first
small bets."""
NUMBER: Final = re.compile(rf"^{PREFIX}-(\d+)$")


def config(level_s: int = 60, bots_at: float = 0.0) -> pb.TournamentConfig:
    """The demo sit & go; ``bots_at`` (a Unix time; 0: none) is when its bots take the seats
    left, kept as its ``start_at`` for every client to read."""
    structure = pb.TournamentStructure(starting_stack=2_000, levels=[
        pb.TournamentLevel(ante=a, bring_in=b, small_bet=s, big_bet=2 * s, seconds=level_s)
        for a, b, s in LADDER])
    cfg = pb.TournamentConfig(name="Demo sit & go", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO,
                              buy_in=BUY_IN, fee=FEE, seats=SEATS, structure=structure)
    if bots_at:
        cfg.start_at.CopyFrom(Timestamp(seconds=int(-(-bots_at // 1))))
    return cfg


def window_s(env: Mapping[str, str]) -> int:
    """The registration window (``STUD_SITGO_WINDOW_S``, default 30 s; 0: none)."""
    try:
        return max(0, int(env.get(WINDOW_ENV) or WINDOW_S))
    except ValueError:
        return WINDOW_S


def is_demo(tournament_id: str) -> bool:
    return NUMBER.match(tournament_id) is not None


def bots_at(cfg: pb.TournamentConfig) -> float:
    """When a sit & go's bots take the seats left (its ``start_at``; 0: at once)."""
    if cfg.format != pb.TOURNAMENT_FORMAT_SIT_AND_GO or not cfg.HasField("start_at"):
        return 0.0
    return float(cfg.start_at.seconds + cfg.start_at.nanos / 1e9)


def seats_left(view: pb.TournamentView) -> int:
    """Seats no entry holds while registration is open (0 once it is closed)."""
    if not view.registration_open:
        return 0
    return max(0, (view.config.seats or 8) - len(view.entries))


def over(view: pb.TournamentView) -> bool:
    return view.phase in (pb.TOURNAMENT_PHASE_FINISHED, pb.TOURNAMENT_PHASE_CANCELLED)


def current(tournaments: Sequence[pb.TournamentSummary]) -> tuple[str | None, int]:
    """The latest demo sit & go that is not over (None: none), and the next free number."""
    numbered = sorted(((int(m.group(1)), s) for s in tournaments
                       if (m := NUMBER.match(s.tournament_id))), key=lambda x: x[0])
    nxt = numbered[-1][0] + 1 if numbered else 1
    live = [s for _n, s in numbered if s.phase in (pb.TOURNAMENT_PHASE_REGISTERING,
                                                   pb.TOURNAMENT_PHASE_RUNNING)]
    return (live[-1].tournament_id if live else None), nxt


def ending_line(view: pb.TournamentView) -> str:
    prizes = ", ".join(f"{e.place}. {e.player_id} {e.prize:,}" for e in
                       sorted(view.entries, key=lambda e: e.place) if e.prize)
    return f"[sitgo] {view.tournament_id} over: {prizes or 'no prizes'}"


def opened_line(tid: str, at: float, window: int) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(at))
    return (f"[sitgo] {tid}: {SEATS} seats, {BUY_IN:,}+{FEE:,}; open to people for {window} s:"
            f" stud play --register {tid} takes a seat; the bots take the seats left at "
            f"{when}")


async def until(ops: Client, tid: str, done: Callable[[pb.TournamentView], bool],
                clock: Callable[[], float] = time.time,
                deadline: float = 0.0) -> pb.TournamentView:
    """Look at ``tid`` every :data:`POLL_S` until ``done(view)`` or ``deadline`` passes."""
    while True:
        view = await ops.tournaments.get(tid)
        if done(view) or (deadline and clock() >= deadline):
            return view
        wait = POLL_S if not deadline else min(POLL_S, max(0.0, deadline - clock()))
        await asyncio.sleep(wait)


async def one(ops: Client, env: Mapping[str, str], out: TextIO, seed: int,
              clock: Callable[[], float] = time.time) -> None:
    """Play the current sit & go (or a new one) to its end: people only during its window,
    then the bots in the seats left."""
    tid, nxt = current(await ops.tournaments.lobby())
    if tid is None:
        tid = f"{PREFIX}-{nxt}"
        window = window_s(env)
        at = clock() + window if window else 0.0
        with contextlib.suppress(AlreadyExists):
            level_s = max(1, int(env.get(LEVEL_S_ENV) or 60))
            await ops.tournaments.create(tid, config(level_s, at), command_id=f"create-{tid}")
        print(opened_line(tid, at, window) if at else
              f"[sitgo] {tid}: {SEATS} seats, {BUY_IN:,}+{FEE:,}; the bots sit now",
              file=out, flush=True)
    view = await ops.tournaments.get(tid)
    if at := bots_at(view.config):  # the window (one a restarted run finds still open)
        view = await until(ops, tid, lambda v: not seats_left(v) or over(v), clock, at)
    mine = any(e.player_id.startswith(f"{BOTS}-") and not e.place for e in view.entries)
    if seats_left(view) or mine:
        taken = len(view.entries)
        if taken:
            print(f"[sitgo] {tid}: {taken} of {SEATS} seats taken; the bots take the rest",
                  file=out, flush=True)
        args = argparse.Namespace(tournament=tid, players=SEATS, seed=seed, prefix=BOTS,
                                  strategy="mixed", timeout=3600.0)
        await tourney_bots.run(args, sys.stderr, env)
    elif not over(view):
        print(f"[sitgo] {tid}: people took every seat; no bots", file=out, flush=True)
    view = await until(ops, tid, over)  # the bots are out: the people play it out
    print(ending_line(view), file=out, flush=True)


async def run(env: Mapping[str, str], out: TextIO) -> int:
    where = room_targets(env)
    creds = credentials(env)
    ops = Client.connect(where[TABLE_TARGET_ENV], where[DEALER_TARGET_ENV],
                         where[WALLET_TARGET_ENV], creds.operator,
                         tournament_addr=env.get(tourney_bots.TOURNAMENT_TARGET_ENV)
                         or tourney_bots.DEFAULT_TOURNAMENT_TARGET)
    seed = 0
    try:
        while True:
            seed += 1
            try:
                await one(ops, env, out, seed)
            except StudError as exc:
                print(f"sitgo: {exc}", file=sys.stderr, flush=True)
            await asyncio.sleep(PAUSE_S)
    finally:
        await ops.close()


def main(argv: Sequence[str] | None = None) -> int:
    import os
    argparse.ArgumentParser(prog="python -m studclient.sitgo",
                            description=__doc__).parse_args(argv)

    async def guarded() -> int:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(signum, task.cancel)
        try:
            return await run(os.environ, sys.stdout)
        except asyncio.CancelledError:
            return 0

    try:
        return asyncio.run(guarded())
    except RuntimeError as exc:
        print(f"sitgo: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
