"""RULES 2.5: stakes that change between hands (tournaments). The change is its own event,
only between hands, validated by 2.3, and a fold of the log gives every hand the stakes it
was dealt with."""

from __future__ import annotations

import pytest

from rules import TableConfig, fold
from rules.commands import ChangeStakes, Fold, PostBringIn
from rules.errors import Reason, RuleViolation
from rules.events import AntePosted, BringInPosted, StakesChanged
from rules.testing import TableDriver

START = TableConfig.for_stakes(200)  # 200/400, ante 40, bring-in 50
LEVEL_2 = ChangeStakes(small_bet=400, big_bet=800, ante=100, bring_in=100)


def finish(t: TableDriver) -> None:
    """Third street: the bring-in, then every other seat folds."""
    t.deal_from("2c 9d 3h Kd 5s 7h")
    t.apply(PostBringIn(seat=t.legal().seat))
    while t.state.hand_in_progress:
        t.apply(Fold(seat=t.legal().seat))


def test_new_stakes_between_hands_are_one_event_and_keep_the_rest() -> None:
    t = TableDriver(START, stacks={1: 10_000, 2: 10_000})
    events = t.apply(LEVEL_2)
    assert events == (StakesChanged(small_bet=400, big_bet=800, ante=100, bring_in=100),)
    assert (t.config.small_bet, t.config.big_bet, t.config.ante, t.config.bring_in) == (
        400, 800, 100, 100)
    assert (t.config.seats, t.config.max_raises, t.config.rake) == (8, 3, None)


def test_never_during_a_hand() -> None:
    t = TableDriver(START, stacks={1: 10_000, 2: 10_000})
    t.start()
    with pytest.raises(RuleViolation) as info:
        t.apply(LEVEL_2)
    assert info.value.reason is Reason.HAND_IN_PROGRESS
    assert t.config == START


def test_a_fold_of_the_log_gives_every_hand_its_stakes() -> None:
    t = TableDriver(START, stacks={1: 10_000, 2: 10_000})
    t.start()
    finish(t)
    t.apply(LEVEL_2)
    t.start()
    finish(t)
    antes = [e.amount for e in t.events if isinstance(e, AntePosted)]
    bring_ins = [e.amount for e in t.events if isinstance(e, BringInPosted)]
    assert antes == [40, 40, 100, 100]
    assert bring_ins == [50, 100]
    assert fold(t.events) == t.state


@pytest.mark.parametrize("command", [
    ChangeStakes(small_bet=400, big_bet=400, ante=100, bring_in=100),
    ChangeStakes(small_bet=400, big_bet=800, ante=-1, bring_in=100),
    ChangeStakes(small_bet=400, big_bet=800, ante=100, bring_in=400),
    ChangeStakes(small_bet=0, big_bet=800, ante=100, bring_in=0),
    ChangeStakes(small_bet=True, big_bet=800, ante=100, bring_in=50),  # type: ignore[arg-type]
])
def test_the_new_config_must_pass_2_3(command: ChangeStakes) -> None:
    t = TableDriver(START, stacks={1: 10_000, 2: 10_000})
    with pytest.raises(RuleViolation) as info:
        t.apply(command)
    assert info.value.reason is Reason.INVALID_CONFIG
    assert t.config == START


def test_an_ante_of_zero_is_allowed() -> None:
    t = TableDriver(START, stacks={1: 10_000, 2: 10_000})
    t.apply(ChangeStakes(small_bet=400, big_bet=800, ante=0, bring_in=100))
    t.start()
    assert not [e for e in t.events if isinstance(e, AntePosted)]


def test_a_table_not_open_has_no_stakes_to_change() -> None:
    from rules.decide import decide
    from rules.state import initial_state
    with pytest.raises(RuleViolation) as info:
        decide(initial_state(), LEVEL_2)
    assert info.value.reason is Reason.INVALID_COMMAND
