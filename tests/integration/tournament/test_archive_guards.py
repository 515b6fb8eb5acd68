"""The archiver's tournament step fails closed (issue 31, review): a stream whose last entry
carries no readable envelope is never taken for one whose window is over, so its keys are
never trimmed on a guess. Real Redis."""

from __future__ import annotations

import pytest

from studhistory import tournament_archive as archiving
from studkit import keys
from studkit.redis_client import connect

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("fields", [
    {"other": b"x"}, {"envelope": b""}, {"envelope": b"\xff\xff not protobuf"},
    {"envelope": b"\x08\x01"}])  # the last: an envelope (sequence 1) with no time
async def test_the_last_event_time_of_an_unreadable_stream_is_an_error(
        redis_url: str, fields: dict[str, bytes]) -> None:
    redis = connect(redis_url)
    try:
        await redis.xadd(keys.tournament_key("t-bad", "events"), fields, id="0-1")
        with pytest.raises(archiving.TournamentArchiveError, match="t-bad"):
            await archiving._last_at(redis, "t-bad")
    finally:
        await redis.aclose()


async def test_the_last_event_time_is_read_from_its_envelope(redis_url: str) -> None:
    from stud.v1.envelope_pb2 import EventEnvelope
    env = EventEnvelope(sequence=1)
    env.occurred_at.FromMilliseconds(1_700_000_000_250)
    redis = connect(redis_url)
    try:
        await redis.xadd(keys.tournament_key("t-ok", "events"),
                         {"envelope": env.SerializeToString()}, id="0-1")
        assert await archiving._last_at(redis, "t-ok") == 1_700_000_000.25
        assert await archiving._last_at(redis, "t-none") is None
    finally:
        await redis.aclose()
