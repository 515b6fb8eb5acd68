"""Every tournament event (as whole runs of the model produce them) goes to a
``stud.v1.TournamentEvent`` and back unchanged, through bytes (services/tournament/codec.py);
a configuration too, presets included."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stud.v1 import tournament_pb2 as pb
from studtest.tournament import Run, play
from tournament import commands as c
from tournament import events as ev
from tournament.codec import (
    config_from_proto,
    config_to_proto,
    event_at,
    event_from_proto,
    event_to_proto,
)
from tournament.structure import DEFAULT, TURBO


def roundtrip(e: ev.Event) -> ev.Event:
    data = event_to_proto(e).SerializeToString()
    return event_from_proto(pb.TournamentEvent.FromString(data), event_at(e) or 0.0)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32), field=st.integers(3, 30), seats=st.integers(2, 8))
def test_every_event_of_a_run_round_trips(seed: int, field: int, seats: int) -> None:
    run = Run(random.Random(seed))
    run.do(c.Create("T", ev.Config("mtt", ev.MULTI_TABLE, 1000, 100, TURBO, seats=seats,
                                   start_at=60.0, late_through_level=2, re_entries=1)))
    for i in range(field):
        run.do(c.Register(f"p{i}"))
    run.do(c.SettleEntry("e1", True))
    run.do(c.Unregister("p0"))
    play(run, tick=60.0)
    kinds = set()
    for e in run.log:
        assert roundtrip(e) == e
        kinds.add(type(e))
    assert {ev.Created, ev.Started, ev.SeatAssigned, ev.HandEnded, ev.PrizeDue} <= kinds


def test_the_kinds_no_run_above_is_sure_to_make_round_trip_too() -> None:
    for e in (ev.EntryDropped("e1", "insufficient_funds"), ev.Cancelled("operator", 5.0),
              ev.HandForHand(True), ev.HandForHandRound(3, ("T.1", "T.2")),
              ev.TableBreaking("T.2"), ev.TableKept("T.2"), ev.BreakStarted(4, 9.0),
              ev.MoveStarted("m1", "e1", "T.1", 3, "T.2", 8), ev.MoveUnseated("m1", 1234),
              ev.MoveSeated("m1"), ev.MoveCancelled("m2", "busted"),
              ev.RefundDue("refund/e1", "e1", "p1", 100, 10),
              ev.PrizeDue("prize/e2", "e2", "p2", 77, 3, 4)):
        assert roundtrip(e) == e


def test_a_config_round_trips_and_a_preset_is_named() -> None:
    for structure in (DEFAULT, TURBO):
        cfg = ev.Config("x", ev.MULTI_TABLE, 500, 50, structure, seats=7, start_at=1.5e9,
                        min_entrants=9, max_entrants=90, late_through_level=4, re_entries=2)
        assert config_from_proto(pb.TournamentConfig.FromString(
            config_to_proto(cfg).SerializeToString())) == cfg
    named = pb.TournamentConfig(name="s", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=10,
                                seats=6, structure=pb.TournamentStructure(preset="turbo"))
    assert config_from_proto(named) == ev.Config("s", ev.SIT_AND_GO, 10, 0, TURBO, seats=6)
