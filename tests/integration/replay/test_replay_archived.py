"""A table whose stream head was archived (the archiver, ``stud archive run``): ``stud replay``
reads the archived hands from PostgreSQL; without it, it starts from the table's snapshot and
says which hands it left out, or replays them from an export (``--archive DIR``)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stud.v1 import table_pb2 as pb
from studhistory.archiver import archive_table
from studhistory.pgarchive import PgHistory
from studkit.redis_client import connect, connect_sync
from studkit.store import EventStore
from studtest.postgres import HistoryDsns
from studtest.redis import TestRedis
from studtest.table import AUDITOR, play_until, player, running_room
from studtools.archive import export_table
from studtools.devkeys import DevKeys

from .conftest import NAMES, Played, run_cli

pytestmark = pytest.mark.integration
HANDS = 5


@pytest.fixture(scope="module")
async def archived(redis_server: TestRedis, dev_keys: DevKeys,
                   tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Played]:
    client = connect_sync(redis_server.url)
    client.flushall()
    client.close()
    async with running_room(redis_server, redis_server.url, dev_keys,
                            snapshot_every=2) as room:
        table_id = await room.client.open_table()
        for seat, name in NAMES.items():
            await room.fund(name)
            await room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=5_000), player(name))
        await play_until(room.client, table_id, HANDS, random.Random(3).choice, timeout=120)
        url = (redis_server.server.url_for("auditor") if redis_server.server is not None
               else redis_server.url)
        run = tmp_path_factory.mktemp("run")
        env = {"STUD_REPLAY_REDIS_URL": url, "STUD_DEALER_TARGET": "",
               "STUD_AUDITOR_TOKEN": room.client.tokens.token(AUDITOR),
               "STUD_RUN_DIR": str(run)}
        yield Played(room, table_id, env, redis_server.url)


async def test_archived_hands_replay_from_the_archive(
        archived: Played, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        history_dsns: HistoryDsns) -> None:
    for name, value in archived.env.items():
        monkeypatch.setenv(name, value)
    table = archived.table_id
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0, out
    before = int(out.strip().splitlines()[-1].split()[0].split("=")[1])
    client = connect(archived.admin_url)
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        outcome = await archive_table(EventStore(client), history, table, keep_hands=1)
    finally:
        await history.aclose()
        await client.aclose()
    assert outcome.trimmed_to, "nothing was archived"
    export_table(history_dsns.support, table, tmp_path)
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0, out
    assert "are archived: give --archive DIR" in out
    after = int(out.strip().splitlines()[-1].split()[0].split("=")[1])
    assert after < before
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress",
                                 "--archive", str(tmp_path)])
    assert status == 0, out
    # Every hand again (the table may have started one more meanwhile).
    total = int(out.strip().splitlines()[-1].split()[0].split("=")[1])
    assert total >= before
    assert out.strip().splitlines()[-1] == f"hands={total} verified={total} failed=0"
    status, text = await run_cli(["replay", "show", "--table", table, "--hand", "1",
                                  "--archive", str(tmp_path)])
    assert status == 0 and text.splitlines()[1].startswith("Hand #1")
    # With PostgreSQL (the support role), no directory is needed: the same answers.
    monkeypatch.setenv("STUD_SUPPORT_DSN", history_dsns.support)
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0 and "are archived" not in out, out
    assert out.strip().splitlines()[-1] == f"hands={total} verified={total} failed=0"
    assert await run_cli(["replay", "show", "--table", table, "--hand", "1"]) == (0, text)
