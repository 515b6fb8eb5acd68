"""``stud replay tournament``'s places check: a permutation of the field, ties included
(found by ``make tournament``: two entries busted on one hand with equal stacks share places
58-59, and the check counted that range once per entry, so a finished tournament with a tie
was never verified)."""

from __future__ import annotations

from stud.v1 import tournament_pb2 as pb
from studtools.replay_tournament import History, check_places


def history(busts: list[tuple[str, int, int]], field: int) -> History:
    """``field`` entries e1..; ``busts``: (entry, round, start stack); finished."""
    h = History(paid=[f"e{i}" for i in range(1, field + 1)], finished="e1")
    h.busts = [pb.TournamentEvent.Busted(entry_id=e, round=r, start_stack=s)
               for e, r, s in busts]
    return h


def test_a_tie_shares_its_places_and_the_field_is_still_a_permutation() -> None:
    tied = history([("e4", 1, 500), ("e3", 1, 500), ("e2", 2, 100)], field=4)
    assert check_places(tied) == []


def test_places_that_are_not_a_permutation_are_a_problem() -> None:
    # an entry busted twice (a log that says so) leaves place 4 to nobody
    twice = history([("e4", 1, 500), ("e4", 2, 100)], field=4)
    problems = check_places(twice)
    assert problems and problems[0].startswith("places are not 1..4")
