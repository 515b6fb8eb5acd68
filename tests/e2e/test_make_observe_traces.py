"""``make run OBSERVE=1`` and ``make observe`` together (issue 33): the traces of the demo
room end up in ``.run/traces.jsonl``, and ``stud trace list`` / ``stud trace show`` find and
print them.

``python -m studtools.devrun --observe`` (what ``make run OBSERVE=1`` runs) starts in a scratch
directory with the demo's bots playing fast; only then ``python -m studtools.observe`` (``make
observe``) starts in the same directory, so the services exported before anyone listened and
their spans appear once it does. Each on a free port (the receiver's passed to both as
``--otlp-port``: the real default, 4317, may be a person's). Then a bot's Bet is found in the
file: the table's server span with its append and the append's Redis call under it; ``stud
trace list --name Bet`` lists it and ``stud trace show TRACE_ID``, reading ``.run/traces.jsonl``
by default, prints it as a tree; every service exports under its own name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TypeVar

import pytest

from studtools import observe
from studtools.redis_server import free_port
from studtools.traces import SpanRecord, load

pytestmark = pytest.mark.e2e

FAST = {"STUD_DEMO_THINK": "0.02-0.05", "STUD_DEMO_HAND_DELAY_MS": "200"}
START_LIMIT_S = 120.0
TRACE_LIMIT_S = 90.0
BET = "/stud.v1.TableService/Bet"
T = TypeVar("T")


def eventually(probe: Callable[[], T | None], limit: float, what: str,
               alive: Callable[[], str] = lambda: "") -> T:
    """``probe()`` once it is not None; fails after ``limit`` seconds or once ``alive()``
    says why it never will."""
    deadline = time.monotonic() + limit
    while True:
        found = probe()
        if found is not None:
            return found
        dead = alive()
        assert not dead, dead
        assert time.monotonic() < deadline, f"no {what} in {limit:.0f} s"
        time.sleep(0.5)


@contextlib.contextmanager
def started(argv: list[str], cwd: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m ARGV`` in ``cwd`` (its own session, its output in ``log``), stopped with
    SIGTERM (then SIGKILL) at the end."""
    out: IO[bytes]
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", *argv], cwd=cwd, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env={**os.environ, **FAST})
        try:
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def stud(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "studtools.cli", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items()
                               if k != "STUD_TRACES_FILE"})


def a_traced_bet(spans_file: Path) -> tuple[SpanRecord, list[SpanRecord]] | None:
    """A Bet's server span whose append and the append's Redis call are in the file, with
    its trace's spans."""
    spans = load(spans_file)
    for bet in (s for s in spans if s.name == BET and s.kind == "server"):
        mine = [s for s in spans if s.trace_id == bet.trace_id]
        appends = [s for s in mine if s.name == "EventStore.append"
                   and s.parent_id == bet.span_id]
        if appends and any(s.parent_id == appends[0].span_id for s in mine):
            return bet, mine
    return None


def test_make_observe_records_the_demo_rooms_traces(tmp_path: Path) -> None:
    if observe.binary("prometheus") is None:
        message = "prometheus is not unpacked: run `make promtool` (Debian's package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    otlp_port = free_port()
    spans_file = tmp_path / ".run" / "traces.jsonl"
    run_log, observe_log = tmp_path / "run.out", tmp_path / "observe.out"
    with started(["studtools.devrun", "--observe", "--otlp-port", str(otlp_port)], tmp_path,
                 run_log) as run:
        def run_alive() -> str:
            return "" if run.poll() is None else \
                f"make run exited ({run.returncode}):\n{run_log.read_text()}"

        eventually(lambda: True if "running; Ctrl-C" in run_log.read_text() else None,
                   START_LIMIT_S, "make run", run_alive)
        assert f"every service exports to http://127.0.0.1:{otlp_port}" in run_log.read_text()
        # The services have been tracing with nobody listening: make observe comes later.
        with started(["studtools.observe", "--port", "0", "--otlp-port", str(otlp_port)],
                     tmp_path, observe_log) as watcher:
            def both_alive() -> str:
                if watcher.poll() is not None:
                    return f"make observe exited ({watcher.returncode}):\n" \
                           f"{observe_log.read_text()}"
                return run_alive()

            eventually(lambda: True if "traces     OTLP/gRPC" in observe_log.read_text()
                       else None, START_LIMIT_S, "make observe", both_alive)
            printed = observe_log.read_text()
            assert f"http://127.0.0.1:{otlp_port}, appended to .run/traces.jsonl" in printed
            bet, mine = eventually(lambda: a_traced_bet(spans_file), TRACE_LIMIT_S,
                                   "traced Bet", both_alive)
            services = eventually(
                lambda: found if {"table", "dealer", "wallet"} <= (
                    found := {s.service for s in load(spans_file)}) else None,
                TRACE_LIMIT_S, "span of each of the table, the dealer and the wallet",
                both_alive)

    # stud trace list finds the Bet (its root span, the table's server span) ...
    listed = stud(tmp_path, "trace", "list", "--name", "Bet", "--limit", "1000")
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(bet.trace_id))
    assert line.endswith(f"{BET} (table)") and f"{len(mine):3d} spans" in line
    assert all(BET in ln for ln in listed.stdout.splitlines())
    # ... and stud trace show (.run/traces.jsonl by default) prints it as a tree.
    shown = stud(tmp_path, "trace", "show", bet.trace_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"trace {bet.trace_id}: {len(mine)} spans"
    assert lines[1].startswith(f"{BET}  (table, server, ")
    assert lines[2].startswith("└─ EventStore.append  (table, internal, ")
    assert "stud.events=1" in lines[2]
    assert lines[3].startswith("   └─ ") and "(table, client, " in lines[3]
    print(f"\nmake observe's {spans_file.name}: {len(load(spans_file))} spans from "
          f"{sorted(services)}; a bot's Bet, as stud trace show prints it:\n{shown.stdout}")
