"""``stud replay verify`` on a tampered log whose own events do not fold (a stored event
moved to a seat not in the hand, a card dealt twice, ...): a problem naming the table, hand
and event, never an exception (the review: 115 of 600 random tampered logs raised)."""

from __future__ import annotations

import random
from dataclasses import fields, replace

from rules.events import Called
from studtools.replay_hands import Logged, iter_verify_hands, verify_hands

from .test_replay_hands import played


def _tampered(rng: random.Random, log: list[Logged]) -> list[Logged]:
    """The log with one event changed: an int field set to an odd value, or the event
    dropped, repeated or moved."""
    log = list(log)
    at = rng.randrange(len(log))
    item = log[at]
    how = rng.random()
    if how < 0.1:
        del log[at]
    elif how < 0.2:
        log.insert(at, item)
    elif how < 0.3:
        log.insert(rng.randrange(len(log)), log.pop(at))
    else:
        ints = [f.name for f in fields(item.event)
                if isinstance(getattr(item.event, f.name), int)
                and not isinstance(getattr(item.event, f.name), bool)]
        if not ints:
            return log
        name = rng.choice(ints)
        value = rng.choice([0, 2, 3, 5, 7, 9, -1, 103, getattr(item.event, name) + 10])
        try:
            log[at] = replace(item, event=replace(item.event, **{name: value}))
        except (ValueError, TypeError):  # the event refuses the value: not a stored one
            return log
    return log


def test_verify_never_raises_on_random_tampered_logs() -> None:
    rng = random.Random(20261206)
    logs = [played(hands=3, seed=seed)[1] for seed in range(6)]
    failed = 0
    for _ in range(300):
        log = _tampered(rng, rng.choice(logs))
        pairs = verify_hands("t1", log)  # raises on the defect
        assert [(h.number, v.ok) for h, v in pairs] == [
            (h.number, v.ok) for h, v in iter_verify_hands("t1", log)]
        failed += any(not v.ok for _h, v in pairs)
    assert failed > 100, failed


def test_a_call_moved_to_an_empty_seat_is_a_problem_naming_the_event() -> None:
    _table, log = played(hands=3)
    at = next(i for i, item in enumerate(log)
              if isinstance(item.event, Called) and i > len(log) // 3)
    called = log[at].event
    assert isinstance(called, Called)
    log[at] = replace(log[at], event=replace(called, seat=7))
    pairs = verify_hands("t1", log)
    bad = [(h, v) for h, v in pairs if not v.ok]
    assert len(bad) == 1, [v.problems for _h, v in pairs]
    hand, verdict = bad[0]
    assert verdict.problems[0].sequence == log[at].sequence, verdict.problems
    assert "seat=7" in verdict.problems[0].what
    assert pairs[-1][0].number == hand.number  # the table's verification stops there
