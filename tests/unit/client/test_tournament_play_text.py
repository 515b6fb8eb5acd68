"""``stud play``'s tournament text (libs/studclient/tui/tourney.py): the clock in the title,
the lobby's lines, the move and result lines."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from studclient.tournament import Seat
from studclient.tui.tourney import (
    chip_leader,
    clock_text,
    closed_text,
    entered,
    lobby_lines,
    moved_line,
    next_table,
    rail_line,
    rail_table,
    result_line,
)

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


def sng(tid: str, entries: int, start_at: int = 0, **kw: object) -> pb.TournamentSummary:
    s = pb.TournamentSummary(tournament_id=tid, name="Demo sit & go", buy_in=1000, fee=100,
                             format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, entries=entries,
                             **kw)  # type: ignore[arg-type]
    if start_at:
        s.start_at.seconds = start_at
    return s


def test_the_lobby_shows_when_the_bots_take_a_sit_and_go_s_seats_left() -> None:
    """Issue 29: the demo sit & go waits for people; the lobby says for how long, from the
    sit & go's own start_at."""
    registering = pb.TOURNAMENT_PHASE_REGISTERING
    [line] = lobby_lines([sng("sitgo-3", 1, 1_030, phase=registering,
                              registration_open=True)], now=1_007)
    assert line == ("sitgo-3  Demo sit & go (sit & go) 1,000+100 · registering · 1 entry · "
                    "registration open · bots take the seats left in 0:23")
    [late] = lobby_lines([sng("sitgo-3", 1, 1_030, phase=registering,
                              registration_open=True)], now=1_031)
    assert late.endswith("· bots taking the seats left")
    [running] = lobby_lines([sng("sitgo-3", 4, 1_030, phase=pb.TOURNAMENT_PHASE_RUNNING,
                                 players_left=3)], now=1_100)
    assert "bots" not in running and running.endswith("4 entries, 3 left")
    mtt = pb.TournamentSummary(tournament_id="mtt-1", name="Sunday", phase=registering,
                               format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, registration_open=True)
    mtt.start_at.seconds = 2_000
    assert lobby_lines([mtt], now=1_900)[0].endswith("· starts in 1:40")


def test_a_full_demo_sit_and_go_says_when_the_next_one_opens() -> None:
    running = pb.TournamentView(
        tournament_id="sitgo-3", phase=pb.TOURNAMENT_PHASE_RUNNING,
        config=pb.TournamentConfig(seats=4, structure=pb.TournamentStructure(
            levels=[L1, L2, L1])),
        clock=pb.TournamentClock(level=2, ends_at=Timestamp(seconds=1_041)),
        entries=[pb.TournamentEntryView(player_id=p, place=4 if p == "d" else 0)
                 for p in "abcd"])
    lobby = [sng("sitgo-2", 4, phase=pb.TOURNAMENT_PHASE_FINISHED),
             sng("sitgo-3", 4, phase=pb.TOURNAMENT_PHASE_RUNNING)]
    text = closed_text("sitgo-3", running, lobby, now=1_000, window_s=30)
    assert text.splitlines() == [
        "sitgo-3 is running (3 of 4 players left): no seat to take.",
        "The demo opens sitgo-4 5 s after sitgo-3 ends (now at level 2 of 3, the next in "
        "0:41); then people have 30 s before the bots take the seats left. stud play --lobby "
        "shows it; stud play --tournament sitgo-3 watches this one meanwhile."]
    # Another sit & go is open: that is where the seat is.
    lobby.append(sng("sitgo-4", 1, 1_020, phase=pb.TOURNAMENT_PHASE_REGISTERING,
                     registration_open=True))
    text = closed_text("sitgo-3", running, lobby, now=1_000, window_s=30)
    assert text.splitlines()[1] == ("sitgo-4 is open (1 of its seats taken · bots take the "
                                    "seats left in 0:20): stud play --register sitgo-4")
    # Not the demo's: no schedule to tell.
    other = pb.TournamentView(tournament_id="sng-9", phase=pb.TOURNAMENT_PHASE_RUNNING)
    assert closed_text("sng-9", other, [], now=0) == \
        "sng-9 is running (0 of 0 players left): no seat to take."


def test_a_rail_watches_the_picked_table_or_the_chip_leaders() -> None:
    """Issue 29: a player with no entry rails the tournament."""
    view = pb.TournamentView(
        tables=[pb.TournamentTableView(table_id=i) for i in ("T.1", "T.2", "T.3")],
        entries=[pb.TournamentEntryView(player_id="ann", chips=900, table_id="T.1", seat=2),
                 pb.TournamentEntryView(player_id="bob", chips=1_400, table_id="T.2", seat=4),
                 pb.TournamentEntryView(player_id="cat", chips=1_400, table_id="T.3", seat=1),
                 pb.TournamentEntryView(player_id="dan", chips=0, place=4),
                 pb.TournamentEntryView(player_id="eve", chips=5_000)])  # not seated yet
    leader = chip_leader(view)
    assert leader is not None and leader.player_id == "bob"  # a tie: the first table
    assert rail_table(view) == "T.2"
    assert rail_table(view, "T.3") == "T.3"
    assert rail_table(view, "T.9") == "T.2"  # a picked table that closed: the leader's
    assert next_table(view, "T.2") == "T.3" and next_table(view, "T.3") == "T.1"
    assert rail_line(view, "T.2", "") == ("Watching table T.2 (the chip leader's, bob with "
                                          "1,400) as the public sees it")
    assert rail_line(view, "T.3", "T.3").endswith("(picked) as the public sees it")
    assert entered(view, "ann") and not entered(view, "dan") and not entered(view, "zed")
    assert rail_table(pb.TournamentView()) == "" and next_table(pb.TournamentView(), "") == ""
