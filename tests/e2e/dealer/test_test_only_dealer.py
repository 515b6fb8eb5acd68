"""The production dealer cannot be made to cheat by a variable (issue 29): ``python -m dealer``
with a test-only setting (``DEALER_CORRUPT``, ``DEALER_STACKED_DECKS``) set, whatever
``STUD_ENV`` says, exits non-zero at once with one clear log line and never serves, on a
Redis where it otherwise starts. The rigged dealer lives in the test support
(``python -m studtest.rigged_dealer``, in no image): it reads those settings and serves
``DealerTestingService.StackDeck``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from rules import parse_cards
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from studkit.auth import Principal, Role, TokenBook
from studkit.mapping import card_to_proto
from studtest import redis as test_redis_source
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
KEYS = DevKeys.generate()


def dealer_env(redis_server: test_redis_source.TestRedis, admin_url: str, port: int,
               **extra: str) -> dict[str, str]:
    url = (redis_server.server.url_for("dealer") if redis_server.server is not None
           else admin_url)
    env = {k: v for k, v in os.environ.items()
           if k not in ("STUD_ENV", "DEALER_CORRUPT", "DEALER_STACKED_DECKS")}
    env.update({"DEALER_ADDR": f"127.0.0.1:{port}", "REDIS_URL": url, **KEYS.env("dealer"),
                "LOG_LEVEL": "INFO", "DEALER_SHUTDOWN_GRACE": "1", "METRICS_PORT": "0"})
    env.update(extra)
    return env


def log_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


async def serving(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the dealer exited"
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.05)
    raise AssertionError(f"not serving after {timeout}s")


@pytest.mark.parametrize(("name", "value"), [
    ("DEALER_CORRUPT", "swap"), ("DEALER_CORRUPT", "drop_seed"),
    ("DEALER_STACKED_DECKS", "1")])
@pytest.mark.parametrize("stud_env", ["test", "prod", ""])
def test_the_production_dealer_refuses_to_start_with_a_test_only_setting(
        redis_server: test_redis_source.TestRedis, redis_url: str, name: str, value: str,
        stud_env: str) -> None:
    port = free_port()
    env = dealer_env(redis_server, redis_url, port, **{name: value, "STUD_ENV": stud_env})
    done = subprocess.run([sys.executable, "-m", "dealer"], cwd=ROOT, env=env,
                          capture_output=True, timeout=30)
    out = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 2, out
    lines = log_lines(done.stdout.decode())
    refused = [line for line in lines if line.get("event") == "test_only_setting_refused"]
    assert len(refused) == 1, out
    assert refused[0]["level"] == "error" and refused[0]["settings"] == [name], refused
    assert "studtest.rigged_dealer" in str(refused[0]["hint"])
    assert not any(line.get("event") == "dealer_started" for line in lines), out
    assert "Traceback" not in out


async def test_without_them_the_same_dealer_starts(
        redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path) -> None:
    """The control: the refusal above is the setting's, not the environment's (an empty
    value is no setting)."""
    port = free_port()
    env = dealer_env(redis_server, redis_url, port, STUD_ENV="test", DEALER_CORRUPT="",
                     DEALER_STACKED_DECKS="")
    with (tmp_path / "dealer.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "dealer"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        await serving(port, proc)
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    assert any(line.get("event") == "dealer_started"
               for line in log_lines((tmp_path / "dealer.log").read_text()))


async def test_the_rigged_dealer_of_the_test_support_serves_stacked_decks(
        redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    env = dealer_env(redis_server, redis_url, port, DEALER_STACKED_DECKS="1",
                     DEALER_CORRUPT="withhold")
    with (tmp_path / "rigged.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "studtest.rigged_dealer"], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        await serving(port, proc)
        tokens = TokenBook(KEYS)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = dpb_grpc.DealerTestingServiceStub(channel)  # type: ignore[no-untyped-call]
            request = dpb.StackDeckRequest(table_id="t1", hand_number=1, cards=[
                card_to_proto(c) for c in parse_cards("As Ks")])
            await stub.StackDeck(request, timeout=5, metadata=tokens.metadata(
                Principal(Role.OPERATOR, "ops")))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.StackDeck(request, timeout=5, metadata=tokens.metadata(
                    Principal(Role.PLAYER, "ann")))
            assert caught.value.code() is grpc.StatusCode.PERMISSION_DENIED
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    events = {line.get("event"): line for line in log_lines((tmp_path / "rigged.log").read_text())}
    assert events["rigged_dealer_started"]["corruption"] == "withhold"
    assert events["rigged_dealer_started"]["stacked_decks"] is True
