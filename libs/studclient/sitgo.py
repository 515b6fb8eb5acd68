"""``python -m studclient.sitgo``: the demo sit & go ``make run`` starts beside the demo table.

It creates a sit & go (operator) ``sitgo-N`` of :data:`SEATS` seats with a fast demo
structure, has the bots ``sitgo-bot-1..`` enter it and play it out with ``stud bots
--tournament`` (:mod:`studclient.tourney_bots`), prints one line when it ends (the winner and
the prizes), then creates the next one, for ever. A restarted run (``make run`` again, or
this process restarted after it died) carries on with the latest sit & go that is not over:
the bots play the entries they hold. Players may take a seat first: ``stud play --register
sitgo-N`` while it is registering (the bots fill the seats left), then ``stud play
--tournament sitgo-N``.

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
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

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
LADDER: Final = ((5, 10, 25), (10, 25, 50), (20, 40, 100), (40, 75, 200), (75, 150, 400),
                 (150, 300, 800), (300, 600, 1_600), (600, 1_200, 3_200))
"""A demo ladder (ante, bring-in, small bet): the small bet doubling; the stack is 80 first
small bets."""
NUMBER: Final = re.compile(rf"^{PREFIX}-(\d+)$")


def config(level_s: int = 60) -> pb.TournamentConfig:
    structure = pb.TournamentStructure(starting_stack=2_000, levels=[
        pb.TournamentLevel(ante=a, bring_in=b, small_bet=s, big_bet=2 * s, seconds=level_s)
        for a, b, s in LADDER])
    return pb.TournamentConfig(name="Demo sit & go", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO,
                               buy_in=BUY_IN, fee=FEE, seats=SEATS, structure=structure)


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


async def one(ops: Client, env: Mapping[str, str], out: TextIO, seed: int) -> None:
    """Play the current sit & go (or a new one) to its end."""
    tid, nxt = current(await ops.tournaments.lobby())
    if tid is None:
        tid = f"{PREFIX}-{nxt}"
        with contextlib.suppress(AlreadyExists):
            level_s = max(1, int(env.get(LEVEL_S_ENV) or 60))
            await ops.tournaments.create(tid, config(level_s), command_id=f"create-{tid}")
        print(f"[sitgo] {tid}: {SEATS} seats, {BUY_IN:,}+{FEE:,}; stud play --register {tid}"
              f" to take one before the bots do", file=out, flush=True)
    args = argparse.Namespace(tournament=tid, players=SEATS, seed=seed, prefix=BOTS,
                              strategy="mixed", timeout=3600.0)
    await tourney_bots.run(args, sys.stderr, env)
    print(ending_line(await ops.tournaments.get(tid)), file=out, flush=True)


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
