"""The structure, the level clock and the payout table (services/tournament)."""

from __future__ import annotations

import pytest

from studkit.errors import BadRequest
from tournament.payouts import (
    Standing,
    paid_places,
    prizes,
    shares,
    split_by_chips,
    split_places,
)
from tournament.structure import DEFAULT, TURBO, Level, Structure, clock_at


def test_default_ladder_starts_as_the_big_series_do() -> None:
    first = [(lv.ante, lv.bring_in, lv.small_bet, lv.big_bet) for lv in DEFAULT.levels[:3]]
    assert first == [(100, 200, 500, 1000), (200, 200, 800, 1600), (300, 400, 1200, 2400)]
    assert {lv.seconds for lv in DEFAULT.levels} == {20 * 60}
    assert {lv.seconds for lv in TURBO.levels} == {6 * 60}
    bets = [lv.big_bet for lv in DEFAULT.levels]
    assert bets == sorted(bets) and len(set(bets)) == len(bets)


def test_a_level_must_pass_the_rules_stakes_check() -> None:
    with pytest.raises(BadRequest) as bad:
        Structure(levels=(Level(10, 100, 100, 200, 60),), starting_stack=1000)
    assert bad.value.reason == "invalid_stakes"
    with pytest.raises(BadRequest):
        Structure(levels=(Level(10, 20, 100, 200, 0),), starting_stack=1000)
    with pytest.raises(BadRequest):
        Structure(levels=(), starting_stack=1000)
    with pytest.raises(BadRequest):
        Structure(levels=DEFAULT.levels, starting_stack=0)
    with pytest.raises(BadRequest):
        Structure(levels=DEFAULT.levels, starting_stack=10, break_every=2, break_seconds=0)


def test_the_clock_runs_levels_then_breaks_and_repeats_the_last_level() -> None:
    s = Structure(levels=(Level(0, 10, 20, 40, 100), Level(0, 20, 40, 80, 100)),
                  starting_stack=1000, break_every=1, break_seconds=50)
    assert clock_at(s, 1000, 1000) == clock_at(s, 1000, 1099.9)
    assert clock_at(s, 1000, 1000).level == 1 and not clock_at(s, 1000, 1000).on_break
    c = clock_at(s, 1000, 1100)
    assert (c.level, c.on_break, c.ends_at) == (1, True, 1150)
    c = clock_at(s, 1000, 1150)
    assert (c.level, c.on_break, c.ends_at) == (2, False, 1250)
    c = clock_at(s, 1000, 1000 + 150 * 5 + 10)
    assert (c.level, c.on_break) == (6, False)
    assert s.level(6) == s.levels[-1]


def test_the_payout_table_by_field_size() -> None:
    assert shares(2) == shares(9) == (6500, 3500)
    assert shares(10) == shares(17) == (5000, 3000, 2000)
    assert paid_places(18) == 4 and paid_places(72) == 9
    assert paid_places(100) == 15 and paid_places(73) == 10
    for field in range(2, 400):
        s = shares(field)
        assert sum(s) == 10_000 and list(s) == sorted(s, reverse=True) and len(s) <= field
    with pytest.raises(ValueError):
        shares(1)


def test_prizes_sum_to_the_pool_and_the_odd_chips_go_to_first() -> None:
    assert prizes(1000, 9) == (650, 350)
    assert prizes(1001, 9) == (651, 350)
    assert prizes(7, 12) == (4, 2, 1)  # floors 3/2/1, the odd chip to first
    assert sum(prizes(123_457, 250)) == 123_457


def test_tied_places_split_their_summed_prizes_odd_chips_by_entry_order() -> None:
    # 10 entries, pool 1001: 501/300/200; places 2 and 3 tied: 500 split, no odd chip
    stands = [Standing("a", 1, 1), Standing("b", 2, 3), Standing("c", 2, 3)]
    stands += [Standing(f"x{i}", 4 + i, 4 + i) for i in range(7)]
    order = ["c", "b", "a", *[f"x{i}" for i in range(7)]]
    won = split_places(1001, 10, stands, order)
    assert won == {"a": 501, "b": 250, "c": 250}
    # pool 1000 (500/300/200), three share places 2-4: 500 over three, odd chips in order
    stands = [Standing("a", 1, 1), Standing("b", 2, 4), Standing("c", 2, 4),
              Standing("d", 2, 4)] + [Standing(f"x{i}", 5 + i, 5 + i) for i in range(6)]
    won = split_places(1000, 10, stands, ["d", "c", "b", "a", *[f"x{i}" for i in range(6)]])
    assert won == {"a": 500, "d": 167, "c": 167, "b": 166}
    assert sum(won.values()) == 1000


def test_split_by_chips_rounds_down_and_gives_odd_chips_to_the_largest_stacks() -> None:
    assert split_by_chips(100, [("a", 1), ("b", 1), ("c", 1)]) == {"a": 34, "b": 33, "c": 33}
    assert split_by_chips(10, [("a", 1), ("b", 2)]) == {"a": 3, "b": 7}
    with pytest.raises(ValueError):
        split_by_chips(10, [("a", 0)])
