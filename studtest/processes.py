"""The room as separate processes, for end-to-end tests, the campaigns and the room benchmark:
``python -m dealer``, ``python -m wallet`` and one or more ``python -m table`` replicas, each a
child process with its own environment (its own Redis ACL user's URL, the public key set, its
own private key), on a free local port, logging to a file. A process can be killed with
SIGKILL and started again on the same port, as a crash and a restart would, or frozen
(SIGSTOP) and let go on (SIGCONT), as a long pause would.

Clients reach the services only through their gRPC APIs (:meth:`RoomProcesses.clients`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from stud.v1 import table_pb2_grpc, wallet_pb2_grpc
from studkit.auth import TokenBook
from studtest.table import TableClient
from studtest.wallet import WalletClient
from studtools.devkeys import DevKeys
from studtools.redis_server import free_port

CHANNEL_OPTIONS: Final = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 250),
]
"""Client channels reconnect quickly to a restarted service."""
INHERITED: Final = ("STUD_ENV", "STUD_AUTH_SECRET", "STUD_SERVICE_KEY", "STUD_ISSUER_KEY",
                    "STUD_AUTH_PUBLIC_KEYS", "REDIS_URL")
"""Variables of the parent's environment a child never inherits (it gets its own)."""
ADDR_ENV: Final = {"dealer": "DEALER_ADDR", "wallet": "WALLET_ADDR", "table": "TABLE_ADDR",
                   "tournament": "TOURNAMENT_ADDR", "archiver": "ARCHIVER_ADDR"}


def restartable_port() -> int:
    """A free local port outside the kernel's ephemeral range (Linux's is 32768-60999 by
    default), for a process that is killed and started again on the same port: a port from
    that range can be taken, while the process is down, as the source port of any outgoing
    connection, and the restart would then fail to bind."""
    low, high = 20_000, 32_000
    with contextlib.suppress(OSError, ValueError):
        first, _last = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
                           .split())
        high = min(high, first - 1)
    for port in random.sample(range(low, high), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return free_port()


@dataclass
class ServiceProcess:
    """One ``python -m <name>`` child on a fixed local port, with its log file."""

    name: str
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=restartable_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def metrics_port(self) -> int:
        """Where its ``/metrics`` answers (0: nowhere)."""
        return int(self.env.get("METRICS_PORT", "0"))

    @property
    def target(self) -> str:
        """Where clients reach it."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the process (again, after a kill: same port, same environment)."""
        env = {k: v for k, v in os.environ.items() if k not in INHERITED}
        env.update(self.env)
        env[ADDR_ENV[self.name]] = self.target
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", self.name], env=env,
                                         stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1

    def logs(self, since: int = 0) -> str:
        """The log written so far, from byte ``since`` on (see :meth:`log_size`)."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(since)
            return log.read().decode(errors="replace")

    def log_size(self) -> int:
        """How many bytes the log has now (a mark for :meth:`logs`)."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def freeze(self) -> None:
        """SIGSTOP: the process stops where it is (its sockets stay open), as a long pause
        (a GC pause, a VM migration) would."""
        assert self.proc is not None and self.running, f"{self.name} is not running"
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: a frozen process goes on."""
        if self.running:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)

    async def wait_serving(self, timeout: float = 60.0) -> None:
        """Poll the health service until SERVING; fail if the process exits first."""
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.target, options=CHANNEL_OPTIONS) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n"
                                         f"{self.logs()[-5000:]}")
                try:
                    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    pass
                await asyncio.sleep(0.05)
        raise AssertionError(f"{self.name} not serving after {timeout}s:\n{self.logs()[-5000:]}")

    def kill(self) -> None:
        """SIGKILL, as a crash would, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=20)

    def terminate(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (after a SIGCONT, should it be frozen) and wait; SIGKILL past ``timeout``.
        The exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.thaw()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode


@dataclass
class Clients:
    """Clients of the running room: the table as anyone, the wallet as anyone."""

    table: TableClient
    wallet: WalletClient


class RoomProcesses:
    """Dealer, wallet and ``replicas`` table replicas as child processes over one Redis.

    ``redis_url_for(service)`` gives each service its ACL user's URL; ``log_dir`` receives
    ``dealer.log``, ``wallet.log`` and ``table.log`` (``table1.log``, ... for further
    replicas); ``extra_env`` is added to every child's environment (e.g. ``LOG_LEVEL``),
    ``table_env`` to each table replica's. With more than one replica, replica ``i`` is
    ``TABLE_REPLICA_ID=table-<i>``. ``metrics`` gives every process a ``/metrics`` port of its
    own (:attr:`ServiceProcess.metrics_port`; else none serves it)."""

    def __init__(self, redis_url_for: Callable[[str], str], keys: DevKeys, log_dir: Path,
                 extra_env: Mapping[str, str] | None = None,
                 table_env: Mapping[str, str] | None = None, replicas: int = 1,
                 metrics: bool = False) -> None:
        self.keys = keys
        log_dir.mkdir(parents=True, exist_ok=True)
        common = {"METRICS_PORT": "0", "LOG_LEVEL": "INFO", **(extra_env or {})}
        self.dealer = ServiceProcess("dealer", {
            **common, **keys.env("dealer"), "REDIS_URL": redis_url_for("dealer"),
            "DEALER_SHUTDOWN_GRACE": "1"}, log_dir / "dealer.log")
        self.wallet = ServiceProcess("wallet", {
            **common, **keys.env("wallet"), "REDIS_URL": redis_url_for("wallet"),
            "WALLET_SHUTDOWN_GRACE": "1"}, log_dir / "wallet.log")
        table = {**common, **keys.env("table"), "REDIS_URL": redis_url_for("table"),
                 "TABLE_DEALER_TARGET": self.dealer.target,
                 "TABLE_WALLET_TARGET": self.wallet.target, "TABLE_SHUTDOWN_GRACE": "1",
                 **(table_env or {})}
        self.tables = [ServiceProcess("table", dict(table),
                                      log_dir / ("table.log" if i == 0 else f"table{i}.log"))
                       for i in range(replicas)]
        if replicas > 1:
            for i, proc in enumerate(self.tables):
                proc.env["TABLE_REPLICA_ID"] = f"table-{i}"
        if metrics:
            for proc in self.all:
                proc.env["METRICS_PORT"] = str(restartable_port())
                proc.env["METRICS_ADDR"] = "127.0.0.1"

    @property
    def table(self) -> ServiceProcess:
        """The (first) table replica."""
        return self.tables[0]

    @property
    def all(self) -> tuple[ServiceProcess, ...]:
        return (self.dealer, self.wallet, *self.tables)

    async def start(self) -> None:
        """Start every service and wait until each serves."""
        for proc in self.all:
            proc.start()
        for proc in self.all:
            await proc.wait_serving()

    async def crash_table(self) -> None:
        """SIGKILL the table service and start it again (same port), until it serves."""
        await asyncio.to_thread(self.table.kill)
        self.table.start()
        await self.table.wait_serving()

    def stop(self) -> None:
        """SIGTERM every service still running (tables first, frozen ones let go on first),
        SIGKILL a straggler."""
        for proc in reversed(self.all):
            proc.terminate()

    @contextlib.asynccontextmanager
    async def clients(self) -> AsyncIterator[Clients]:
        """Channels to the table and the wallet, with tokens for any principal."""
        async with grpc.aio.insecure_channel(self.table.target,
                                             options=CHANNEL_OPTIONS) as table_channel, \
                grpc.aio.insecure_channel(self.wallet.target,
                                          options=CHANNEL_OPTIONS) as wallet_channel:
            table = TableClient(
                table_pb2_grpc.TableServiceStub(table_channel),  # type: ignore[no-untyped-call]
                TokenBook(self.keys))
            wallet = WalletClient(
                wallet_pb2_grpc.WalletServiceStub(wallet_channel),  # type: ignore[no-untyped-call]
                self.keys)
            yield Clients(table=table, wallet=wallet)


@contextlib.asynccontextmanager
async def room_processes(redis_url_for: Callable[[str], str], keys: DevKeys, log_dir: Path,
                         extra_env: Mapping[str, str] | None = None,
                         table_env: Mapping[str, str] | None = None, replicas: int = 1,
                         metrics: bool = False) -> AsyncIterator[RoomProcesses]:
    """The room started, and stopped on exit (whatever happened)."""
    room = RoomProcesses(redis_url_for, keys, log_dir, extra_env, table_env, replicas,
                         metrics)
    try:
        await room.start()
        yield room
    finally:
        room.stop()
