"""Seating and balancing by the TDA stud rule (services/tournament/seating.py)."""

from __future__ import annotations

from tournament.seating import (
    BreakTable,
    Move,
    break_move,
    first_draw,
    late_seat,
    mover,
    plan,
    spread,
    tables_needed,
)


def test_the_first_draw_spreads_the_field_within_one() -> None:
    entries = [f"e{i}" for i in range(19)]
    draw = first_draw(entries, ["A", "B", "C"], 8, seed=7)
    assert sorted(e for e, _, _ in draw) == sorted(entries)
    per = {t: sum(1 for _, x, _ in draw if x == t) for t in "ABC"}
    assert sorted(per.values()) == [6, 6, 7]
    assert len({(t, s) for _, t, s in draw}) == 19
    assert all(1 <= s <= 8 for _, _, s in draw)
    assert draw == first_draw(entries, ["A", "B", "C"], 8, seed=7)
    assert draw != first_draw(entries, ["A", "B", "C"], 8, seed=8)
    assert tables_needed(19, 8) == 3 and tables_needed(16, 8) == 2 and tables_needed(1, 8) == 1


def test_a_player_moves_to_the_last_open_seat_of_the_short_table_by_position() -> None:
    a = ("a1", "a2", "a3", "a4", "a5", None)
    b = ("b1", None, "b3", None, None, None)
    alive = set(a) | set(b)
    step = plan({"A": a, "B": b}, alive, 6)
    # B's last open seat is 6; A's seat 6 is empty, so the next occupied seat wraps to 1
    assert step == Move("a1", "A", 1, "B", 6)
    assert mover(a, alive, 3) == 3


def test_busted_seats_are_neither_players_nor_open_seats() -> None:
    a = ("a1", "a2", "a3", "a4", "a5", "gone")
    b = ("b1", "b2", None, "x", "y", "z")
    alive = {"a1", "a2", "a3", "a4", "a5", "b1", "b2"}
    step = plan({"A": a, "B": b}, alive, 6)
    assert step == Move("a3", "A", 3, "B", 3)


def test_tables_within_one_need_no_move() -> None:
    a = ("a1", "a2", "a3", "a4")
    b = ("b1", "b2", None, "b4")
    c = ("c1", "c2", "c3", "c4")
    alive = {x for t in (a, b, c) for x in t if x}
    assert plan({"A": a, "B": b, "C": c}, alive, 4) is None
    assert spread({"A": a, "B": b, "C": c}, alive) == 1


def test_a_table_breaks_as_soon_as_the_field_fits_on_one_fewer() -> None:
    a = ("a1", "a2", "a3", None)
    b = ("b1", "b2", "b3", None)
    c = ("c1", "c2", None, None)
    alive = {x for t in (a, b, c) for x in t if x}
    layout = {"A": a, "B": b, "C": c}
    assert plan(layout, alive, 4) == BreakTable("C")  # 8 fit on two tables of 4
    first = break_move(layout, alive, "C")
    assert first == Move("c1", "C", 1, "A", 4)
    # the last opened of equal tables breaks
    assert plan({"A": ("a1", None), "B": ("b1", None)}, {"a1", "b1"}, 2) == BreakTable("B")


def test_a_late_entry_takes_the_shortest_table() -> None:
    layout = {"A": ("a1", "a2", None), "B": ("b1", None, None)}
    assert late_seat(layout, {"a1", "a2", "b1"}) == ("B", 3)
    assert late_seat({"A": ("a1", "a2")}, {"a1", "a2"}) is None
