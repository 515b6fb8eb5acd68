"""archive-chaos's evidence of a hand that failed stud replay verify (``failure_evidence``)
reads the archived ledger as the replay does: a break-even hand's settlement has no posting,
only its ``ledger.transactions`` row (migration 0012), and was shown "in PostgreSQL none"
once it left Redis, as if the archive had lost it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from campaigns.archive_chaos import ArchiveRoom, failure_evidence
from studhistory.ledger_archive import archive_ledger
from studkit.redis_client import Client
from studtest.wallet import RunningWallet

from .test_break_even_settlement import hands_with_h3_break_even
from .test_ledger_archive import archiver, wallet  # noqa: F401

pytestmark = pytest.mark.integration


async def test_a_break_even_hands_archived_settlement_is_shown(
        wallet: RunningWallet, archiver: tuple[Client, Any],  # noqa: F811
        history_dsns: Any, redis_url: str) -> None:
    client, conn = archiver
    await hands_with_h3_break_even(wallet)
    assert (await archive_ledger(client, conn, keep=2)).trimmed > 0  # h3 left Redis
    room = cast(ArchiveRoom, SimpleNamespace(  # the two stores the campaign's room runs
        room=SimpleNamespace(redis=SimpleNamespace(url=redis_url)),
        pg=SimpleNamespace(dsn=lambda role: history_dsns.admin)))
    ledger, events = await failure_evidence(room, [{"table": "t1", "hand": 3}])
    assert "ledger in Redis none" in ledger
    assert "in PostgreSQL none" not in ledger
    assert "settlement (0 postings: ledger.transactions)" in ledger
    assert events.endswith("the table's hands settled in PostgreSQL 7")
