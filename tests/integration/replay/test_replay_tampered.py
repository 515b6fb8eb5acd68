"""``stud replay verify`` fails on a tampered stream or a wrong ledger posting, naming the
hand and the first wrong event (the stream or ledger is restored after each test)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stud.v1 import events_pb2 as epb
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.redis_client import connect_sync
from studtools import replay_cli
from studtools.replay_hands import LedgerTx
from studtools.replay_source import RedisSource, Settings

from .conftest import Played, run_cli

pytestmark = pytest.mark.integration
LEDGER = keys.wallet_key("ledger")


@contextlib.contextmanager
def rewritten(url: str, key: str, change: Callable[[bytes, dict[bytes, bytes]], bool]
              ) -> Iterator[None]:
    """Rewrite stream ``key`` entry by entry (same ids) with ``change`` applied in place to
    each entry's fields until it returns True once; restore the stream afterwards (its
    entries as they were, and those the table appended meanwhile)."""
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
        original = dict(entries)
        now = client.xrange(key)
        client.delete(key)
        for entry_id, fields in now:
            client.xadd(key, original.get(entry_id, fields), id=entry_id)
        client.close()


def payload_changed(event_type: str, message: type[Any], change: Callable[[Any], None],
                    seen: dict[str, int]) -> Callable[[bytes, dict[bytes, bytes]], bool]:
    """A change for :func:`rewritten`: the first ``event_type`` envelope of hand 2 or later
    gets its payload (decoded as ``message``) changed by ``change``; its hand and sequence go
    into ``seen``."""
    def rewrite(entry_id: bytes, fields: dict[bytes, bytes]) -> bool:
        envelope = EventEnvelope.FromString(fields[b"envelope"])
        if envelope.event_type != event_type or envelope.hand_number < 2:
            return False
        payload = message.FromString(envelope.payload)
        change(payload)
        envelope.payload = payload.SerializeToString()
        fields[b"envelope"] = envelope.SerializeToString()
        seen.update(hand=envelope.hand_number, sequence=envelope.sequence)
        return True
    return rewrite


async def test_a_tampered_event_fails_naming_hand_and_event(replay_env: Played) -> None:
    table = replay_env.table_id
    tampered: dict[str, int] = {}

    def bump(called: epb.Called) -> None:
        called.amount += 10

    with rewritten(replay_env.admin_url, keys.table_stream(table),
                   payload_changed("Called", epb.Called, bump, tampered)):
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


async def test_settlements_read_before_the_log_are_read_again_when_they_miss_a_hand(
        replay_env: Played) -> None:
    """``verify`` reads every table's settlements once, before the tables' logs; a table whose
    log holds a hand those lack (settled meanwhile) reads its own again after its log, so the
    early read never fails a hand, and a wrong posting read either way is still found."""
    table = replay_env.table_id
    settings = Settings.from_env()
    source = RedisSource.from_settings(settings)
    try:
        ledger = await source.settlements([table])
    finally:
        await source.aclose()
    assert ledger
    for early in ({}, {key: txs for key, txs in ledger.items() if key[1] != "h2"}, ledger):
        found = await replay_cli.verify_table(settings, table, None, True, None, early)
        assert [v.problems for v in found if not v.ok] == [], early.keys()
        assert all("wallet" in v.checks for v in found if v.hand <= 4), found
    wrong = {key: [LedgerTx(tx.entry_id, tuple((account, amount + 1) if account.startswith(
        "seat:") else (account, amount) for account, amount in tx.postings)) for tx in txs]
        for key, txs in ledger.items()}
    found = await replay_cli.verify_table(settings, table, None, True, None, wrong)
    assert {v.hand for v in found if not v.ok} == {int(key[1][1:]) for key in ledger}, found


def _one_byte(envelope_bytes: bytes) -> bytes:
    """The same envelope with one byte of its time changed (nothing the rules read)."""
    envelope = EventEnvelope.FromString(envelope_bytes)
    envelope.occurred_at.nanos ^= 1
    changed = envelope.SerializeToString(deterministic=True)
    assert len(changed) == len(envelope_bytes)
    assert sum(a != b for a, b in zip(changed, envelope_bytes, strict=True)) == 1
    return changed


@pytest.mark.parametrize("where", ["middle", "last"])
async def test_one_byte_changed_is_named_by_the_chain(replay_env: Played, where: str) -> None:
    """One byte of one stored envelope changed where the rules cannot see it (its time):
    the chain names the table, the event, the digest expected and the digest found; the
    stream's last event is checked against the recorded head."""
    table = replay_env.table_id
    client = connect_sync(replay_env.admin_url)
    try:
        entries = client.xrange(keys.table_stream(table))
    finally:
        client.close()
    victim = len(entries) // 2 if where == "middle" else len(entries) - 1
    target = entries[victim][0]
    seen: dict[str, object] = {}

    def change(entry_id: bytes, fields: dict[bytes, bytes]) -> bool:
        if entry_id != target:
            return False
        seen["before"] = hashlib.sha256(fields[b"envelope"]).hexdigest()
        fields[b"envelope"] = _one_byte(fields[b"envelope"])
        seen["after"] = hashlib.sha256(fields[b"envelope"]).hexdigest()
        seen["sequence"] = EventEnvelope.FromString(fields[b"envelope"]).sequence
        return True

    with rewritten(replay_env.admin_url, keys.table_stream(table), change):
        status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
        assert status == 1, out
        failed = [line for line in out.splitlines() if line.startswith("FAILED")]
        assert len(failed) == 1, out
        assert f"FAILED table {table} hand " in failed[0]
        assert (f"event #{seen['sequence']}: chain broken: expected digest {seen['before']}, "
                f"found {seen['after']}") in failed[0], failed[0]
        status, out = await run_cli(["replay", "verify", "--table", table, "--json"])
        report = json.loads(out)
        assert status == 1 and report["failed"] == 1
        (problem,) = report["failures"][0]["problems"]
        assert problem["event"] == seen["sequence"] and seen["before"] in problem["what"]
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0, out
