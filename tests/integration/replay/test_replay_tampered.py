"""``stud replay verify`` fails on a tampered stream or a wrong ledger posting, naming the
hand and the first wrong event (the stream or ledger is restored after each test)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator

import pytest

from stud.v1 import events_pb2 as epb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.redis_client import connect_sync

from .conftest import Played, run_cli

pytestmark = pytest.mark.integration
LEDGER = keys.wallet_key("ledger")


@contextlib.contextmanager
def rewritten(url: str, key: str, change: Callable[[bytes, dict[bytes, bytes]], bool]
              ) -> Iterator[None]:
    """Rewrite stream ``key`` entry by entry (same ids) with ``change`` applied in place to
    each entry's fields until it returns True once; restore the stream afterwards."""
    client = connect_sync(url)
    entries = client.xrange(key)
    changed = False
    try:
        client.delete(key)
        for entry_id, fields in entries:
            copy = dict(fields)
            if not changed:
                changed = change(entry_id, copy)
            client.xadd(key, copy, id=entry_id)
        assert changed, "nothing was changed"
        yield
    finally:
        client.delete(key)
        for entry_id, fields in entries:
            client.xadd(key, fields, id=entry_id)
        client.close()


async def test_a_tampered_event_fails_naming_hand_and_event(replay_env: Played) -> None:
    table = replay_env.table_id
    tampered: dict[str, int] = {}

    def bump_a_call(entry_id: bytes, fields: dict[bytes, bytes]) -> bool:
        envelope = EventEnvelope.FromString(fields[b"envelope"])
        if envelope.event_type != "Called" or envelope.hand_number < 2:
            return False
        called = epb.Called.FromString(envelope.payload)
        called.amount += 10
        envelope.payload = called.SerializeToString()
        fields[b"envelope"] = envelope.SerializeToString()
        tampered.update(hand=envelope.hand_number, sequence=envelope.sequence)
        return True

    with rewritten(replay_env.admin_url, keys.table_stream(table), bump_a_call):
        status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
        assert status == 1, out
        hand, sequence = tampered["hand"], tampered["sequence"]
        assert f"FAILED table {table} hand {hand}: event #{sequence}: " in out, out
        assert "Called" in out
        summary = out.strip().splitlines()[-1]
        assert re.fullmatch(r"hands=\d+ verified=\d+ failed=1", summary), summary
        status, out = await run_cli(["replay", "verify", "--table", table, "--hand",
                                     str(hand), "--json"])
        report = json.loads(out)
        assert status == 1 and report["failed"] == 1
        assert report["failures"][0]["hand"] == hand
        assert report["failures"][0]["problems"][0]["event"] == sequence
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0, out


async def test_a_wrong_ledger_posting_fails_naming_the_hand(replay_env: Played) -> None:
    table = replay_env.table_id
    shifted: dict[str, str] = {}

    def shift_a_chip(entry_id: bytes, fields: dict[bytes, bytes]) -> bool:
        record = json.loads(fields[b"tx"])
        if record["kind"] != "settlement" or record["table_id"] != table:
            return False
        postings = record["postings"]
        seats = [p for p in postings if p[0].startswith("seat:")]
        if len(seats) < 2:
            return False
        seats[0][1] += 1
        seats[1][1] -= 1
        shifted["hand"] = record["hand_id"][1:]
        fields[b"tx"] = json.dumps(record, separators=(",", ":")).encode()
        return True

    with rewritten(replay_env.admin_url, LEDGER, shift_a_chip):
        status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
        assert status == 1, out
        failed = [line for line in out.splitlines() if line.startswith("FAILED")]
        where = f"table {table} hand {shifted['hand']}: event #"
        assert len(failed) == 1 and where in failed[0], out
        assert "ledger entry" in failed[0] and "the hand's result is" in failed[0]
        assert out.strip().splitlines()[-1].endswith("failed=1")
