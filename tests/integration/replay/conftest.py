"""Replay fixtures: hands played by bots in the in-process room (dealer, wallet and table over
the session's Redis), once per module, and the environment that points ``stud replay`` at
them (the auditor's Redis user, the dealer, an auditor token)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass

import pytest

from stud.v1 import table_pb2 as pb
from studkit import keys
from studkit.redis_client import connect_sync
from studtest.redis import TestRedis
from studtest.table import AUDITOR, Room, play_until, player, running_room
from studtools.cli import main
from studtools.devkeys import DevKeys

HANDS = 5
NAMES = {1: "ann", 3: "bob", 6: "cat"}


@dataclass
class Played:
    """A room with a table where ``HANDS`` hands were played."""

    room: Room
    table_id: str
    env: dict[str, str]
    admin_url: str


@contextlib.contextmanager
def seeded_random(seed: int) -> Iterator[None]:
    """PokerKit shuffles with ``random`` (and warns): seeded, restored afterwards."""
    saved = random.getstate()
    random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        random.setstate(saved)


async def run_cli(argv: Sequence[str]) -> tuple[int, str]:
    """``stud ARGV`` in a thread (it runs its own event loop); (exit status, stdout)."""
    out = io.StringIO()
    status = await asyncio.to_thread(main, list(argv), out)
    return status, out.getvalue()


@pytest.fixture(scope="module")
async def played(redis_server: TestRedis, dev_keys: DevKeys, tmp_path_factory: pytest.
                 TempPathFactory) -> AsyncIterator[Played]:
    client = connect_sync(redis_server.url)
    client.flushall()
    client.close()
    async with running_room(redis_server, redis_server.url, dev_keys) as room:
        table_id = await room.client.open_table()
        for seat, name in NAMES.items():
            await room.fund(name)
            await room.client.call("SitDown", pb.SitDownRequest(
                table_id=table_id, seat=seat, buy_in=5_000), player(name))
        await play_until(room.client, table_id, HANDS, random.Random(7).choice, timeout=120)
        # The last hand is settled once the table moves on; wait for its ledger entry.
        wallet = connect_sync(redis_server.url)
        try:
            async with asyncio.timeout(30):
                while not any(f'"h{HANDS}"'.encode() in fields[b"tx"] for _, fields in
                              wallet.xrange(keys.wallet_key("ledger"))):
                    await asyncio.sleep(0.05)
        finally:
            wallet.close()
        url = (redis_server.server.url_for("auditor") if redis_server.server is not None
               else redis_server.url)
        env = {"STUD_REPLAY_REDIS_URL": url,
               "STUD_DEALER_TARGET": f"127.0.0.1:{room.dealer.port}",
               "STUD_AUDITOR_TOKEN": room.client.tokens.token(AUDITOR),
               "STUD_RUN_DIR": str(tmp_path_factory.mktemp("run"))}
        yield Played(room, table_id, env, redis_server.url)


@pytest.fixture
def replay_env(played: Played, monkeypatch: pytest.MonkeyPatch) -> Played:
    """``played`` with its environment set for the test."""
    for name in ("STUD_REPLAY_TOKEN", "STUD_ISSUER_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in played.env.items():
        monkeypatch.setenv(name, value)
    return played
