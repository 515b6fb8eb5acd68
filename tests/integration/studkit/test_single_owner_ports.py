"""Every listener has one owner (issue 29): grpcio turns ``SO_REUSEPORT`` on by default, so a
second copy of a service bound the same port silently and the kernel split new connections
between the two (19 to 1 measured). The servers are built with ``grpc.so_reuseport=0``, so a
second copy fails to bind, whatever options its builder passes; the services' ``/metrics``
listeners (``SO_REUSEADDR`` only) refuse a second bind too; and ``make run``'s "port taken,
start on another port" sees a port a gRPC server holds as taken, and never takes another
process's health answer on its service's port for its service's own."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from prometheus_client import CollectorRegistry

from studkit.grpc_server import CLIENT_PING_FLOOR_MS, GrpcServer, create_grpc_server
from studkit.metrics import metrics_endpoint
from studtools import devrun
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration

KEYS = DevKeys.generate()
ROOT = Path(__file__).resolve().parents[3]
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
CALLER_OPTIONS = {
    "default": None,
    "the caller's own": (("grpc.http2.min_ping_interval_without_data_ms",
                          CLIENT_PING_FLOOR_MS),),
    "asking for reuseport": (("grpc.so_reuseport", 1),),
}
"""The options a service's builder passes to :func:`create_grpc_server` (None: its
defaults). None of them may let a second copy share the port."""


async def serving(address: str, options: object = None) -> GrpcServer:
    kwargs = {} if options is None else {"options": options}
    server = create_grpc_server(address, [], verifier=KEYS.verifier(), **kwargs)
    await server.start()
    return server


@pytest.fixture
async def first() -> AsyncIterator[GrpcServer]:
    """The first copy: a server as the services build theirs, on a free port."""
    server = await serving("127.0.0.1:0")
    yield server
    await server.stop(None)


@pytest.mark.parametrize("options", sorted(CALLER_OPTIONS))
async def test_a_second_copy_on_the_same_port_fails_to_bind(options: str) -> None:
    """Two copies of one service (the same builder, the same options) on one port: the
    second fails to bind (RuntimeError), whatever options the builder passes; every new
    connection then reaches the first."""
    first = await serving("127.0.0.1:0", CALLER_OPTIONS[options])
    try:
        with pytest.raises(RuntimeError, match="bind"):
            second = await serving(f"127.0.0.1:{first.port}", CALLER_OPTIONS[options])
            await second.stop(None)  # pragma: no cover - only when the bind wrongly succeeds
        for _ in range(10):
            async with grpc.aio.insecure_channel(f"127.0.0.1:{first.port}",
                                                 options=OWN_CONNECTION) as channel:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await first.stop(None)


def test_a_second_metrics_endpoint_on_the_same_port_fails_to_bind() -> None:
    """``/metrics`` listens with SO_REUSEADDR only: a second endpoint on a port one holds
    fails with EADDRINUSE instead of sharing it."""
    with metrics_endpoint(CollectorRegistry(), free_port(), "127.0.0.1") as endpoint:
        assert endpoint is not None
        with pytest.raises(OSError), metrics_endpoint(CollectorRegistry(), endpoint.port,
                                                      "127.0.0.1"):
            pass  # pragma: no cover - only when the bind wrongly succeeds


@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    KEYS.write(tmp_path / "keys")
    return tmp_path / "keys"


def wallet(redis_url: str, addr: str, metrics_port: int, keys_dir: Path,
           log: Path) -> subprocess.Popen[bytes]:
    """A real ``python -m wallet`` on ``addr``, as ``make run`` starts it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("STUD_ENV", "STUD_AUTH_SECRET", "STUD_SERVICE_KEY", "STUD_ISSUER_KEY",
                        "STUD_AUTH_PUBLIC_KEYS", "REDIS_URL")}
    env.update({"REDIS_URL": redis_url, "WALLET_ADDR": addr,
                "STUD_AUTH_PUBLIC_KEYS": str(keys_dir / "public-keys.json"),
                "METRICS_PORT": str(metrics_port), "METRICS_ADDR": "127.0.0.1",
                "LOG_LEVEL": "INFO", "WALLET_SHUTDOWN_GRACE": "1"})
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "wallet"], cwd=ROOT, env=env,
                                stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


async def test_a_second_wallet_process_on_a_taken_port_exits_failing_to_bind(
        first: GrpcServer, redis_url: str, keys_dir: Path, tmp_path: Path,
        processes: list[subprocess.Popen[bytes]]) -> None:
    """A real service process started on a port another server holds exits, its log
    saying it failed to bind, instead of serving half the connections."""
    log = tmp_path / "wallet.log"
    process = wallet(redis_url, f"127.0.0.1:{first.port}", 0, keys_dir, log)
    processes.append(process)
    assert await asyncio.to_thread(process.wait, 60) != 0
    assert "Failed to bind" in log.read_text(errors="replace")


async def test_make_run_sees_a_port_a_grpc_server_holds_as_taken(first: GrpcServer) -> None:
    """``make run``'s probe (``port_free``) finds a port held by a gRPC server taken: one of
    ours, and one built with grpcio's defaults, SO_REUSEPORT on (a foreign server, an older
    copy): the probe binds without SO_REUSEPORT, which the kernel refuses beside either."""
    assert not devrun.port_free(first.port)
    foreign = grpc.aio.server()
    port = foreign.add_insecure_port("127.0.0.1:0")
    await foreign.start()
    try:
        assert not devrun.port_free(port)
    finally:
        await foreign.stop(None)
    assert devrun.port_free(port)


async def test_make_run_does_not_take_another_servers_health_for_its_service(
        redis_url: str, keys_dir: Path, tmp_path: Path,
        processes: list[subprocess.Popen[bytes]]) -> None:
    """The port ``make run`` chose is taken, before its service binds, by another gRPC
    server that answers health SERVING (a second ``make run``'s service, grpcio's default
    SO_REUSEPORT on). The service fails to bind and exits; ``make run`` must see that its
    service is not serving there and that it lost its port (then it starts it on another),
    not report the other server's SERVING as its own."""
    other = grpc.aio.server()  # a foreign server, with grpcio's defaults
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, other)
    port = other.add_insecure_port("127.0.0.1:0")
    await other.start()
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    try:
        addr, metrics_port = f"127.0.0.1:{port}", free_port()
        process = wallet(redis_url, addr, metrics_port, keys_dir, tmp_path / "wallet.log")
        processes.append(process)
        service = devrun.Running(name="wallet", addr=addr, process=process)
        began = time.monotonic()
        ok = await asyncio.to_thread(devrun.serving_itself, service, metrics_port, 60.0)
        assert not ok, "make run took the other server's health answer for its wallet's"
        assert time.monotonic() - began < 60
        await asyncio.to_thread(process.wait, 30)
        assert devrun.lost_its_port(service, metrics_port)
    finally:
        await other.stop(None)
