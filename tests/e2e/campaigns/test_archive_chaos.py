"""The archiver's fault campaign in short (``make archive-chaos`` runs 200 hands and 12 kills):
two archivers at once with a hot window of 3 hands while an archiver, PostgreSQL, Redis and a
table replica are each killed with SIGKILL and restarted; then every event in Redis or
PostgreSQL (byte-identical where both hold it), none archived twice, the chain verified across
both stores, nothing trimmed before it was durable (sampled during play and checked at the
end), something trimmed at every table, the ledger summing to zero, and every hand played
verified in full by ``stud replay verify --all`` reading both stores."""

from __future__ import annotations

import re

import pytest

from campaigns.archive_chaos import Outcome, campaign

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

KILLS = 4


@pytest.fixture(scope="module")
async def run(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return await campaign(hands=12, kills=KILLS, n_tables=2, seed=7,
                          work=tmp_path_factory.mktemp("archive-chaos"))


async def test_history_moves_under_kills_and_nothing_is_lost(run: Outcome) -> None:
    replay = set(run.replay.problems)
    others = [p for p in run.problems if p not in replay and "verified in full" not in p]
    assert others == [], others
    assert re.fullmatch(r"hands=\d+ kills=4 events_lost=0 events_duplicated=0 chain_ok=yes "
                        r"trimmed_before_durable=0 unverified=\d+", run.line()), run.line()
    assert run.hands >= 12 and run.kills == KILLS
    assert dict(run.killed) == {"archiver": 1, "postgres": 1, "redis": 1, "table": 1}
    assert len(run.trimmed) == 2 and all(n > 0 for n in run.trimmed.values()), run.trimmed
    assert run.events == sum(run.archived.values()) > 0  # every table caught up
    assert run.samples > 0 and run.events_differ == 0
    assert (run.chips_lost, run.duplicate_settlements) == (0, 0)
    assert run.ledger_problems == [] and run.ledger_trimmed > 0  # the wallet's ledger moved
    assert run.exited == [] and run.tally.errors == []


async def test_every_hand_played_is_verified_from_both_stores(run: Outcome) -> None:
    assert run.replay.verified == run.hands and run.replay.in_full == run.hands
    assert run.unverified == 0 and run.problems == [], run.problems[:10]
    assert run.line().endswith("unverified=0")
