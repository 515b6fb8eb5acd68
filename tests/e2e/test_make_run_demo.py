"""``make run``'s demo room (issue 11): the table ``demo`` with bots playing, the live feed in
the terminal, ``.run/env``, the services' logs in files, a stop that takes the demo too, the
data kept across runs (hands go on from where they were) and ``make reset``.

Each test runs ``python -m studtools.devrun`` in a scratch directory (its ``.run/`` is there) in
its own session, as a terminal's shell would, at a fast pace (bots think 20-50 ms, 200 ms
between hands), and looks at it only from outside: its output, its files, signals, ``/proc``
and the table service's gRPC API with a token minted from ``.run/keys``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc
import pytest

from stud.v1 import table_pb2, table_pb2_grpc
from studkit.auth import Principal, Role
from studtools.devkeys import DevKeys
from studtools.redis_server import lock_holder

pytestmark = pytest.mark.e2e

START_LIMIT_S = 90.0
PLAY_LIMIT_S = 40.0
STOP_LIMIT_S = 10.0
FAST = {"STUD_DEMO_THINK": "0.02-0.05", "STUD_DEMO_HAND_DELAY_MS": "200",
        "STUD_SITGO_LEVEL_S": "2", "STUD_SITGO_WINDOW_S": "3"}
SITGO_LIMIT_S = 150.0
ACTION = re.compile(r"^\[demo\] Seat \d (brings in for|completes to|bets|raises to|calls|"
                    r"checks|folds)", re.MULTILINE)
SUMMARY = re.compile(r"^\[demo\] Hand #\d+: Seat \d \(bot-\w+\) wins [\d,]+", re.MULTILINE)
T = TypeVar("T")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[19])


def alive(processes: dict[int, int]) -> list[int]:
    """The pids of ``processes`` (pid -> start time) still running, zombies aside."""
    return [pid for pid, start in processes.items()
            if (stat := _stat(pid)) is not None and stat[2] == start and stat[0] != "Z"]


def eventually(probe: Callable[[], T | None], limit: float, what: Callable[[], str]) -> T:
    """``probe()`` once it is not None; fails after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while (value := probe()) is None:
        assert time.monotonic() < deadline, what()
        time.sleep(0.2)
    return value


@dataclass
class Launcher:
    """A ``make run`` in ``cwd``, its output in a file."""

    cwd: Path
    process: subprocess.Popen[bytes] = field(init=False)
    log: Path = field(init=False)
    started: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.log = self.cwd / f"devrun-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "studtools.devrun"], cwd=self.cwd, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **FAST})

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self) -> None:
        """Until the demo's first line is out (the services SERVING, the demo started)."""
        def up() -> bool | None:
            assert self.process.poll() is None, self.output()
            return True if "[demo] table demo" in self.output() else None
        eventually(up, START_LIMIT_S, self.output)
        self.started = self.descendants()

    def descendants(self) -> dict[int, int]:
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

    def table_addr(self) -> str:
        return next(ln.split()[1] for ln in self.output().splitlines()
                    if ln.startswith("table "))

    def stop_and_check(self, signum: signal.Signals, whole_group: bool) -> None:
        """Send a stop signal; the launcher and everything it started (the demo too) are
        gone within 10 seconds and the data directory is free."""
        children = self.descendants()
        assert any(b"studclient.demo" in _cmdline(pid) for pid in children), children
        sent_at = time.monotonic()
        if whole_group:
            os.killpg(self.process.pid, signum)
        else:
            os.kill(self.process.pid, signum)
        self.process.wait(timeout=STOP_LIMIT_S + 5)
        while alive(children) and time.monotonic() - sent_at < STOP_LIMIT_S + 5:
            time.sleep(0.05)
        elapsed = time.monotonic() - sent_at
        assert not alive(children), f"left behind: {alive(children)}\n{self.output()}"
        assert elapsed < STOP_LIMIT_S, f"took {elapsed:.1f} s\n{self.output()}"
        assert lock_holder(self.cwd / ".run" / "redis") is None

    def kill(self) -> None:
        """Kill whatever is left (a failed test must not leave processes behind)."""
        leftovers = {**self.started, **(self.descendants() if self.process.poll() is None
                                         else {})}
        for pid in [self.process.pid, *alive(leftovers)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=10)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""


@contextlib.contextmanager
def make_run(cwd: Path) -> Iterator[Launcher]:
    launcher = Launcher(cwd)
    try:
        launcher.wait_running()
        yield launcher
    finally:
        launcher.kill()


class Lobby:
    """The table service at the printed address, as an operator minted from ``.run/keys``."""

    def __init__(self, cwd: Path, addr: str) -> None:
        issuer = DevKeys.load(cwd / ".run" / "keys").issuer()
        token = issuer.issue(Principal(Role.OPERATOR, "test"), ttl_seconds=600)
        self.metadata = (("authorization", f"Bearer {token}"),)
        self.channel = grpc.insecure_channel(addr)
        self.stub = table_pb2_grpc.TableServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.channel.close()

    def demo(self) -> table_pb2.TableView | None:
        """The demo table, None while it is not there (yet)."""
        tables = self.stub.ListTables(table_pb2.ListTablesRequest(), metadata=self.metadata,
                                      timeout=5).tables
        if "demo" not in [t.table_id for t in tables]:
            return None
        view: table_pb2.TableView = self.stub.GetTable(
            table_pb2.GetTableRequest(table_id="demo"), metadata=self.metadata, timeout=5)
        return view

    def hands_started(self, at_least: int, launcher: Launcher) -> int:
        """Wait until the demo table has dealt ``at_least`` hands; how many it has."""
        def probe() -> int | None:
            assert launcher.process.poll() is None, launcher.output()
            view = self.demo()
            return view.hands_started if view and view.hands_started >= at_least else None
        return eventually(probe, PLAY_LIMIT_S, launcher.output)


@contextlib.contextmanager
def lobby(launcher: Launcher) -> Iterator[Lobby]:
    client = Lobby(launcher.cwd, launcher.table_addr())
    try:
        yield client
    finally:
        client.close()


class TestDemoRoom:
    def test_demo_table_with_bots_a_feed_logs_and_env(self, tmp_path: Path) -> None:
        """The demo table is opened ($2/$4, 8 seats), bots sit (two seats or more stay
        free) and hands get played; the terminal shows one line per action and each hand's
        summary, no JSON log line (those are in ``.run/logs/<service>.log``), how to play,
        and ``.run/env`` (0600) names the printed addresses and the issuer key."""
        with make_run(tmp_path) as launcher, lobby(launcher) as room:
            room.hands_started(3, launcher)
            view = room.demo()
            assert view is not None
            assert (view.config.small_bet, view.config.big_bet) == (200, 400)
            bots = [s for s in view.seats if s.player_id.startswith("bot-")]
            assert len(bots) >= 2 and view.config.seats - len(view.seats) >= 2
            out = eventually(lambda: launcher.output() if SUMMARY.search(launcher.output())
                             else None, PLAY_LIMIT_S, launcher.output)
            assert len(ACTION.findall(out)) >= 3, out
            assert "stud play --table demo" in out and ".run/logs" in out
            assert not [ln for ln in out.splitlines() if ln.startswith("{")], out

            env_file = tmp_path / ".run" / "env"
            assert env_file.stat().st_mode & 0o777 == 0o600
            exported = dict(re.findall(r"^export (\w+)=(\S+)$", env_file.read_text(), re.M))
            for name in ("table", "dealer", "wallet"):
                addr = next(ln.split()[1] for ln in out.splitlines()
                            if ln.startswith(f"{name} "))
                assert exported[f"STUD_{name.upper()}_TARGET"] == addr
            assert Path(exported["STUD_ISSUER_KEY"]) == (
                tmp_path / ".run" / "keys" / "issuer.pem").resolve()
            for name in ("dealer", "wallet", "table"):
                lines = (tmp_path / ".run" / "logs" / f"{name}.log").read_text().splitlines()
                assert lines and all(ln.startswith("{") for ln in lines[:5]), name
            launcher.stop_and_check(signal.SIGHUP, whole_group=True)

    def test_a_sit_and_go_of_bots_is_played_and_a_new_one_starts_when_it_ends(
            self, tmp_path: Path) -> None:
        """Beside the demo table, the tournament service runs a sit & go of bots to its
        end (its prizes printed), then the next one; stopping make run stops it too."""
        with make_run(tmp_path) as launcher:
            out = eventually(lambda: launcher.output() if "[sitgo] sitgo-2: " in
                             launcher.output() else None, SITGO_LIMIT_S, launcher.output)
            over = next(ln for ln in out.splitlines() if ln.startswith("[sitgo] sitgo-1 over"))
            assert re.fullmatch(r"\[sitgo\] sitgo-1 over: 1\. sitgo-bot-\d [\d,]+(, .+)?",
                                over), over
            assert "tournament " in out and "sitgo      sit & go" in out
            assert "people only for 3 s" in out  # each waits for people before its bots
            assert re.search(r"^\[sitgo\] sitgo-1: 4 seats, .*open to people for 3 s: stud play "
                             r"--register sitgo-1 takes a seat; the bots take the seats left "
                             r"at \d\d:\d\d:\d\d$", out, re.M), out
            assert any(b"studclient.sitgo" in _cmdline(pid) for pid in launcher.descendants())
            launcher.stop_and_check(signal.SIGTERM, whole_group=False)

    def test_a_second_run_keeps_the_table_and_the_bots_play_on(self, tmp_path: Path) -> None:
        """Stopped by SIGTERM (the demo with it), run again: the table service rebuilds the
        demo table from its log, the bots are back in their seats and hands_started grows
        from where it was."""
        with make_run(tmp_path) as first, lobby(first) as room:
            room.hands_started(2, first)
            first.stop_and_check(signal.SIGTERM, whole_group=False)
        with make_run(tmp_path) as second, lobby(second) as room:
            before = room.demo()
            assert before is not None and before.hands_started >= 2
            # The line comes after the dev players' accounts are checked: wait for it.
            eventually(lambda: ("found" in second.output()
                       and "bots back at the table" in second.output()) or None,
                       PLAY_LIMIT_S, second.output)
            seats = {s.player_id: s.seat for s in before.seats}
            room.hands_started(before.hands_started + 2, second)
            after = room.demo()
            assert after is not None
            assert {s.player_id: s.seat for s in after.seats if s.player_id in seats} == seats
            second.stop_and_check(signal.SIGHUP, whole_group=True)

    def test_make_reset_clears_the_data_and_refuses_while_running(self, tmp_path: Path
                                                                   ) -> None:
        """``make reset`` (``--reset``) refuses while a ``make run`` holds the data; once it
        stopped, it deletes ``.run/redis`` and ``.run/logs`` and keeps the keys."""
        def reset() -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "studtools.devrun", "--reset"],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=60)

        with make_run(tmp_path) as launcher, lobby(launcher) as room:
            room.hands_started(1, launcher)
            refused = reset()
            assert refused.returncode == 1 and "stop it first" in refused.stderr
            assert (tmp_path / ".run" / "redis").exists()
            assert room.demo() is not None
            launcher.stop_and_check(signal.SIGINT, whole_group=True)
        done = reset()
        assert done.returncode == 0, done.stdout + done.stderr
        assert not (tmp_path / ".run" / "redis").exists()
        assert not (tmp_path / ".run" / "logs").exists()
        assert (tmp_path / ".run" / "keys" / "issuer.pem").exists()


class TestRedisRestart:
    def test_a_restarted_server_loads_every_transaction_of_its_aof(self, tmp_path: Path
                                                                    ) -> None:
        """``make run``'s Redis (``default`` user off) restarted on its data directory has
        what was written in transactions (as every Lua append is logged): Redis 7 loads an
        AOF as ``default`` and refused them all while that user had no permissions."""
        import redis

        from studtools.redis_server import RedisServer

        passwords = {"table": "pw-table"}
        with RedisServer(data_dir=tmp_path / "redis", passwords=passwords) as server:
            client = redis.Redis.from_url(server.url_for("table"))
            with client.pipeline(transaction=True) as pipe:
                pipe.xadd("stud:table:{t}:events", {"e": "1"}, id="0-1")
                pipe.set("stud:table:{t}:version", 1)
                pipe.execute()
            client.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1,
                        "stud:table:{t}:lua", "x")
            client.close()
        with RedisServer(data_dir=tmp_path / "redis", passwords=passwords) as server:
            admin = redis.Redis.from_url(server.url)
            try:
                assert admin.xlen("stud:table:{t}:events") == 1
                assert admin.get("stud:table:{t}:version") == b"1"
                assert admin.get("stud:table:{t}:lua") == b"x"
            finally:
                admin.close()
