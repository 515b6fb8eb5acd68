"""``stud replay room`` and ``stud replay verify`` on a tournament table: its mode, the
stakes queued during a hand and the pause are room lines; every hand re-decides with the
stakes it was dealt with (the rules' StakesChanged between hands), and no wallet
settlement is looked for (the wallet never held its chips)."""

from __future__ import annotations

import json
import uuid

import pytest

from rules import TableConfig
from stud.v1 import table_pb2 as pb
from studkit.mapping import config_to_proto
from studkit.redis_client import connect_sync
from studtest.redis import TestRedis
from studtest.table import AUDITOR, TOURNAMENT, fast_settings, play_until, running_room
from studtools.devkeys import DevKeys

from .conftest import run_cli, seeded_random

pytestmark = pytest.mark.integration


async def test_replay_of_a_tournament_table(redis_server: TestRedis, dev_keys: DevKeys,
                                            monkeypatch: pytest.MonkeyPatch,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    client = connect_sync(redis_server.url)
    client.flushall()
    client.close()
    async with running_room(redis_server, redis_server.url, dev_keys) as room:
        tables = room.client
        table_id = f"tt-{uuid.uuid4().hex[:8]}"
        await tables.call("OpenTable", pb.OpenTableRequest(
            table_id=table_id, config=config_to_proto(TableConfig.for_stakes(200)),
            settings=fast_settings(), tournament_id="sng-1"), TOURNAMENT)
        for seat, name in {1: "ann", 2: "bob", 4: "cy"}.items():
            await tables.call("SeatEntrant", pb.SeatEntrantRequest(
                table_id=table_id, seat=seat, player_id=name, stack=20_000), TOURNAMENT)
        await tables.wait_for(table_id, lambda v: v.hand_in_progress and v.hand.to_act != 0)
        await tables.call("SetStakes", pb.SetStakesRequest(
            table_id=table_id, small_bet=400, big_bet=800, ante=100, bring_in=100), TOURNAMENT)
        await tables.call("PauseDealing", pb.PauseDealingRequest(
            table_id=table_id, paused=True, reason="break"), TOURNAMENT)
        await play_until(tables, table_id, 1, lambda actions: actions[-1])
        await tables.call("PauseDealing", pb.PauseDealingRequest(
            table_id=table_id, paused=False), TOURNAMENT)
        await play_until(tables, table_id, 3, lambda actions: actions[0])
        url = (redis_server.server.url_for("auditor") if redis_server.server is not None
               else redis_server.url)
        monkeypatch.setenv("STUD_REPLAY_REDIS_URL", url)
        monkeypatch.setenv("STUD_DEALER_TARGET", f"127.0.0.1:{room.dealer.port}")
        monkeypatch.setenv("STUD_AUDITOR_TOKEN", tables.tokens.token(AUDITOR))
        monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path_factory.mktemp("run")))
        for name in ("STUD_REPLAY_TOKEN", "STUD_ISSUER_KEY"):
            monkeypatch.delenv(name, raising=False)

        status, out = await run_cli(["replay", "room", "--table", table_id, "--json"])
        assert status == 0, out
        types = [e["type"] for e in json.loads(out)["events"]]
        assert types[:2] == ["SettingsSet", "TournamentModeSet"]
        assert "StakesQueued" in types and types.count("DealingPaused") == 2
        assert not {"BuyInRequested", "CashOutRequested"} & set(types)
        status, text = await run_cli(["replay", "room", "--table", table_id])
        assert "Tournament table of tournament sng-1" in text and "Dealing paused (break)" in text

        with seeded_random(3):
            status, out = await run_cli(["replay", "verify", "--table", table_id, "--json"])
        report = json.loads(out)
        assert status == 0, out
        assert report["hands"] >= 3 and report["failed"] == 0
        status, out = await run_cli(["replay", "show", "--table", table_id, "--hand", "2",
                                     "--json"])
        assert status == 0
        lines = json.loads(out)["history"]
        assert any("ante" in line and "100" in line for line in lines), lines
