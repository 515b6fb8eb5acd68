"""The wallet as a separate process (``python -m wallet``), driven only through gRPC: killed
with SIGKILL between calls and restarted, it keeps balances and idempotency; SIGTERM stops it
gracefully."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stud.v1 import wallet_pb2 as pb
from stud.v1 import wallet_pb2_grpc as pb_grpc
from studtest import redis as test_redis_source
from studtest.wallet import AUDITOR, WalletClient
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

pytestmark = pytest.mark.e2e

KEYS = DevKeys.generate()
ROOT = Path(__file__).resolve().parents[3]
READY_WITHIN_S = 30.0
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 200),
]


class WalletProcess:
    """One ``python -m wallet`` child process on a free port."""

    def __init__(self, redis_url: str, log_path: Path) -> None:
        self.redis_url = redis_url
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> None:
        self.port = free_port()
        # The key set from a file, as a mounted Secret gives it; the wallet needs no private key.
        keys_dir = self.log_path.parent / "keys"
        KEYS.write(keys_dir)
        env = {
            **os.environ,
            "REDIS_URL": self.redis_url,
            "WALLET_ADDR": f"127.0.0.1:{self.port}",
            "STUD_AUTH_PUBLIC_KEYS": str(keys_dir / "public-keys.json"),
            "LOG_LEVEL": "INFO",
            "WALLET_SHUTDOWN_GRACE": "2",
            "METRICS_PORT": "0",
        }
        for inherited in ("STUD_ENV", "STUD_AUTH_SECRET", "STUD_SERVICE_KEY", "STUD_ISSUER_KEY"):
            env.pop(inherited, None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "wallet"], cwd=ROOT, env=env, stdout=log,
                stderr=subprocess.STDOUT,
            )

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def wait_serving(self) -> None:
        """Poll the health service until SERVING, the process dies, or the deadline."""
        deadline = time.monotonic() + READY_WITHIN_S
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{self.port}", options=CHANNEL_OPTIONS
        ) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    pytest.fail(f"wallet exited with {self.proc.returncode}:\n{self.logs()}")
                try:
                    reply = await stub.Check(
                        health_pb2.HealthCheckRequest(), timeout=0.5, wait_for_ready=True
                    )
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    continue
        pytest.fail(f"wallet not SERVING within {READY_WITHIN_S}s:\n{self.logs()}")

    async def kill(self, sig: signal.Signals = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return await asyncio.to_thread(self.proc.wait, 20)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def wallet_process(
    redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path
) -> Iterator[WalletProcess]:
    url = redis_server.server.url_for("wallet") if redis_server.server else redis_url
    process = WalletProcess(url, tmp_path / "wallet.log")
    yield process
    process.stop()


@asynccontextmanager
async def client_for(process: WalletProcess) -> AsyncIterator[WalletClient]:
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{process.port}", options=CHANNEL_OPTIONS
    ) as channel:
        yield WalletClient(pb_grpc.WalletServiceStub(channel), KEYS)


HAND = pb.SettleHandRequest(
    table_id="t1",
    hand_id="h1",
    seats=[
        pb.SettlementSeat(seat=1, player_id="alice", amount_in=300, amount_won=585),
        pb.SettlementSeat(seat=2, player_id="bob", amount_in=300, amount_won=0),
    ],
    rake=15,
    rake_policy=pb.RakePolicy(percent_bps=250, cap=50),
    ended_on_street=pb.SettleHandRequest.STREET_SEVENTH,
)


async def total_of_all_accounts(client: WalletClient) -> int:
    accounts = [
        pb.AccountRef(player_id="alice"),
        pb.AccountRef(player_id="bob"),
        pb.AccountRef(seat=pb.SeatAccount(table_id="t1", seat=1)),
        pb.AccountRef(seat=pb.SeatAccount(table_id="t1", seat=2)),
        pb.AccountRef(system=pb.SYSTEM_ACCOUNT_HOUSE),
        pb.AccountRef(system=pb.SYSTEM_ACCOUNT_EXTERNAL),
    ]
    return sum([await client.balance(a, who=AUDITOR) for a in accounts])


async def test_balances_and_idempotency_survive_sigkill(wallet_process: WalletProcess) -> None:
    """After SIGKILL and restart, balances are intact and retried deposits, buy-ins and
    settlements answer their original outcomes without moving money again."""
    wallet_process.start()
    await wallet_process.wait_serving()
    async with client_for(wallet_process) as client:
        for name, seat in (("alice", 1), ("bob", 2)):
            await client.create_account(name)
            await client.deposit(name, 1000, f"dep-{name}")
            await client.buy_in(name, "t1", seat, 500, f"buy-{name}")
        settled = await client.settle(HAND)
    assert await wallet_process.kill() == -signal.SIGKILL

    wallet_process.start()
    await wallet_process.wait_serving()
    async with client_for(wallet_process) as client:
        assert await client.player_balance("alice") == 500
        assert await client.escrows("t1") == {1: 785, 2: 200}
        deposit = await client.deposit("alice", 1000, "dep-alice")
        assert deposit.replayed and deposit.balance == 1000  # the original outcome
        assert await client.player_balance("alice") == 500
        buy_in = await client.buy_in("bob", "t1", 2, 500, "buy-bob")
        assert buy_in.replayed and buy_in.seat_balance == 500
        again = await client.settle(HAND)
        assert again.replayed and again.transaction_id == settled.transaction_id
        altered = pb.SettleHandRequest()
        altered.CopyFrom(HAND)
        altered.seats[0].amount_won, altered.seats[1].amount_won = 0, 585
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.settle(altered)
        assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
        await client.cash_out("alice", "t1", 1, "leave-alice")
    assert await wallet_process.kill() == -signal.SIGKILL

    wallet_process.start()
    await wallet_process.wait_serving()
    async with client_for(wallet_process) as client:
        retried = await client.cash_out("alice", "t1", 1, "leave-alice")
        assert retried.replayed and (retried.amount, retried.player_balance) == (785, 1285)
        assert await client.escrows("t1") == {2: 200}
        assert await total_of_all_accounts(client) == 0
    assert "eyJ" not in wallet_process.logs()  # no token (JWTs start with eyJ) in the logs


async def test_sigterm_stops_gracefully(wallet_process: WalletProcess) -> None:
    """SIGTERM makes the wallet report NOT_SERVING, stop and exit 0, logging the shutdown."""
    wallet_process.start()
    await wallet_process.wait_serving()
    assert await wallet_process.kill(signal.SIGTERM) == 0
    logs = wallet_process.logs()
    assert '"event": "shutdown_finished"' in logs and '"event": "wallet_stopped"' in logs
