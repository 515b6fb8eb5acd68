"""``stud bots --tournament``: a bot's play at a table that dies other than by being cancelled
(moved, out) is an error of the run, never a silent stop (the tournament campaign's stall:
a bot whose table task had ended acted no more, and only its time-outs moved the table)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from studclient.bots import Bot
from studclient.tourney_bots import TourneyBot, TourneyTally


def a_bot() -> TourneyBot:
    client: Any = object()  # _ended touches no client
    return TourneyBot("b1", client, "random", Bot("b1", client, "", "random",
                                                   lambda view, rng: None,  # type: ignore[arg-type,return-value]
                                                   random.Random(1)), tables=["T.1"])


async def test_a_table_play_that_raises_is_an_error_of_the_run() -> None:
    bot, tally = a_bot(), TourneyTally()

    async def dies() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(dies())
    await asyncio.wait([task])
    bot._ended(tally, task)
    assert tally.errors == ["b1 at T.1: RuntimeError: boom"]


async def test_a_table_play_cancelled_by_a_move_is_not() -> None:
    bot, tally = a_bot(), TourneyTally()
    task = asyncio.create_task(asyncio.sleep(10))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait([task])
    bot._ended(tally, task)
    assert tally.errors == []
