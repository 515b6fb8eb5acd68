"""``python -m sim``'s plan of seeds (sim.__main__.Plan): the fewest seeds from the first whose
hands reach the run's, the same whatever order its processes finish them in."""

from __future__ import annotations

import gc
import random
import re

import pytest

from sim.__main__ import Plan, main


def _run(plan: Plan, hands_of: dict[int, int], jobs: int, rng: random.Random) -> list[int]:
    """The plan driven as ``_run_seeds`` drives it, the seeds running finished in a random
    order."""
    running: list[int] = []
    while (taken := plan.taken()) is None:
        while len(running) < jobs and (seed := plan.next()) is not None:
            running.append(seed)
        assert running, "the plan neither decided nor started a seed"
        seed = running.pop(rng.randrange(len(running)))
        plan.finish(seed, hands_of[seed])
    return taken


def test_a_run_takes_the_fewest_seeds_whatever_order_they_finish_in() -> None:
    hands_of = {seed: 418 + seed % 5 for seed in range(1, 300)}
    fewest = next(k for k in range(1, 300)
                  if sum(hands_of[s] for s in range(1, k + 1)) >= 100_000)
    assert fewest < 250  # ceil(100,000 / 400): what a fixed count of seeds would run
    for order in range(20):
        taken = _run(Plan(1, 100_000, 400), hands_of, jobs=2, rng=random.Random(order))
        assert taken == list(range(1, fewest + 1))
        assert sum(hands_of[s] for s in taken) >= 100_000


def test_seeds_that_fell_short_are_made_up_for_up_to_the_limit() -> None:
    short = {seed: 400 for seed in range(1, 20)} | {3: 12, 4: 7}  # two broke an invariant
    taken = _run(Plan(1, 4_000, 400), short, jobs=3, rng=random.Random(1))
    assert taken == list(range(1, 11))  # the limit: 10 seeds, though short of 4,000 hands
    plan = Plan(5, 2_000, 400)
    for _ in range(5):
        seed = plan.next()
        assert seed is not None
        plan.finish(seed, 400)
    assert plan.next() is None and plan.taken() == [5, 6, 7, 8, 9]


def test_no_seed_is_started_once_the_ones_running_could_reach_the_hands() -> None:
    plan = Plan(1, 1_000, 100)  # a limit of 10 seeds
    assert [plan.next(), plan.next(), plan.next()] == [1, 2, 3]
    plan.finish(1, 600)
    assert [plan.next(), plan.next()] == [4, 5]
    assert plan.next() is None  # 600 + 4 x 100 >= 1,000, if the four do as a clean seed does
    for seed in (2, 3, 5):
        plan.finish(seed, 100)
        assert plan.taken() is None  # seed 4 is not done: the seeds to take are not known
    plan.finish(4, 20)  # it broke early: one more seed makes its hands up
    assert plan.taken() is None and plan.next() == 6 and plan.next() is None
    plan.finish(6, 100)
    assert plan.taken() == [1, 2, 3, 4, 5, 6]


def test_the_command_runs_the_plan_and_says_so_last(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    threshold = gc.get_threshold()
    try:  # main tunes the collector for its run
        assert main(["--hands", "90", "--hands-per-seed", "30", "--tables", "2",
                     "--jobs", "2"]) == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    out = capsys.readouterr().out.splitlines()
    match = re.fullmatch(r"seeds=(\d+) hands=(\d+) faults=(\d+) violations=0", out[-1])
    assert match is not None, out[-1]
    seeds, hands = int(match[1]), int(match[2])
    assert 1 <= seeds <= 3 and hands >= 90
