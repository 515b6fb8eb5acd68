"""The tournament process manager's round against the number of open tournaments (issue 29,
G8: each round loaded and ticked every tournament not over, so 449 open tournaments idled at
a quarter of a core and a registration waited 1.74 s to be paid). On a real local
redis-server, with the real app and ``tournament.driver.Rounds`` (the wallet's port answers
at once: the rounds are measured, not the wallet), for each count of idle tournaments
(multi-table, registering, starting in two hours) it prints:

- ``round_ms``: the median of a round's time once the first round has stepped each one (what
  a round costs now, every ``TOURNAMENT_TICK_S``);
- ``sweep_ms``: the round every ``SWEEP_S`` seconds that reads every tournament's version
  (and steps those that moved);
- ``first_round_ms``: a process's first round, which steps every tournament: what every
  round cost before;
- ``registration_ms`` and ``registration_rounds``: from a player's registration in one of
  them to its entry paid, rounds run back to back (add up to one ``TOURNAMENT_TICK_S`` for
  the wait before the next round).

Asserts nothing about speed. Run: ``.venv/bin/python bench/bench_tournament_idle.py
[COUNT ...]`` (default 50 500 2000 5000).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from studkit.auth import Principal, Role
from studkit.redis_client import connect
from studtools.redis_server import RedisServer
from tournament import commands as c
from tournament import events as ev
from tournament.app import TournamentApp, tournament_store
from tournament.driver import WOKEN_MARGIN_S, Rounds
from tournament.structure import TURBO

OPERATOR = Principal(Role.OPERATOR, "ops")
ROUNDS = 20


class Wallet:
    async def enter(self, *_args: object) -> None:
        pass

    async def refund(self, *_args: object) -> None:
        pass

    async def pay(self, *_args: object) -> None:
        pass

    async def exclusion(self, *_args: object) -> str:
        return ""


async def timed(rounds: Rounds) -> float:
    start = time.perf_counter()
    await rounds.round()
    return (time.perf_counter() - start) * 1000


async def bench(url: str, counts: list[int]) -> None:
    client = connect(url)
    app = TournamentApp(tournament_store(client))
    config = ev.Config("idle", ev.MULTI_TABLE, 100, 10, TURBO, seats=8,
                       start_at=time.time() + 7200)
    created = 0
    try:
        for count in counts:
            while created < count:
                await app.create(OPERATOR, f"idle-{created}", config, f"c-{created}")
                created += 1
            # the creations' wakes out of the rounds' margin: idle, as a lobby's are
            await asyncio.sleep(WOKEN_MARGIN_S + 0.5)
            rounds = Rounds(app, Wallet())
            first = await timed(rounds)
            steady = [await timed(rounds) for _ in range(ROUNDS)]
            rounds.sweep_next()
            sweep = await timed(rounds)
            tid = f"idle-{count // 2}"
            start = time.perf_counter()
            out = await app.player_command(Principal(Role.PLAYER, f"p{count}"), tid,
                                           c.Register, f"r-{count}")
            entry = out.records[0].event.entry_id  # type: ignore[union-attr]
            n = 0
            while not (await app.load(tid)).entries[entry].paid:
                await rounds.round()
                n += 1
            registration = (time.perf_counter() - start) * 1000
            print(f"open={count} round_ms={statistics.median(steady):.2f} "
                  f"sweep_ms={sweep:.1f} first_round_ms={first:.0f} "
                  f"registration_ms={registration:.1f} "
                  f"registration_rounds={n} stepped={rounds.stepped}", flush=True)
    finally:
        await client.aclose()


def main(counts: list[int]) -> None:
    with RedisServer(appendonly=False) as server:
        asyncio.run(bench(server.url, counts))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [50, 500, 2000, 5000])
