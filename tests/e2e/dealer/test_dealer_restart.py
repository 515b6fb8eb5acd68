"""The dealer as a separate process (``python -m dealer``), driven only through its gRPC API:
killed mid-hand with SIGKILL and started again, it carries on with the same deck; stopped with
SIGTERM, it shuts down gracefully. Its JSON log lines never carry a card."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rules import Phase, TableConfig
from stud.v1 import dealer_pb2_grpc as pb_grpc
from studkit.deckproof import audit_from_proto, verify_hand
from studkit.mapping import card_from_proto, event_from_envelope, game_envelopes
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest import redis as test_redis_source
from studtest.dealer import DealerClient, TableRole, deal_request, player
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
KEYS = DevKeys.generate()
CARD_TEXT = re.compile(r"(?<![A-Za-z0-9])[2-9TJQKA][cdhs](?![A-Za-z0-9])")
PLAYERS = {1: "ann", 3: "bob", 5: "cat", 7: "dan"}


def service_url(redis_server: test_redis_source.TestRedis, admin_url: str, service: str) -> str:
    if redis_server.server is not None:
        return redis_server.server.url_for(service)
    return admin_url


class DealerProcess:
    """One ``python -m dealer`` child with its log file."""

    def __init__(self, redis_url: str, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        env = {**os.environ, "DEALER_ADDR": f"127.0.0.1:{self.port}", "REDIS_URL": redis_url,
               **KEYS.env("dealer"), "LOG_LEVEL": "INFO", "DEALER_SHUTDOWN_GRACE": "2",
               "METRICS_PORT": "0"}
        for inherited in ("STUD_ENV", "STUD_AUTH_SECRET", "STUD_ISSUER_KEY"):
            env.pop(inherited, None)
        self._log = log_path.open("wb")
        self.process = subprocess.Popen([sys.executable, "-m", "dealer"], cwd=ROOT, env=env,
                                        stdout=self._log, stderr=subprocess.STDOUT)

    async def wait_serving(self, timeout: float = 30.0) -> None:
        """Poll the health service until SERVING (or fail at the deadline)."""
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                assert self.process.poll() is None, self.log_path.read_text()
                try:
                    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(0.05)
        raise AssertionError(f"dealer not serving after {timeout}s: {self.log_path.read_text()}")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.process.kill()
        self.process.wait(timeout=10)
        self._log.close()

    def terminate(self) -> int:
        """SIGTERM and wait for the exit code."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=20)
        self._log.close()
        return code

    def log_lines(self) -> list[dict[str, object]]:
        """The JSON log lines written so far."""
        return [json.loads(line) for line in self.log_path.read_text().splitlines()
                if line.startswith("{")]


@contextmanager
def dealer_process(redis_url: str, log_path: Path) -> Iterator[DealerProcess]:
    proc = DealerProcess(redis_url, log_path)
    try:
        yield proc
    finally:
        if proc.process.poll() is None:
            proc.kill()


@asynccontextmanager
async def client_for(proc: DealerProcess) -> AsyncIterator[DealerClient]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{proc.port}") as channel:
        stub = pb_grpc.DealerServiceStub(channel)  # type: ignore[no-untyped-call]
        yield DealerClient(stub, KEYS)


@pytest.fixture
async def table_events(redis_server: test_redis_source.TestRedis,
                       redis_url: str) -> AsyncIterator[EventStore]:
    client = connect(service_url(redis_server, redis_url, "table"))
    yield EventStore(client)
    await client.aclose()


def assert_no_cards_logged(*procs: DealerProcess) -> None:
    for proc in procs:
        text = proc.log_path.read_text()
        assert proc.log_lines(), "the dealer writes JSON log lines"
        assert not CARD_TEXT.findall(text), "a card value reached the dealer's log"
        assert "eyJ" not in text, "a token reached the dealer's log"


class TestRestart:
    async def test_killed_mid_hand_the_dealer_continues_with_the_same_deck(
        self, redis_server: test_redis_source.TestRedis, redis_url: str,
        table_events: EventStore, tmp_path: Path,
    ) -> None:
        """Deal 3rd and 4th street and draw 5th street, SIGKILL the dealer before the table
        records 5th street, start a new process: players read the same cards as before, the
        table's repeated request gets the same 5th street, the rest of the hand is dealt, and
        the audit shows every card of the hand came from the deck committed at hand start."""
        url = service_url(redis_server, redis_url, "dealer")
        with dealer_process(url, tmp_path / "first.log") as first:
            await first.wait_serving()
            async with client_for(first) as client:
                table = TableRole(table_events, client, "t-restart", TableConfig(), PLAYERS)
                await table.open()
                commitment = await table.start_hand()
                await table.play_until(Phase.BETTING)  # 3rd street dealt
                await table.play_until(Phase.DEALING)
                await table.deal()  # 4th street
                await table.play_until(Phase.DEALING)
                # The dealer draws 5th street, then dies before the table records it.
                drawn = await client.deal(deal_request(table.table_id, 1, table.t))
                before = {name: await client.my_cards(table.table_id, player(name))
                          for name in PLAYERS.values()}
            first.kill()

        with dealer_process(url, tmp_path / "second.log") as second:
            await second.wait_serving()
            async with client_for(second) as client:
                table.dealer = client
                for name, cards in before.items():
                    assert await client.my_cards(table.table_id, player(name)) == cards
                assert await table.deal() == drawn  # the same 5th street, not a new draw
                while not table.t.hand.is_over:
                    await table.step()
                after = await client.my_cards(table.table_id, player("ann"))
                assert list(after.down)[:2] == list(before["ann"].down)
                reply = await client.audit(table.table_id, 1)
            assert second.terminate() == 0

        assert reply.commitment == commitment
        stored = await table_events.read(table.table_id)
        events = [event_from_envelope(e) for e in game_envelopes(s.envelope for s in stored)]
        audit = audit_from_proto(reply)
        result = verify_hand(audit, events)
        assert result.ok, result.problems
        assert result.draws == reply.cards_used == 4 * 7
        # The deck in dealing order: the base deck permuted by the seeds (docs/fairness.md).
        assert audit.fair is not None
        order = list(audit.fair.dealing_deck(audit.deck.salt).order)
        up_before_kill = [card_from_proto(c.card).index
                          for r in table.replies[:2] for c in r.cards if c.up]
        assert up_before_kill == order[8:16]  # third pass of 3rd street, then 4th street
        assert_no_cards_logged(first, second)

    async def test_sigterm_stops_gracefully(
        self, redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path
    ) -> None:
        """SIGTERM: the dealer stops serving, finishes and exits 0, saying so in its log."""
        url = service_url(redis_server, redis_url, "dealer")
        with dealer_process(url, tmp_path / "dealer.log") as proc:
            await proc.wait_serving()
            assert proc.terminate() == 0
            events = [line.get("event") for line in proc.log_lines()]
            assert "dealer_started" in events and "dealer_stopped" in events
