"""A hand that fails ``stud replay verify`` is named in a campaign's problems with where it was
read from and what is wrong (the archive fault campaign once failed one hand of 190 saying only
"1 hands failed verification")."""

from __future__ import annotations

import json

import pytest

from campaigns.checks import check_replay
from stud.v1 import events_pb2 as epb
from studkit import keys

from .conftest import Played, run_cli
from .test_replay_tampered import payload_changed, rewritten

pytestmark = pytest.mark.integration


async def test_a_failed_hand_is_named_with_its_store_and_problem(replay_env: Played) -> None:
    table = replay_env.table_id
    tampered: dict[str, int] = {}

    def bump(called: epb.Called) -> None:
        called.amount += 10

    with rewritten(replay_env.admin_url, keys.table_stream(table),
                   payload_changed("Called", epb.Called, bump, tampered)):
        status, out = await run_cli(["replay", "verify", "--all", "--json", "-v"])
        report = json.loads(out)
        _, text = await run_cli(["replay", "verify", "--table", table, "--no-progress"])
    assert status == 1 and report["failed"] == 1, out
    hand, sequence = tampered["hand"], tampered["sequence"]
    (failure,) = report["failures"]
    assert failure["read_from"][0].endswith(" from Redis"), failure
    assert "deck from the dealer" in failure["read_from"], failure
    checked = check_replay(report, report["hands"])
    named = [p for p in checked.problems if p.startswith(f"table {table} hand {hand} FAILED")]
    assert len(named) == 1, checked.problems
    assert "from Redis" in named[0] and f"event #{sequence}: " in named[0], named
    assert "Called" in named[0], named
    assert f"read from: table {table} hand {hand}: events #" in text, text
