"""The demo sit & go's choices (libs/studclient/sitgo.py) and make run's wiring of the
tournament service (libs/studtools/devrun.py)."""

from __future__ import annotations

from pathlib import Path

from stud.v1 import tournament_pb2 as pb
from studclient.sitgo import (
    WINDOW_ENV,
    bots_at,
    config,
    current,
    ending_line,
    is_demo,
    seats_left,
    window_s,
)
from studtools.devrun import PORTS, TARGET_ENV, env_file_text, service_env


def summary(tid: str, phase: pb.TournamentPhase) -> pb.TournamentSummary:
    return pb.TournamentSummary(tournament_id=tid, phase=phase)


def test_a_restart_carries_on_with_the_latest_sit_and_go_not_over() -> None:
    done, running = pb.TOURNAMENT_PHASE_FINISHED, pb.TOURNAMENT_PHASE_RUNNING
    assert current([]) == (None, 1)
    assert current([summary("sitgo-2", done), summary("sitgo-10", done),
                    summary("other-99", running)]) == (None, 11)
    assert current([summary("sitgo-3", running), summary("sitgo-4", done)]) == ("sitgo-3", 5)
    assert current([summary("sitgo-1", pb.TOURNAMENT_PHASE_REGISTERING)]) == ("sitgo-1", 2)


def test_the_demo_sit_and_go_is_a_valid_ladder_and_its_ending_names_the_winners() -> None:
    cfg = config(level_s=7)
    levels = cfg.structure.levels
    assert cfg.format == pb.TOURNAMENT_FORMAT_SIT_AND_GO and cfg.seats == 4
    assert all(lv.seconds == 7 for lv in levels)
    assert [lv.small_bet for lv in levels] == sorted({lv.small_bet for lv in levels})
    assert all(lv.big_bet == 2 * lv.small_bet and lv.bring_in < lv.small_bet for lv in levels)
    view = pb.TournamentView(tournament_id="sitgo-3", entries=[
        pb.TournamentEntryView(player_id="b", place=2, prize=1_200),
        pb.TournamentEntryView(player_id="a", place=1, prize=2_800),
        pb.TournamentEntryView(player_id="c", place=3)])
    assert ending_line(view) == "[sitgo] sitgo-3 over: 1. a 2,800, 2. b 1,200"


def test_make_run_points_the_tournament_at_the_table_and_the_wallet() -> None:
    addrs = {"dealer": "127.0.0.1:1", "wallet": "127.0.0.1:2", "table": "127.0.0.1:3"}
    assert service_env("tournament", addrs) == {"TOURNAMENT_TABLE_TARGET": "127.0.0.1:3",
                                                "TOURNAMENT_WALLET_TARGET": "127.0.0.1:2"}
    assert service_env("table", addrs) == {"DEALER_ADDR": "127.0.0.1:1",
                                           "WALLET_ADDR": "127.0.0.1:2"}
    assert PORTS["tournament"] == 50054
    text = env_file_text({**addrs, "tournament": "127.0.0.1:4"}, Path("k"))
    assert f"export {TARGET_ENV['tournament']}=127.0.0.1:4" in text.splitlines()


def test_the_demo_keeps_when_its_bots_sit_in_the_sit_and_go_for_every_client() -> None:
    """The demo's window for people (issue 29) is the sit & go's start_at: a time every
    client reads from the lobby or the view, not a guess."""
    cfg = config(level_s=7, bots_at=1_000.2)
    assert cfg.HasField("start_at") and cfg.start_at.seconds == 1_001
    assert bots_at(cfg) == 1_001
    assert bots_at(config(level_s=7)) == 0.0  # no window: the bots sit at once
    mtt = pb.TournamentConfig(format=pb.TOURNAMENT_FORMAT_MULTI_TABLE)
    mtt.start_at.seconds = 5
    assert bots_at(mtt) == 0.0
    view = pb.TournamentView(config=config(), registration_open=True,
                             entries=[pb.TournamentEntryView(player_id="alice")])
    assert seats_left(view) == 3
    view.registration_open = False
    assert seats_left(view) == 0
    assert window_s({}) == 30 and window_s({WINDOW_ENV: "12"}) == 12
    assert is_demo("sitgo-12") and not is_demo("sitgo-x") and not is_demo("mtt-1")
