"""``make run`` as a local attacker and a closing terminal see it (issue 8): its Redis admits
no one without credentials, nothing listens beyond loopback, a second launcher refuses the
data directory of a live one, and a hang-up, SIGTERM or Ctrl-C stops every process it
started within 10 seconds.

Each test runs ``python -m studtools.devrun`` in a scratch directory (its ``.run/`` is there)
in its own session, as a terminal's shell would run a job, and drives it only from outside:
signals, its output, ``/proc`` and TCP.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from studtools.redis_server import lock_holder

STOP_LIMIT_S = 10.0
START_LIMIT_S = 120.0


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


@dataclass
class Launcher:
    """A ``make run`` started in ``cwd``, its output in a file (never a pipe it could fill)."""

    cwd: Path
    process: subprocess.Popen[bytes] = field(init=False)
    log: Path = field(init=False)
    started: dict[int, int] = field(default_factory=dict)
    """Its processes once running (pid -> start time), to clean up after a failed test even
    when they outlived it."""

    def __post_init__(self) -> None:
        self.log = self.cwd / f"devrun-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "studtools.devrun"], cwd=self.cwd, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )

    @property
    def data_dir(self) -> Path:
        return self.cwd / ".run" / "redis"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self) -> None:
        """Until it says it is running (everything SERVING); fails if it exits first."""
        deadline = time.monotonic() + START_LIMIT_S
        while "running; Ctrl-C" not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.1)
        self.started = self.descendants()

    def descendants(self) -> dict[int, int]:
        """pid -> start time of every live process below the launcher."""
        tree: dict[int, list[int]] = {}
        starts: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
                tree.setdefault(stat[1], []).append(int(entry.name))
                starts[int(entry.name)] = stat[2]
        found: dict[int, int] = {}
        todo = [self.process.pid]
        while todo:
            for child in tree.get(todo.pop(), []):
                found[child] = starts[child]
                todo.append(child)
        return found

    def line(self, prefix: str) -> list[str]:
        """The words of its output line that starts with ``prefix``."""
        return next(ln.split() for ln in self.output().splitlines() if ln.startswith(prefix))

    def stop(self) -> None:
        """Kill whatever is left (a failed test must not leave processes behind)."""
        leftovers = {**self.started, **(self.descendants() if self.process.poll() is None
                                         else {})}
        for pid in [self.process.pid, *alive(leftovers)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def alive(processes: dict[int, int]) -> list[int]:
    """The pids of ``processes`` still running (same start time, not a zombie)."""
    left = []
    for pid, start in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[0] != "Z":
            left.append(pid)
    return left


def assert_all_stop(launcher: Launcher, children: dict[int, int], sent_at: float) -> None:
    """The launcher and every process it started are gone within the limit."""
    launcher.process.wait(timeout=STOP_LIMIT_S + 5)
    while alive(children) and time.monotonic() - sent_at < STOP_LIMIT_S + 5:
        time.sleep(0.05)
    elapsed = time.monotonic() - sent_at
    assert not alive(children), f"left behind: {alive(children)}\n{launcher.output()}"
    assert elapsed < STOP_LIMIT_S, f"took {elapsed:.1f} s\n{launcher.output()}"
    assert lock_holder(launcher.data_dir) is None
    assert not (launcher.data_dir / "admin.url").exists()


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp{,6},
    which write each 32-bit word of an address in host byte order)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            hex_host, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                raw = b"".join(bytes.fromhex(hex_host[i:i + 8])[::-1]
                               for i in range(0, len(hex_host), 8))
                address = ipaddress.ip_address(raw)
                if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                    address = address.ipv4_mapped
                found.add(str(address))
    return found


@contextlib.contextmanager
def running_launcher(cwd: Path) -> Iterator[Launcher]:
    started = Launcher(cwd)
    try:
        started.wait_running()
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launcher]:
    """A running ``make run`` that the tests only look at, shared by them."""
    with running_launcher(tmp_path_factory.mktemp("make-run")) as started:
        yield started


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    """A running ``make run`` of the test's own, to stop."""
    with running_launcher(tmp_path) as started:
        yield started


class TestMakeRunRedis:
    def test_refuses_connections_without_credentials(self, running: Launcher) -> None:
        """The ``default`` user is off, so a local user with ``redis-cli -p <port>`` gets
        NOAUTH for everything, a deck included; the admin URL is in ``.run/redis/admin.url``,
        which only its owner may read, as the whole data directory (the AOF holds decks)."""
        port = int(running.line("redis")[1].rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"PING\r\nHGET stud:dealer:{t1}:hand:1 order\r\n")
            reply = b""
            while reply.count(b"\r\n") < 2:
                chunk = sock.recv(4096)
                assert chunk
                reply += chunk
        assert [r.split()[0] for r in reply.splitlines()] == [b"-NOAUTH", b"-NOAUTH"]
        admin_file = running.data_dir / "admin.url"
        assert admin_file.stat().st_mode & 0o777 == 0o600
        assert running.data_dir.stat().st_mode & 0o777 == 0o700
        admin = redis.Redis.from_url(admin_file.read_text().strip())
        try:
            assert admin.acl_whoami() == "admin"
            assert admin.config_get("appendfsync") == {"appendfsync": "always"}
        finally:
            admin.close()
        assert "AOF always" in running.output()

    def test_second_launcher_on_the_same_data_directory_refuses(
        self, running: Launcher
    ) -> None:
        """A second ``make run`` on a data directory a live server holds exits at once with
        a message naming that server, and the first runs on untouched."""
        redis_pid = lock_holder(running.data_dir)
        assert redis_pid in running.descendants()
        admin_url = (running.data_dir / "admin.url").read_text()
        second = Launcher(running.cwd)
        try:
            assert second.process.wait(timeout=60) != 0
        finally:
            second.stop()
        assert f"in use by redis-server pid {redis_pid}" in second.output()
        assert "SERVING" not in second.output()
        assert (running.data_dir / "admin.url").read_text() == admin_url
        assert running.process.poll() is None and lock_holder(running.data_dir) == redis_pid


class TestMakeRunListens:
    def test_grpc_and_metrics_listen_on_loopback_only(self, running: Launcher) -> None:
        """Every service's gRPC port and ``/metrics`` port, and Redis, are bound to
        127.0.0.1 and nothing else."""
        ports = [int(running.line("redis")[1].rsplit(":", 1)[1])]
        for name in ("dealer", "wallet"):
            words = running.line(name)
            ports.append(int(words[1].rsplit(":", 1)[1]))
            ports.append(int(words[-1].split(":")[2].split("/")[0]))
        for port in ports:
            assert listening_addresses(port) == {"127.0.0.1"}, (port, running.output())


class TestMakeRunStops:
    @pytest.mark.parametrize(
        ("signum", "whole_group"),
        [(signal.SIGHUP, True), (signal.SIGHUP, False), (signal.SIGTERM, False),
         (signal.SIGINT, True)],
        ids=["hangup-terminal-closed", "hangup-launcher", "sigterm", "ctrl-c"],
    )
    def test_a_stop_signal_stops_every_process_it_started(
        self, launcher: Launcher, signum: signal.Signals, whole_group: bool
    ) -> None:
        """Closing the terminal (SIGHUP to the job's process group), a hang-up or SIGTERM to
        the launcher alone, and Ctrl-C (SIGINT to the group) each stop Redis and every service
        within 10 seconds, leave none behind and free the data directory."""
        children = launcher.descendants()
        assert len(children) >= 3, launcher.output()  # Redis and at least two services
        sent_at = time.monotonic()
        if whole_group:
            os.killpg(launcher.process.pid, signum)
        else:
            os.kill(launcher.process.pid, signum)
        assert_all_stop(launcher, children, sent_at)

    def test_a_stuck_service_is_killed_in_time(self, launcher: Launcher) -> None:
        """A service that does not react to SIGTERM (here: stopped with SIGSTOP) is killed
        once its time is up, and the whole stop still takes under 10 seconds."""
        children = launcher.descendants()
        wallet = next(pid for pid in children
                      if Path(f"/proc/{pid}/cmdline").read_bytes().endswith(b"-m\0wallet\0"))
        os.kill(wallet, signal.SIGSTOP)
        sent_at = time.monotonic()
        os.killpg(launcher.process.pid, signal.SIGHUP)
        assert_all_stop(launcher, children, sent_at)
