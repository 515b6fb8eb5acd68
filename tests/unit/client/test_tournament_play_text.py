"""``stud play``'s tournament text (libs/studclient/tui/tourney.py): the clock in the title,
the lobby's lines, the move and result lines."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from studclient.tournament import Seat
from studclient.tui.tourney import clock_text, lobby_lines, moved_line, result_line

L1 = pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=60)
L2 = pb.TournamentLevel(ante=25, bring_in=50, small_bet=150, big_bet=300, seconds=60)


def running(**clock: object) -> pb.TournamentView:
    return pb.TournamentView(
        tournament_id="T", config=pb.TournamentConfig(name="Sunday"),
        phase=pb.TOURNAMENT_PHASE_RUNNING,
        clock=pb.TournamentClock(level=1, stakes=L1, next=L2,
                                 ends_at=Timestamp(seconds=1000), **clock))  # type: ignore[arg-type]


def test_the_clock_shows_the_level_its_stakes_and_the_time_to_the_next() -> None:
    text = clock_text(running(), now=1000 - 83)
    assert text.startswith("Level 1 · ")
    assert "ante" in text and "in 1:23" in text and "next" in text
    assert clock_text(running(), now=1000 - 5) != text  # it counts down


def test_the_clock_on_a_break_and_before_the_start() -> None:
    assert clock_text(running(on_break=True), now=955).startswith("Break after level 1")
    assert "0:45" in clock_text(running(on_break=True), now=955)
    waiting = pb.TournamentView(tournament_id="T", config=pb.TournamentConfig(name="Sunday"),
                                phase=pb.TOURNAMENT_PHASE_REGISTERING)
    assert clock_text(waiting, now=0) == "Sunday: registering"
    assert clock_text(None, now=0) == ""


def test_the_lobby_has_a_line_a_tournament_with_what_a_player_decides_on() -> None:
    lines = lobby_lines([
        pb.TournamentSummary(tournament_id="sng-1", name="Turbo", buy_in=1000, fee=100,
                             format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, entries=2,
                             phase=pb.TOURNAMENT_PHASE_REGISTERING, registration_open=True),
        pb.TournamentSummary(tournament_id="mtt-1", name="Sunday", buy_in=500, fee=50,
                             format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, entries=30,
                             players_left=12, phase=pb.TOURNAMENT_PHASE_RUNNING)])
    assert len(lines) == 2
    assert lines[0].startswith("sng-1  Turbo (sit & go)") and "registration open" in lines[0]
    assert "12 left" in lines[1] and "running" in lines[1] and "registration" not in lines[1]
    assert lobby_lines([]) == ["no tournaments"]


def test_move_and_result_lines() -> None:
    assert moved_line(None, Seat("T.1", 3)) == "Seated: table T.1 seat 3"
    assert moved_line(Seat("T.1", 3), Seat("T.2", 5)) == \
        "Moved: table T.1 seat 3 -> table T.2 seat 5"
    view = pb.TournamentView(phase=pb.TOURNAMENT_PHASE_FINISHED, entries=[
        pb.TournamentEntryView(entry_id="e1", player_id="ann", place=4, prize=0),
        pb.TournamentEntryView(entry_id="e3", player_id="ann", place=2, prize=300),
        pb.TournamentEntryView(entry_id="e2", player_id="bob", place=1, prize=700)])
    assert result_line(view, "ann").startswith("You finished in place 2 of 3: prize ")
    assert result_line(view, "cy") == "Tournament finished"
