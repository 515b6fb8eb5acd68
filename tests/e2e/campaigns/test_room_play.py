"""The room benchmark's bots (``campaigns.loadbots.RoomBot``, in processes of their own) play
through the whole stack both ways: over one ``TableService.Play`` stream a bot (issue 35) and
over WatchTable with a unary call an action; and the fair ceiling's stream variant answers
every action on its stream. Liveness and errors only: tests never judge speed."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from campaigns.ceilings import bench_ceilings
from campaigns.throughput import SERVICES, bench_room, parse_actions
from studtools.redis_server import RedisServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.mark.parametrize("actions", ["play", "unary"])
async def test_room_bots_play_without_errors(actions: str, tmp_path: Path) -> None:
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICES}
    with RedisServer(passwords=passwords) as redis_server:
        assert redis_server.process is not None
        figure, bots, cpu = await bench_room(
            redis_server.url_for, tmp_path, tables=2, bots=3, seconds=3.0, warm_up=1.0,
            log_level="WARNING", redis_pid=redis_server.process.pid, processes=1,
            actions=actions)
    assert not bots.errors, bots.first_error
    assert figure.count == len(bots.latencies) > 0
    assert bots.hands > 0
    # The bots fold every record with the rules and act only on their turn, legally: a
    # refusal is only ever a stale one (the table moved on), never most of the actions.
    assert bots.refused * 10 < figure.count
    assert cpu["bots"] > 0


async def test_the_fair_ceilings_stream_variant_answers_each_action() -> None:
    with RedisServer(passwords={"table": secrets.token_urlsafe(16)}) as redis_server:
        assert redis_server.process is not None
        bare, fair, stream = await bench_ceilings(
            redis_server.url_for("table"), [2], (2, 3), 1.0, 0.2,
            redis_server.process.pid, stream=True)
    assert len(bare) == 1 and fair is not None and stream is not None
    assert stream.count > 0 and stream.calls >= stream.count
    assert "stream" in stream.label and set(stream.cpu) == {"server", "redis", "callers"}


def test_actions_option() -> None:
    assert parse_actions("play") == ["play"]
    assert parse_actions("play, unary,play") == ["play", "unary", "play"]
    for bad in ("", "grpc", "play,web"):
        with pytest.raises(ValueError, match="--actions"):
            parse_actions(bad)
