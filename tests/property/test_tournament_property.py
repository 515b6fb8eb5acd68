"""Properties of the tournament model (services/tournament), without Redis:

- for any field size and pool, the prizes sum to the pool and never rise with the place;
- for any bust order with ties, the standings' places tile 1..field and the amounts won sum
  to the pool; a split by chips sums to what is split;
- balancing from any layout reaches tables within one player (or breaks one) and moves a
  player only into an open seat;
- whole tournaments, sit & go and multi-table, with late registration and re-entry, played
  against a model of the tables in any order of steps the seed draws: chips conserved after
  every step, nobody in two seats, tables balanced whenever nothing is pending, nobody moved
  in a hand, one hand a table a round of hand for hand, and at the end the prizes paid once
  each, summing to the pool, places a permutation, every repeated report a no-op, and the
  log folding to the same state (``studtest.tournament``).
"""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from studtest.tournament import Run, final_check, play
from tournament import commands as c
from tournament import events as ev
from tournament import seating
from tournament.payouts import Standing, prizes, split_by_chips, split_places
from tournament.structure import TURBO


@given(pool=st.integers(0, 10**9), field=st.integers(2, 2000))
def test_prizes_sum_to_the_pool(pool: int, field: int) -> None:
    p = prizes(pool, field)
    assert sum(p) == pool and list(p) == sorted(p, reverse=True) and len(p) <= field


@st.composite
def finishes(draw: st.DrawFn) -> tuple[int, list[Standing], list[str]]:
    """A field, its standings from rounds of busts drawn with ties, and the entry order."""
    field = draw(st.integers(2, 120))
    entries = [f"e{i}" for i in range(field)]
    order = draw(st.permutations(entries))
    place, i, out = 1, 0, []
    while i < field:
        k = 1 if i == 0 else draw(st.integers(1, min(4, field - i)))
        out.extend(Standing(e, place, place + k - 1) for e in order[i:i + k])
        place, i = place + k, i + k
    return field, out, list(draw(st.permutations(entries)))


@given(data=finishes(), pool=st.integers(0, 10**7))
def test_tied_places_pay_out_the_whole_pool(data: tuple[int, list[Standing], list[str]],
                                            pool: int) -> None:
    field, standings, order = data
    won = split_places(pool, field, standings, order)
    assert sum(won.values()) == pool
    table = prizes(pool, field)
    for s in standings:
        share = sum(table[p - 1] for p in range(s.place, s.place_to + 1) if p <= len(table))
        k = s.place_to - s.place + 1
        assert share // k <= won.get(s.entry, 0) <= share // k + 1


@given(amount=st.integers(0, 10**7),
       chips=st.lists(st.integers(1, 10**6), min_size=1, max_size=60))
def test_a_split_by_chips_sums_to_the_amount(amount: int, chips: list[int]) -> None:
    stacks = [(f"e{i}", n) for i, n in enumerate(chips)]
    out = split_by_chips(amount, stacks)
    assert sum(out.values()) == amount
    for (e, n), (f, m) in itertools.pairwise(stacks):
        if n > m:
            assert out[e] >= out[f]


@given(seats=st.integers(2, 8), tables=st.integers(1, 8), seed=st.integers(0, 2**32),
       fill=st.floats(0.05, 1.0))
def test_balancing_reaches_tables_within_one(seats: int, tables: int, seed: int,
                                             fill: float) -> None:
    rng = random.Random(seed)
    layout: dict[str, list[str | None]] = {
        f"T{i}": [f"p{i}.{s}" if rng.random() < fill else None for s in range(seats)]
        for i in range(tables)}
    alive = {e for seats_ in layout.values() for e in seats_ if e}
    if len(alive) < 2:
        return
    for _ in range(200):
        step = seating.plan({k: tuple(v) for k, v in layout.items()}, alive, seats)
        if step is None:
            break
        if isinstance(step, seating.BreakTable):
            while True:
                m = seating.break_move({k: tuple(v) for k, v in layout.items()}, alive,
                                       step.table_id)
                if m is None:
                    break
                assert layout[m.to_table][m.to_seat - 1] is None
                layout[m.from_table][m.from_seat - 1] = None
                layout[m.to_table][m.to_seat - 1] = m.entry
            assert all(e is None for e in layout.pop(step.table_id))
            continue
        assert layout[step.to_table][step.to_seat - 1] is None, "moved into a taken seat"
        assert layout[step.from_table][step.from_seat - 1] == step.entry
        layout[step.from_table][step.from_seat - 1] = None
        layout[step.to_table][step.to_seat - 1] = step.entry
    final = {k: tuple(v) for k, v in layout.items()}
    assert seating.spread(final, alive) <= 1
    assert len(final) == seating.tables_needed(len(alive), seats)
    assert sorted(e for v in final.values() for e in v if e) == sorted(alive)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), field=st.integers(2, 40), seats=st.integers(2, 8),
       late=st.integers(0, 3), re_entries=st.integers(0, 2), sng=st.booleans())
def test_whole_tournaments_conserve_chips_and_pay_the_pool(
        seed: int, field: int, seats: int, late: int, re_entries: int, sng: bool) -> None:
    rng = random.Random(seed)
    run = Run(rng)
    if sng:
        cfg = ev.Config("sng", ev.SIT_AND_GO, 1000, 100, TURBO, seats=seats)
        field = seats
    else:
        cfg = ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO, seats=seats, start_at=60.0,
                        late_through_level=late, re_entries=re_entries)
    run.do(c.Create("T", cfg))
    for i in range(field):
        run.do(c.Register(f"p{i}"))
    play(run, tick=60.0)
    final_check(run)
    assert run.hands >= 1
