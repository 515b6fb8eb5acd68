"""The tournament's clients end to end over the real room and tournament service (real gRPC,
real Redis): ``stud bots --tournament ID`` (the bots, using only the SDK, fund their accounts,
register, play at the tables the tournament seats them at, following moves in a multi-table
one, until they bust or win) and ``stud play`` (the lobby's register and list; the table
screen that follows the player's seat through moves, with the level clock in its title)."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from studclient import Client
from studclient.tournament import SeatTracker
from studclient.tui.app import screen_text
from studclient.tui.command import Setup
from studclient.tui.tourney import TournamentPlayApp
from studtest.table import Room
from studtest.tournament_service import (
    OffsetClock,
    RunningTournament,
    eventually,
    running_tournament,
)
from studtools import cli, replay_tournament
from studtools.devkeys import DevKeys
from studtools.replay_source import RedisSource
from tournament.config import Settings

pytestmark = pytest.mark.integration

FAST = pb.TournamentStructure(starting_stack=600, levels=[
    pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=2),
    pb.TournamentLevel(ante=25, bring_in=50, small_bet=150, big_bet=300, seconds=2),
    pb.TournamentLevel(ante=50, bring_in=100, small_bet=300, big_bet=600, seconds=3),
    # the last levels' antes end it: two calling stations left heads-up at 50 a hand could
    # chop pots for minutes (a multi-table run in CI did, for 150 s and 3,147 actions)
    pb.TournamentLevel(ante=200, bring_in=300, small_bet=600, big_bet=1200, seconds=3),
    pb.TournamentLevel(ante=600, bring_in=700, small_bet=1200, big_bet=2400, seconds=600)])
START_S = 3600
"""How far after its creation a multi-table tournament here starts by the service's clock
(``tournament_clock``): it starts when the test moves the clock there, once every entrant is
paid, not when a busy machine gets there (a few seconds of wall time were overrun: fewer than
two paid at the start, or entrants registering after late registration closed)."""
PAID_S = 60.0
"""How long the bots have to fund and register (one after another) before the start."""


@pytest.fixture
async def service(room_settings: Settings, dev_keys: DevKeys,
                  tournament_clock: OffsetClock) -> Any:
    settings = room_settings
    async with running_tournament(settings, dev_keys, clock=tournament_clock) as running:
        yield running


def env_for(room: Room, service: RunningTournament, keys: DevKeys,
            monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {"STUD_TABLE_TARGET": f"127.0.0.1:{room.table_port}",
           "STUD_DEALER_TARGET": f"127.0.0.1:{room.dealer.port}",
           "STUD_WALLET_TARGET": f"127.0.0.1:{room.wallet.port}",
           "STUD_TOURNAMENT_TARGET": f"127.0.0.1:{service.port}",
           "STUD_ISSUER_KEY": keys.issuer_key.pem()}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STUD_OPERATOR_TOKEN", raising=False)
    return env


async def bots(*args: str) -> tuple[int, list[str], dict[str, str]]:
    out = io.StringIO()
    # The command runs its own event loop: in a thread, while the room serves on this one.
    status = await asyncio.to_thread(cli.main, ["bots", *args, "--timeout", "150"], out)
    print(out.getvalue())
    lines = out.getvalue().strip().splitlines()
    return status, lines, dict(part.split("=") for part in lines[-1].split())


async def all_paid(service: RunningTournament, tid: str, players: set[str],
                   bots_run: asyncio.Task[Any]) -> None:
    """Wait until ``players`` hold ``tid``'s entries, each paid (the bots' run ended first,
    or too slow: the test fails here, the bots' output printed)."""
    async with asyncio.timeout(PAID_S):
        while True:
            view = await service.client.get(tid)
            if {e.player_id for e in view.entries if e.paid} == players:
                return
            if bots_run.done():
                raise AssertionError(f"the bots ended before the start: {await bots_run}")
            await asyncio.sleep(0.05)


async def test_bots_play_a_sit_and_go_to_the_end(
        room: Room, service: RunningTournament, dev_keys: DevKeys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    env_for(room, service, dev_keys, monkeypatch)
    await service.client.create("sng-bots", pb.TournamentConfig(
        name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=500, fee=50, seats=3,
        structure=FAST))
    status, lines, last = await bots("--tournament", "sng-bots", "--players", "3",
                                     "--seed", "3", "--prefix", "sb")
    assert status == 0
    assert list(last) == ["tournament", "bots", "actions", "moves", "busts", "errors",
                          "phase"]
    assert last["bots"] == "3" and last["errors"] == "0" and last["phase"] == "finished"
    assert int(last["actions"]) > 0 and last["busts"] == "2" and last["moves"] == "0"
    assert sum(line.startswith("bot sb-") and " registered" in line for line in lines) == 3
    view = await service.client.get("sng-bots")
    assert sorted(e.player_id for e in view.entries) == ["sb-1", "sb-2", "sb-3"]
    prizes = {e.player_id: e.prize for e in view.entries}
    assert sum(prizes.values()) == 1500
    for name, prize in prizes.items():
        assert f"bot {name} entry" in "\n".join(lines)
        assert f"prize {prize}" in next(line for line in lines if f"bot {name} entry" in line)
    async def paid() -> bool:  # each bot was funded with exactly the buy-in and fee
        return all([await room.wallet.client.player_balance(name) == prize
                    for name, prize in prizes.items()])
    await eventually(paid)
    # The SDK's follow over real gRPC: a stream left after ten events and followed again
    # with the same tracker goes on from the eleventh, gapless, to the end.
    async with Client.connect(f"127.0.0.1:{room.table_port}", token=Setup(
            env_for(room, service, dev_keys, monkeypatch), "sb-1").token,
            tournament_addr=f"127.0.0.1:{service.port}") as client:
        tracker = SeatTracker("sb-1")
        first = []
        async for update in client.tournaments.follow("sng-bots", tracker=tracker):
            first.append(update.record.sequence)
            if len(first) == 10:
                break
        rest = [u.record.sequence
                async for u in client.tournaments.follow("sng-bots", tracker=tracker)]
    assert first + rest == list(range(1, len(first) + len(rest) + 1))
    assert tracker.over and tracker.entries == {next(e.entry_id for e in view.entries
                                                     if e.player_id == "sb-1")}


async def test_bots_follow_moves_in_a_multi_table_tournament_and_replay_verifies_it(
        room: Room, service: RunningTournament, dev_keys: DevKeys, redis_url: str,
        monkeypatch: pytest.MonkeyPatch, tournament_clock: OffsetClock) -> None:
    env_for(room, service, dev_keys, monkeypatch)
    start = int(tournament_clock()) + START_S
    await service.client.create("mtt-bots", pb.TournamentConfig(
        name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=500, fee=50, seats=3,
        structure=FAST, start_at=Timestamp(seconds=start), min_entrants=2,
        late_through_level=1))
    bots_run = asyncio.create_task(bots("--tournament", "mtt-bots", "--players", "6",
                                        "--seed", "5", "--prefix", "mb"))
    await all_paid(service, "mtt-bots", {f"mb-{i}" for i in range(1, 7)}, bots_run)
    assert (await service.client.get("mtt-bots")).phase == pb.TOURNAMENT_PHASE_REGISTERING
    tournament_clock.jump_to(start)  # all six in and paid: the start comes
    status, lines, last = await bots_run
    if status != 0:
        await explain(room, "mtt-bots", redis_url)
    assert status == 0 and last["bots"] == "6" and last["phase"] == "finished"
    assert last["errors"] == "0" and last["busts"] == "5"
    view = await service.client.get("mtt-bots")
    assert len(view.entries) == 6
    # Six at tables of three: two tables, one broken as the field shrinks, so its players
    # move; each move the bots printed is one the tournament made.
    made = sum(1 for line in lines if " moved " in line)
    assert made == int(last["moves"]) >= 1
    assert sum(e.prize for e in view.entries) == 6 * 500
    # stud replay tournament: the history from the logs, verified against the tables'.
    await eventually(lambda: paid_out(service, "mtt-bots", redis_url))
    source = RedisSource.from_url(redis_url)
    out = io.StringIO()
    try:
        status = await replay_tournament.run(source, "mtt-bots", out)
        records = await replay_tournament.read_records(source, "mtt-bots")
        history = replay_tournament.history_of(records)
        tables = {t: await source.log(t) for t in history.tables}
        pool = await replay_tournament.read_pool(source, "mtt-bots")
    finally:
        await source.aclose()
    text = out.getvalue()
    print(text)
    assert status == 0, text
    summary = dict(part.split("=") for part in text.strip().splitlines()[-1].split())
    assert summary == {"entrants": "6", "levels": summary["levels"], "moves": last["moves"],
                       "busts": "5", "payouts": str(sum(1 for e in view.entries if e.prize)),
                       "verified": "yes"}
    placed = {e.entry_id: f"{e.place}" if e.place_to in (0, e.place)
              else f"{e.place}-{e.place_to}" for e in view.entries}  # a tie shares places
    for line in text.splitlines():
        if line.startswith("bust "):  # each bust's place, from the busts alone, the service's
            entry = line.split()[1]
            assert line.endswith(f"place {placed[entry]}"), (line, placed[entry])
    # The checks can fail: a move unseated with a stack the table did not record, a bust
    # whose seat kept chips, a prize the wallet did not pay.
    assert replay_tournament.check_tables(history, tables) == []
    forged = replay_tournament.history_of(records)
    made_at = next(i for i, (_m, st) in enumerate(forged.moves) if st >= 0)  # not cancelled
    move, stack = forged.moves[made_at]
    forged.moves[made_at] = (move, stack + 1)
    key = (move.from_table, move.from_seat)
    forged.unseats[key] = [(w, s + 1 if w == f"move {move.move_id}" else s)
                           for w, s in forged.unseats[key]]
    assert replay_tournament.check_tables(forged, tables)
    forged.busts[0].hand_number += 10_000
    assert any("no finished hand" in p for p in replay_tournament.check_tables(forged, tables))
    assert pool is not None and replay_tournament.check_money(history, pool) == []
    short = {k: v for k, v in pool.items() if not k.startswith("prize:")}
    assert replay_tournament.check_money(history, short)


async def explain(room: Room, tid: str, redis_url: str) -> None:
    """What a tournament that did not finish was waiting for: its last events and its
    tables as they are (printed, for the failure's report)."""
    source = RedisSource.from_url(redis_url)
    try:
        records = await replay_tournament.read_records(source, tid)
        history = replay_tournament.history_of(records)
    finally:
        await source.aclose()
    for record in records[-40:]:
        event = record.event
        kind = event.WhichOneof("kind") or "?"
        print(f"#{record.sequence} {kind}: {str(getattr(event, kind, '')).strip()!r}"[:240])
    for table_id in sorted(history.tables):
        view = await room.client.view(table_id)
        print(f"{table_id}: hands_started={view.hands_started} "
              f"in_progress={view.hand_in_progress} paused={view.dealing_paused} "
              f"reason={view.pause_reason!r} seats="
              f"{[(s.seat, s.player_id, s.stack) for s in view.seats]}")


async def paid_out(service: RunningTournament, tid: str, redis_url: str) -> bool:
    """Finished, every prize placed, and every prize's payment in the tournament's log."""
    view = await service.client.get(tid)
    if view.phase != pb.TOURNAMENT_PHASE_FINISHED or not all(
            e.prize == 0 or e.place for e in view.entries):
        return False
    source = RedisSource.from_url(redis_url)
    try:
        h = replay_tournament.history_of(await replay_tournament.read_records(source, tid))
    finally:
        await source.aclose()
    return bool(h.prizes) and all(p.payment_id in h.paid_out for p in h.prizes)


async def test_stud_play_registers_and_its_table_follows_the_player_through_moves(
        room: Room, service: RunningTournament, dev_keys: DevKeys,
        monkeypatch: pytest.MonkeyPatch, tournament_clock: OffsetClock) -> None:
    env = env_for(room, service, dev_keys, monkeypatch)
    start = int(tournament_clock()) + START_S
    await service.client.create("mtt-play", pb.TournamentConfig(
        name="Play", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=500, fee=50, seats=3,
        structure=FAST, start_at=Timestamp(seconds=start), min_entrants=2,
        late_through_level=1))
    out = io.StringIO()
    status = await asyncio.to_thread(cli.main, ["play", "--player", "ann", "--register",
                                                "mtt-play"], out)
    lines = out.getvalue().splitlines()
    assert status == 0, out.getvalue()
    assert any(line.startswith("ann registered for mtt-play") for line in lines)
    assert lines[-1].startswith("mtt-play  Play (MTT) ")  # the lobby, listed after
    bots_run = asyncio.create_task(bots("--tournament", "mtt-play", "--players", "5",
                                        "--seed", "9", "--prefix", "pp"))
    # The screen keeps the wall clock (the table's turn deadlines are by it): the countdown
    # to the next level in its title reads START_S too long, which the title check ignores.
    app = TournamentPlayApp(Setup(env, "ann").connect, "mtt-play")
    titles: set[str] = set()
    async with app.run_test(size=(140, 36)) as pilot:
        await all_paid(service, "mtt-play", {"ann", *(f"pp-{i}" for i in range(1, 6))},
                       bots_run)
        assert (await service.client.get("mtt-play")).phase == \
            pb.TOURNAMENT_PHASE_REGISTERING
        tournament_clock.jump_to(start)  # ann and the five bots in and paid: the start comes
        async with asyncio.timeout(220):  # the whole tournament; a busy machine is slow
            while not any(line.startswith(("You finished", "Tournament ")) for line in
                          app.log_lines[1:]):
                await pilot.pause(0.05)
                view = app.view
                if view is not None and view.HasField("hand") and view.viewer_seat and \
                        view.hand.to_act == view.viewer_seat:
                    await pilot.press("c")
                titles.add((screen_text(app).splitlines() or [""])[0])
        final_table = app.options.table_id
    status, _lines, last = await bots_run
    assert status == 0 and last["phase"] == "finished"
    # The tournament's own record of ann's seats: the screen followed each of them.
    async with Client.connect(env["STUD_TABLE_TARGET"], token=Setup(env, "ann").token,
                              tournament_addr=env["STUD_TOURNAMENT_TARGET"]) as client:
        tracker = SeatTracker("ann")
        seats = [u.moved async for u in client.tournaments.follow("mtt-play", tracker=tracker)
                 if u.moved is not None]
    assert seats and final_table == seats[-1].table_id
    said = [line for line in app.log_lines if line.startswith(("Seated:", "Moved:"))]
    assert len(said) == len(seats)
    assert all(f"table {s.table_id} seat {s.seat}" in line for s, line in zip(seats, said,
                                                                                strict=True))
    # The title carries the clock (a level of 2 s may be over before ann's first view).
    assert any(re.search(r"Level \d+ · \d+/\d+, ante \d+", title) for title in titles), titles
    assert any(line.startswith("You finished in place") for line in app.log_lines)
