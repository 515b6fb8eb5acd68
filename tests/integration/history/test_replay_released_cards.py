"""``stud replay verify`` of a hand whose events and dealer's record the archiver moved to
PostgreSQL and whose dealer keys it released: the cards must still be checked, from the
record in ``auditor.dealer_hands`` (the dealer answers ``NOT_FOUND archived`` for it).
Found by ``make archive-chaos`` (docs/reliability.md, "The archiver under faults")."""

from __future__ import annotations

import asyncio
import io
import json
import random
from pathlib import Path
from typing import Any

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from studhistory.archiver import archive_table
from studhistory.dealer_records import DealerAudits
from studhistory.pgarchive import PgHistory
from studkit.auth import Principal, Role
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.redis import TestRedis
from studtest.table import act_once, player, running_room
from studtools.cli import main as cli_main
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration

NAMES = {1: "ann", 2: "bob", 3: "cat"}


async def test_verify_checks_the_cards_of_hands_the_archiver_released(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, history_dsns: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = connect(redis_url)
    rng = random.Random(17)
    async with running_room(redis_server, redis_url, dev_keys, snapshot_every=2) as room:
        table_id = await room.client.open_table()
        for seat, name in NAMES.items():
            await room.fund(name)
            await room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=10_000), player(name))
        async with asyncio.timeout(120):
            while (view := await room.client.view(table_id)).hands_started < 5:
                if not await act_once(room.client, table_id, view, rng.choice):
                    await asyncio.sleep(0.01)
        await room.table_deps.app.stop()
        target = f"127.0.0.1:{room.dealer.port}"
        history = await PgHistory.connect(history_dsns.archiver)
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                token = dev_keys.service_source("archiver")
                dealer = DealerAudits(channel, lambda: token.token("dealer"))
                outcome = await archive_table(EventStore(admin), history, table_id,
                                              keep_hands=2, dealer=dealer)
        finally:
            await history.aclose()
            await admin.aclose()
        assert outcome.released_through >= 1  # the dealer forgot hands 1..released_through
        auditor = dev_keys.issuer().issue(Principal(role=Role.AUDITOR, name="a"),
                                          ttl_seconds=600)
        for name, value in {"STUD_REPLAY_REDIS_URL": redis_url, "STUD_RUN_DIR": str(tmp_path),
                            "STUD_DEALER_TARGET": target, "STUD_AUDITOR_TOKEN": auditor,
                            "STUD_AUDITOR_DSN": history_dsns.auditor}.items():
            monkeypatch.setenv(name, value)
        for name in ("STUD_SUPPORT_DSN", "STUD_ISSUER_KEY", "STUD_REPLAY_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        out = io.StringIO()
        status = await asyncio.to_thread(cli_main, ["replay", "verify", "--table", table_id,
                                                    "--json", "-v"], out)
        report = json.loads(out.getvalue())
    released = [r for r in report["results"] if r["hand"] <= outcome.released_through]
    assert released and all(r["checks"] for r in released)
    assert [r["hand"] for r in released if "cards" not in r["checks"]] == [], \
        report["failures"][:2]
    assert (status, report["failed"]) == (0, 0)
