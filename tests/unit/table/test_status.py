"""A table's outage clock (``table.status.Status``): how long a hand still waits for the
dealer or the wallet before it is void."""

from __future__ import annotations

import asyncio

from sim.loop import SimLoop
from table.status import Status


def on_simulated_time(body: object) -> None:
    loop = SimLoop()
    try:
        loop.run_until_complete(body)  # type: ignore[arg-type]
    finally:
        loop.close()


def test_the_clock_runs_from_the_first_unanswered_call_of_a_hand() -> None:
    async def body() -> None:
        status = Status("t1")
        assert status.give_up_after(30, 1) == 30
        await asyncio.sleep(10)
        assert status.give_up_after(30, 1) == 20
        await asyncio.sleep(25)
        assert status.give_up_after(30, 1) == 0
        status.resumed()
        assert status.give_up_after(30, 1) == 30

    on_simulated_time(body())


def test_a_new_hand_starts_the_clock_again() -> None:
    """A hand that ended while its clock ran (voided by an operator, say) leaves nothing to
    the next: its first lost call does not void it at once."""
    async def body() -> None:
        status = Status("t1")
        status.give_up_after(30, 1)
        await asyncio.sleep(40)
        assert status.give_up_after(30, 1) == 0
        assert status.give_up_after(30, 2) == 30

    on_simulated_time(body())


def test_an_answer_even_a_refusal_stops_the_clock() -> None:
    """A refusal is an answer: the dealer is not out, so refusals for longer than the limit
    do not leave the next call no time at all; the waiting reason stays."""
    async def body() -> None:
        status = Status("t1")
        status.give_up_after(30, 1)
        status.waiting("dealer refused: deal_out_of_step")
        await asyncio.sleep(40)
        status.answered()
        assert status.give_up_after(30, 1) == 30
        assert status.waiting_for == "dealer refused: deal_out_of_step"

    on_simulated_time(body())
