"""``stud replay verify`` on a stored event the rules cannot fold (a ``Called`` moved to a
seat not in the hand) or that does not decode (an ``UpCardDealt`` of street 103): the output
names the table and event, no traceback (the review: ``KeyError: 7`` and an unhandled
``BadRequest``)."""

from __future__ import annotations

import re

import pytest

from stud.v1 import events_pb2 as epb
from studkit import keys

from .conftest import Played, run_cli
from .test_replay_tampered import payload_changed, rewritten

pytestmark = pytest.mark.integration


async def test_a_call_moved_to_an_empty_seat_fails_naming_the_event(
        replay_env: Played) -> None:
    table = replay_env.table_id
    moved: dict[str, int] = {}

    def move(called: epb.Called) -> None:
        called.seat = 7

    with rewritten(replay_env.admin_url, keys.table_stream(table),
                   payload_changed("Called", epb.Called, move, moved)):
        status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
        assert status == 1, out
        hand, sequence = moved["hand"], moved["sequence"]
        assert f"FAILED table {table} hand {hand}: event #{sequence}: " in out, out
        assert "seat=7" in out and "Traceback" not in out, out
        summary = out.strip().splitlines()[-1]
        assert re.fullmatch(r"hands=\d+ verified=\d+ failed=1", summary), summary
        status, out = await run_cli(["replay", "verify", "--table", table, "--hand",
                                     str(hand), "--no-progress"])
        assert status == 1, out
        assert f"table {table} hand {hand}: event #{sequence}: " in out, out
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0, out


async def test_a_stored_event_that_does_not_decode_is_named(
        replay_env: Played, capsys: pytest.CaptureFixture[str]) -> None:
    table = replay_env.table_id
    bad: dict[str, int] = {}

    def street(up: epb.UpCardDealt) -> None:
        up.street = 103

    with rewritten(replay_env.admin_url, keys.table_stream(table),
                   payload_changed("UpCardDealt", epb.UpCardDealt, street, bad)):
        capsys.readouterr()
        status, _out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
        err = capsys.readouterr().err
        assert status == 2, err  # the source's error (docs/replay.md), not a traceback
        assert f"stud replay: table {table}: event #{bad['sequence']} (UpCardDealt) does " \
            "not decode: " in err, err
        assert "Traceback" not in err, err
    status, out = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 0, out
