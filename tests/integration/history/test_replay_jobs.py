"""``stud replay verify --all --jobs N`` over Redis and PostgreSQL: the tables shared between
the command's process and its workers give the verdicts, the output and the exit status of
one process, on an intact room and on one with a byte changed in an archived row; in this
process (threads: its workers from the fork server) and as a user runs the command (a process
of one thread: its workers forked from it). One process reads every table through one
connection to PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import os
import random
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from stud.v1 import table_pb2 as pb
from studhistory.archiver import archive_table, digest
from studhistory.pgarchive import PgHistory
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import act_once, player, running_room
from studtools import replay_cli
from studtools.cli import main as cli_main
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration


async def deal(room: Any, names: dict[int, str], hands: int, rng: random.Random) -> str:
    """A table of ``names`` (seat -> player), ``hands`` hands played by random bots."""
    table_id: str = await room.client.open_table()
    for seat, name in names.items():
        await room.fund(name)
        await room.client.call("SitDown", pb.SitDownRequest(
            table_id=table_id, seat=seat, buy_in=10_000), player(name))
    async with asyncio.timeout(120):
        while (view := await room.client.view(table_id)).hands_started < hands:
            if not await act_once(room.client, table_id, view, rng.choice):
                await asyncio.sleep(0.01)
    return table_id


async def test_jobs_give_the_verdicts_of_one_process(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, history_dsns: Any,
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = connect(redis_url)
    store = EventStore(admin)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        tables = [await deal(room, {1: f"ann{i}", 2: f"bob{i}", 3: f"cat{i}"}, 5 + i,
                             random.Random(40 + i)) for i in range(3)]
        await room.table_deps.app.stop()
    history = await PgHistory.connect(history_dsns.archiver)
    try:
        for table_id in tables[:2]:  # the third lives in Redis alone
            assert (await archive_table(store, history, table_id, keep_hands=2)).trimmed_to
    finally:
        await history.aclose()
        await admin.aclose()
    monkeypatch.setenv("STUD_REPLAY_REDIS_URL", redis_url)
    monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("STUD_SUPPORT_DSN", history_dsns.support)
    for name in ("STUD_AUDITOR_DSN", "STUD_DEALER_TARGET", "STUD_ISSUER_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(replay_cli, "PARALLEL_MIN_EVENTS", 0)  # a small room shared too
    shared: list[int] = []
    share = replay_cli._verify_shared

    async def counted(*args: Any, **kwargs: Any) -> None:
        shared.append(args[2])
        await share(*args, **kwargs)
    monkeypatch.setattr(replay_cli, "_verify_shared", counted)

    async def verify(jobs: int) -> tuple[int, str]:
        out = io.StringIO()
        status = await asyncio.to_thread(
            cli_main, ["replay", "verify", "--all", "--no-progress", "--jobs", str(jobs)], out)
        return status, out.getvalue()

    connects: list[object] = []
    connect_pg = psycopg.AsyncConnection.connect

    async def counted_connect(*args: Any, **kwargs: Any) -> Any:
        connects.append(args)
        return await connect_pg(*args, **kwargs)
    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counted_connect)

    alone = await verify(1)
    # One connection to PostgreSQL for the whole run (the ledger's archive, then every
    # archived table's head through it), where each table made its own.
    assert len(connects) == 1, connects
    together = await verify(2)
    assert shared == [2], "--jobs 2 did not share the tables"
    assert await stud_process(2) == (*alone, "fork"), "forked workers' report differs"
    assert alone[0] == 0, alone[1]
    assert alone[1].strip().splitlines()[-1] == "hands=18 verified=18 failed=0", alone[1]
    assert together == alone

    with psycopg.connect(history_dsns.admin, autocommit=True) as conn:
        raw = conn.execute("SELECT envelope FROM history.events WHERE table_id = %s AND "
                           "sequence = 9", (tables[1],)).fetchone()
        assert raw is not None
        changed = bytearray(bytes(raw[0]))
        changed[-1] ^= 1
        conn.execute("ALTER TABLE history.events DISABLE TRIGGER USER")
        conn.execute("UPDATE history.events SET envelope = %s WHERE table_id = %s AND "
                     "sequence = 9", (bytes(changed), tables[1]))
        conn.execute("ALTER TABLE history.events ENABLE TRIGGER USER")
    alone, together = await verify(1), await verify(2)
    assert shared == [2, 2]
    assert alone[0] == 1, alone[1]
    broken = [line for line in alone[1].splitlines() if "chain broken" in line]
    assert len(broken) == 1 and f"table {tables[1]} " in broken[0] and "#9" in broken[0], alone
    assert digest(bytes(raw[0])).hex() in broken[0] and digest(bytes(changed)).hex() in broken[0]
    assert alone[1].strip().splitlines()[-1] == "hands=18 verified=17 failed=1", alone[1]
    assert together == alone
    assert await stud_process(2) == (*alone, "fork")


STUD = """
import sys
from studtools import replay_cli
replay_cli.PARALLEL_MIN_EVENTS = 0
made = replay_cli._workers
def workers(jobs, cards):
    pool = made(jobs, cards)
    print("workers:", pool._mp_context.get_start_method(), file=sys.stderr)
    return pool
replay_cli._workers = workers
from studtools.cli import main
sys.exit(main(sys.argv[1:]))
"""


async def stud_process(jobs: int) -> tuple[int, str, str]:
    """``stud replay verify --all --jobs N`` in a process of its own, as a user runs it (one
    thread: the workers are forked from it); its status, output and the workers' start
    method ("" when it started none)."""
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", STUD, "replay", "verify", "--all",
                         "--no-progress", "--jobs", str(jobs)],
        capture_output=True, text=True, env=dict(os.environ), timeout=300)
    method = next((line.split()[-1] for line in done.stderr.splitlines()
                   if line.startswith("workers:")), "")
    return done.returncode, done.stdout, method
