"""``make archive-chaos``: the archiver under faults (issue 31). Redis (AOF, ``appendfsync
always``), PostgreSQL (fsync on), the dealer, the wallet, three table replicas and two archivers
at once (``python -m archiver``: the per-table advisory lock, the segment's key and the trim's
compare-and-set are their fence) run as separate processes while the bots play at several
tables. The archiver's hot window is small (``STUD_HOT_HANDS=3``), the tables snapshot every
second hand (``TABLE_SNAPSHOT_EVERY=2``) and the archiver runs every half second, so copies and
trims happen all the time. At random points one process is killed with SIGKILL and started
again, in turn an archiver, PostgreSQL (the whole server), Redis and a table replica.

While the bots play, every half second each table's trimmed count is read from Redis and then
the greatest ``last_sequence`` of ``history.segments`` from PostgreSQL (as its admin): what was
trimmed must never exceed what PostgreSQL holds. Afterwards, the bots stopped and the archivers
caught up (each table's version equal to what PostgreSQL holds, within a deadline), each a
comparison that can come out false:

- every event ever appended (sequences ``1..version`` of every table) is in Redis's stream or in
  ``history.events``; byte-identical where both hold it; none missing; none twice in
  PostgreSQL (rows per ``(table_id, sequence)`` counted: the events' primary key also holds
  the partition's month, so the database alone would not refuse a second copy); Redis holds
  exactly ``trimmed+1..version``;
- each table's hash chain verifies (:func:`studkit.chain.verify_chain` over PostgreSQL's events
  followed by Redis's, from GENESIS, ending at the chain's recorded head);
- nothing was trimmed before it was durable: no sample saw ``trimmed`` above PostgreSQL's
  watermark, and at the end every trimmed sequence is in PostgreSQL;
- the wallet's ledger sums to zero (deposits == balances + escrows + house) and no hand was
  settled twice (as ``make chaos`` checks them); the archivers also move the wallet's ledger
  (``WALLET_HOT_TRANSACTIONS=5``, the wallet reading its statements from both stores): every
  transaction both stores hold is the same in each, their union sums to zero and to the
  balances per account (one trimmed before it was durable would be missing), no hand is
  settled twice in it, and some of it left Redis;
- ``stud replay verify --all`` reading both stores (PostgreSQL as the auditor role,
  ``STUD_AUDITOR_DSN``, which also reads the dealer's archived records) verified every hand
  played in full;
- at least ``--hands`` hands and ``--kills`` kills happened, every table had events trimmed
  from Redis (a run where nothing moved fails), no process exited on its own, no bot error.

Every wait has a deadline. Last line: ``hands=… kills=… events_lost=0 events_duplicated=0
chain_ok=yes trimmed_before_durable=0 unverified=0``; the exit status is 1 if any check failed.
docs/reliability.md has the figures of a run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import operator
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
import psycopg
import redis.asyncio as aredis
import redis.exceptions

from campaigns.bot import OPERATOR, Tally
from campaigns.chaos import duplicate_settlements
from campaigns.checks import ReplayCheck, check_replay, enough_play, gapless
from campaigns.room import CampaignRoom, wait_until
from campaigns.router import Router
from stud.v1 import dealer_pb2_grpc, wallet_pb2_grpc
from stud.v1 import table_pb2 as pb
from studkit import keys as studkeys
from studkit.auth import Principal, Role, TokenBook
from studkit.chain import GENESIS, verify_chain
from studkit.commandwindow import new_id
from studkit.store import trimmed_key
from studtest.processes import RoomProcesses, ServiceProcess, restartable_port
from studtools.devkeys import DevKeys
from studtools.pg_server import PostgresServer
from studtools.redis_server import RedisServer
from wallet.store import BALANCES, LEDGER

TARGETS: Final = ("archiver", "postgres", "redis", "table")
"""Killed in this order first, then at random."""
HOT_HANDS: Final = 3
WALLET_HOT: Final = 5
"""The wallet's ledger kept in Redis (``WALLET_HOT_TRANSACTIONS``): it is trimmed all the time."""
SNAPSHOT_EVERY: Final = 2
INTERVAL_S: Final = 0.5
SAMPLE_EVERY_S: Final = 0.5
HANDS_PER_KILL_S: Final = 120.0
"""Longest wait for the hands between two kills."""
CATCH_UP_S: Final = 120.0
"""Longest wait, after play, for every table's version to be in PostgreSQL."""
VERIFY_TIMEOUT_S: Final = 600
QUERY_TIMEOUT_S: Final = 10.0


@dataclass
class Outcome:
    hands: int = 0
    kills: int = 0
    killed: Counter[str] = field(default_factory=Counter)
    events: int = 0
    """Sequences 1..version summed over the tables."""
    events_lost: int = 0
    events_duplicated: int = 0
    events_differ: int = 0
    """Sequences both stores hold with different bytes."""
    chain_ok: bool = False
    trimmed_before_durable: int = 0
    samples: int = 0
    """Samples of trimmed against PostgreSQL's watermark taken (all tables each)."""
    samples_skipped: int = 0
    """Samples not taken because Redis or PostgreSQL was down."""
    trimmed: dict[str, int] = field(default_factory=dict)
    archived: dict[str, int] = field(default_factory=dict)
    chips_lost: int = 0
    duplicate_settlements: int = 0
    ledger_problems: list[str] = field(default_factory=list)
    """The wallet's ledger in PostgreSQL and Redis against its balances (:func:`check_ledger`)."""
    ledger_trimmed: int = 0
    """The wallet's ledger entries no longer in Redis (archived)."""
    break_even: int = 0
    """Settlements with no posting (a break-even or voided hand) that left Redis: each hand's
    must still be found by the replay (migration 0012)."""
    unverified: int = 0
    exited: list[str] = field(default_factory=list)
    """Processes found exited without being killed."""
    archiver_lines: dict[str, Counter[str]] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)
    replay: ReplayCheck = field(default_factory=ReplayCheck)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"hands={self.hands} kills={self.kills} events_lost={self.events_lost} "
                f"events_duplicated={self.events_duplicated} "
                f"chain_ok={'yes' if self.chain_ok else 'no'} "
                f"trimmed_before_durable={self.trimmed_before_durable} "
                f"unverified={self.unverified}")

    def judge(self, hands: int, kills: int) -> None:
        """Add a problem for each check that failed (``problems`` may hold some already)."""
        if self.hands < hands:
            self.problems.append(f"{self.hands} hands played, {hands} wanted")
        if self.kills < kills:
            self.problems.append(f"{self.kills} kills, {kills} wanted")
        if self.events_lost:
            self.problems.append(f"{self.events_lost} events in neither Redis nor PostgreSQL")
        if self.events_duplicated:
            self.problems.append(f"{self.events_duplicated} events archived more than once")
        if self.events_differ:
            self.problems.append(f"{self.events_differ} events differ between Redis and "
                                 "PostgreSQL")
        if not self.chain_ok:
            self.problems.append("a table's chain does not verify")
        if self.trimmed_before_durable:
            self.problems.append(f"{self.trimmed_before_durable} times trimmed before durable")
        if self.samples < 1:
            self.problems.append("no sample of trimmed against PostgreSQL was taken")
        unmoved = sorted(t for t, n in self.trimmed.items() if n < 1) or (
            [] if self.trimmed else ["(no table)"])
        if unmoved:
            self.problems.append(f"nothing trimmed from Redis at {unmoved}")
        if self.chips_lost:
            self.problems.append(f"{self.chips_lost} chips lost")
        if self.duplicate_settlements:
            self.problems.append(f"{self.duplicate_settlements} hands settled twice")
        self.problems.extend(self.ledger_problems)
        if self.ledger_trimmed < 1:
            self.problems.append("nothing trimmed from the wallet's ledger")
        if self.unverified:
            self.problems.append(f"{self.unverified} of {self.hands} hands not verified in "
                                 "full")
        self.problems.extend(self.replay.problems[:20])
        self.problems.extend(f"{name} exited without being killed" for name in self.exited)
        self.problems.extend(enough_play(self.tally.actions, self.hands))
        if self.tally.errors:
            self.problems.append(f"{len(self.tally.errors)} bot errors, first: "
                                 f"{self.tally.errors[0]}")


@dataclass
class ArchiveRoom:
    """The campaign room, PostgreSQL and the archivers."""

    room: CampaignRoom
    pg: PostgresServer
    archivers: list[ServiceProcess]

    @property
    def processes(self) -> list[ServiceProcess]:
        return [*self.room.procs.all, *self.archivers]


def archiver_process(index: int, redis: RedisServer, pg: PostgresServer, keys: DevKeys,
                     dealer: ServiceProcess | None, log_dir: Path) -> ServiceProcess:
    """``python -m archiver`` started as ``make run`` starts it (studtools.devrun), with the
    campaign's small hot window and short interval (``dealer`` None: the dealer's records are
    neither copied nor released)."""
    return ServiceProcess("archiver", {
        "METRICS_PORT": "0", "LOG_LEVEL": "INFO", **keys.env("archiver"),
        "REDIS_URL": redis.url_for("archiver"), "STUD_HISTORY_DSN": pg.dsn("archiver"),
        "ARCHIVER_DEALER_TARGET": dealer.target if dealer is not None else "",
        "STUD_HOT_HANDS": str(HOT_HANDS), "ARCHIVER_INTERVAL_S": str(INTERVAL_S),
        "WALLET_HOT_TRANSACTIONS": str(WALLET_HOT),
        "ARCHIVER_SHUTDOWN_GRACE": "1"},
        log_dir / f"archiver{index}.log")


@contextlib.asynccontextmanager
async def archive_room(work: Path, replicas: int = 3, archivers: int = 2,
                       dealer_records: bool = True) -> AsyncIterator[ArchiveRoom]:
    """The room under ``work`` with PostgreSQL (migrated) and ``archivers`` archivers (which
    copy and release the dealer's records unless ``dealer_records`` is false), started, and
    stopped on exit whatever happened."""
    keys = DevKeys.generate()
    passwords = {n: uuid.uuid4().hex for n in ("table", "dealer", "wallet", "auditor",
                                                  "tournament", "archiver")}
    redis = RedisServer(data_dir=work / "redis", passwords=passwords, port=restartable_port())
    pg = PostgresServer(port=restartable_port(), new_session=True)
    redis.start()
    procs: RoomProcesses | None = None
    archiving: list[ServiceProcess] = []
    admin = aredis.Redis.from_url(redis.url, socket_timeout=5, socket_connect_timeout=5)
    router: Router | None = None
    try:
        await asyncio.to_thread(pg.start)
        await asyncio.to_thread(pg.prepare)
        procs = RoomProcesses(redis.url_for, keys, work / "logs", extra_env={
            "WALLET_HISTORY_DSN": pg.dsn("support")}, table_env={
            "TABLE_LEASE_MS": "1500", "TABLE_SNAPSHOT_EVERY": str(SNAPSHOT_EVERY),
            "TABLE_HISTORY_DSN": pg.dsn("support")}, replicas=replicas)
        archiving = [archiver_process(i, redis, pg, keys,
                                      procs.dealer if dealer_records else None, work / "logs")
                     for i in range(archivers)]
        await procs.start()
        for proc in archiving:
            proc.start()
        for proc in archiving:
            await proc.wait_serving()
        tokens = TokenBook(keys)
        router = Router([p.target for p in procs.tables], tokens)
        async with grpc.aio.insecure_channel(procs.wallet.target) as wallet_channel, \
                grpc.aio.insecure_channel(procs.dealer.target) as dealer_channel:
            room = CampaignRoom(
                procs=procs, redis=redis, keys=keys, tokens=tokens, router=router,
                wallet=wallet_pb2_grpc.WalletServiceStub(  # type: ignore[no-untyped-call]
                    wallet_channel),
                dealer=dealer_pb2_grpc.DealerServiceStub(  # type: ignore[no-untyped-call]
                    dealer_channel),
                admin=admin)
            yield ArchiveRoom(room, pg, archiving)
    finally:
        if router is not None:
            await router.close()
        await admin.aclose()
        for proc in archiving:
            proc.terminate()
        if procs is not None:
            procs.stop()
        redis.stop()
        await asyncio.to_thread(pg.stop)


# --- faults -------------------------------------------------------------------------------------

def kill_postgres(pg: PostgresServer) -> None:
    """SIGKILL the whole server (the postmaster and its backends: its process group, as a
    container's or a machine's crash would), keeping the data."""
    process = pg.process
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
    pg.process = None


def start_postgres(pg: PostgresServer, attempts: int = 10) -> None:
    """Start the server again on its data and port (the port may take a moment to be free
    after the crash)."""
    for attempt in range(attempts):
        try:
            pg.start(timeout=60)
            return
        except RuntimeError:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)


async def kill_and_restart(target: str, rng: random.Random, ar: ArchiveRoom) -> None:
    """SIGKILL one process and start it again (same port, same data)."""
    room = ar.room
    if target == "redis":
        room.redis.kill()
        await asyncio.sleep(0.5)
        room.redis.start()
        return
    if target == "postgres":
        await asyncio.to_thread(kill_postgres, ar.pg)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(start_postgres, ar.pg)
        return
    proc = rng.choice(ar.archivers if target == "archiver" else room.tables)
    await asyncio.to_thread(proc.kill)
    await asyncio.sleep(0.3)
    proc.start()
    await proc.wait_serving()


async def restart_exited(ar: ArchiveRoom, out: Outcome) -> None:
    """A process that exited on its own is a failure; start it again so the run goes on."""
    for proc in ar.processes:
        if proc.proc is not None and not proc.running:
            out.exited.append(f"{proc.log_path.stem} (exit {proc.proc.returncode})")
            proc.start()
            await proc.wait_serving()


# --- what the stores hold -----------------------------------------------------------------------

async def _pg_connect(dsn: str) -> psycopg.AsyncConnection[Any]:
    return await asyncio.wait_for(
        psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=5),
        QUERY_TIMEOUT_S)


async def watermarks(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
    """Each table's greatest archived ``last_sequence`` (history.segments)."""
    cur = await asyncio.wait_for(conn.execute(
        "SELECT table_id, max(last_sequence) FROM history.segments GROUP BY table_id"),
        QUERY_TIMEOUT_S)
    return {str(t): int(n) for t, n in await cur.fetchall()}


async def trimmed_counts(admin: aredis.Redis, table_ids: Sequence[str]) -> dict[str, int]:
    return {t: int(await admin.get(trimmed_key(t)) or 0) for t in table_ids}


def trimmed_beyond(trimmed: dict[str, int], archived: dict[str, int]) -> list[str]:
    """The tables whose trimmed count (read first) exceeds PostgreSQL's watermark (read
    after it).

    >>> trimmed_beyond({"a": 5, "b": 0}, {"a": 4})
    ['a: trimmed 5, PostgreSQL holds 4']
    """
    return [f"{t}: trimmed {n}, PostgreSQL holds {archived.get(t, 0)}"
            for t, n in sorted(trimmed.items()) if n > archived.get(t, 0)]


async def sample(admin_url: str, pg_dsn: str, table_ids: Sequence[str], out: Outcome,
                 stop: asyncio.Event) -> None:
    """Every :data:`SAMPLE_EVERY_S` until ``stop``: each table's trimmed count from Redis,
    then PostgreSQL's watermark; a trim past it is a violation. A sample is skipped while
    either store is down."""
    admin = aredis.Redis.from_url(admin_url, socket_timeout=2, socket_connect_timeout=2)
    conn: psycopg.AsyncConnection[Any] | None = None
    try:
        while not stop.is_set():
            try:
                trimmed = await asyncio.wait_for(trimmed_counts(admin, table_ids),
                                                 QUERY_TIMEOUT_S)
                if conn is None or conn.closed:
                    conn = await _pg_connect(pg_dsn)
                archived = await watermarks(conn)
            except (redis.exceptions.RedisError, psycopg.Error, OSError, TimeoutError):
                out.samples_skipped += 1
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                    conn = None
            else:
                out.samples += 1
                for violation in trimmed_beyond(trimmed, archived):
                    out.trimmed_before_durable += 1
                    out.problems.append(f"trimmed before durable: {violation}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)
    finally:
        await admin.aclose()
        if conn is not None:
            await conn.close()


async def versions(admin: aredis.Redis, table_ids: Sequence[str]) -> dict[str, int]:
    return {t: int(await admin.get(studkeys.table_version(t)) or 0) for t in table_ids}


async def catch_up(ar: ArchiveRoom, table_ids: Sequence[str]) -> None:
    """Wait until every table's version is in PostgreSQL (the archivers' lag is 0)."""
    async def lag() -> dict[str, int]:
        conn = await _pg_connect(ar.pg.dsn("admin"))
        try:
            archived = await watermarks(conn)
        finally:
            await conn.close()
        return {t: v - archived.get(t, 0)
                for t, v in (await versions(ar.room.admin, table_ids)).items()}

    await wait_until(lag, lambda left: not any(left.values()), CATCH_UP_S,
                     "the archivers did not catch up (events not in PostgreSQL per table)",
                     every_s=0.5)


async def stream_bytes(admin: aredis.Redis, table_id: str) -> dict[int, bytes]:
    """Sequence -> the stored bytes of every event Redis's stream holds."""
    found: dict[int, bytes] = {}
    start = "-"
    while True:
        entries: list[Any] = list(await admin.xrange(studkeys.table_stream(table_id),
                                                     min=start, count=1000) or [])
        for entry_id, fields in entries:
            found[int(entry_id.decode().split("-")[1])] = bytes(fields[b"envelope"])
        if len(entries) < 1000:
            return found
        start = "(" + entries[-1][0].decode()


@dataclass
class TableStores:
    """One table as both stores hold it at the end."""

    table_id: str
    version: int
    trimmed: int
    head: bytes | None
    redis: dict[int, bytes]
    pg: list[tuple[int, bytes]]
    """(sequence, bytes) of every row of history.events, in sequence order."""


def compare(stores: TableStores) -> tuple[int, int, int, int, list[str]]:
    """(lost, duplicated, differ, trimmed but not in PostgreSQL, problems) of one table.

    >>> compare(TableStores("t", 3, 1, None, {2: b"b", 3: b"c"}, [(1, b"a"), (2, b"x"),
    ...         (2, b"x")]))[:4]
    (0, 1, 1, 0)
    """
    problems = []
    per = Counter(s for s, _ in stores.pg)
    archived = dict(stores.pg)
    duplicated = sum(n - 1 for n in per.values() if n > 1)
    wanted = range(1, stores.version + 1)
    lost = [s for s in wanted if s not in stores.redis and s not in archived]
    differ = [s for s in stores.redis.keys() & archived.keys()
              if stores.redis[s] != archived[s]]
    early = [s for s in range(1, stores.trimmed + 1) if s not in archived]
    where = f"table {stores.table_id}"
    if lost:
        problems.append(f"{where}: events {lost[:10]} in neither store")
    if duplicated:
        problems.append(f"{where}: sequences archived twice: "
                        f"{sorted(s for s, n in per.items() if n > 1)[:10]}")
    if differ:
        problems.append(f"{where}: events {sorted(differ)[:10]} differ between the stores")
    if early:
        problems.append(f"{where}: trimmed {stores.trimmed} but PostgreSQL lacks "
                        f"{early[:10]}")
    hot = sorted(stores.redis)
    gap = gapless(hot, stores.trimmed + 1)
    if gap is not None or (hot and hot[-1] != stores.version):
        problems.append(f"{where}: Redis holds {hot[:1]}..{hot[-1:]}, not "
                        f"{stores.trimmed + 1}..{stores.version} ({gap})")
    beyond = sorted(s for s in [*per, *hot] if s > stores.version or s < 1)
    if beyond:
        problems.append(f"{where}: events {beyond[:10]} outside 1..{stores.version}")
    return len(lost), duplicated, len(differ), len(early), problems


def chain_of(stores: TableStores) -> str | None:
    """None if PostgreSQL's events followed by Redis's (each sequence once) form the chain
    from GENESIS to the recorded head; else the first break.

    >>> from stud.v1.envelope_pb2 import EventEnvelope
    >>> from studkit.chain import digest
    >>> a = EventEnvelope(sequence=1, prev_digest=GENESIS).SerializeToString()
    >>> b = EventEnvelope(sequence=2, prev_digest=digest(a)).SerializeToString()
    >>> chain_of(TableStores("t", 2, 1, digest(b), {2: b}, [(1, a)])) is None
    True
    >>> chain_of(TableStores("t", 2, 1, digest(b), {2: b}, [(1, a[:-1] + b"x")]))[:33]
    'table t: chain broken at event #1'
    """
    archived = dict(stores.pg)
    last = max(archived, default=0)
    ordered = [archived[s] for s in sorted(archived)]
    ordered += [stores.redis[s] for s in sorted(stores.redis) if s > last]
    broken = verify_chain(stores.table_id, ordered, GENESIS, head=stores.head)
    return None if broken is None else broken.line()


async def read_stores(admin: aredis.Redis, conn: psycopg.AsyncConnection[Any],
                      table_id: str) -> TableStores:
    """Redis first (the stream with its version and trimmed count), then PostgreSQL."""
    version = int(await admin.get(studkeys.table_version(table_id)) or 0)
    trimmed = int(await admin.get(trimmed_key(table_id)) or 0)
    head = await admin.hget(studkeys.table_key(table_id, "chain"), "head")
    hot = await stream_bytes(admin, table_id)
    cur = await conn.execute("SELECT sequence, envelope FROM history.events WHERE "
                             "table_id = %s ORDER BY sequence", (table_id,))
    rows = [(int(s), bytes(b)) for s, b in await cur.fetchall()]
    return TableStores(table_id, version, trimmed, head if isinstance(head, bytes) else None,
                       hot, rows)


async def check_stores(ar: ArchiveRoom, table_ids: Sequence[str], out: Outcome) -> None:
    conn = await _pg_connect(ar.pg.dsn("admin"))
    out.chain_ok = True
    try:
        for table_id in table_ids:
            stores = await read_stores(ar.room.admin, conn, table_id)
            lost, duplicated, differ, early, problems = compare(stores)
            out.events += stores.version
            out.events_lost += lost
            out.events_duplicated += duplicated
            out.events_differ += differ
            out.trimmed_before_durable += early
            out.trimmed[table_id] = stores.trimmed
            out.archived[table_id] = max((s for s, _ in stores.pg), default=0)
            out.problems.extend(problems)
            broken = chain_of(stores)
            if broken is not None:
                out.chain_ok = False
                out.problems.append(broken)
    finally:
        await conn.close()


def verify_all(ar: ArchiveRoom, work: Path) -> dict[str, Any]:
    """``stud replay verify --all --json -v`` over both stores as an auditor (PostgreSQL's
    auditor role, which reads the public history and the dealer's archived records; Redis's
    auditor user; the dealer with an auditor's token); its JSON report (a report of one
    failure when it gives none)."""
    room = ar.room
    room.keys.write(work / "keys")
    env = {**os.environ, "STUD_REPLAY_REDIS_URL": room.redis.url_for("auditor"),
           "STUD_DEALER_TARGET": room.procs.dealer.target,
           "STUD_ISSUER_KEY": str(work / "keys" / "issuer.pem"),
           "STUD_AUDITOR_DSN": ar.pg.dsn("auditor"),
           # Not make run's .run/env (a DSN of its file would be read before ours).
           "STUD_RUN_DIR": str(work / "no-run-dir")}
    env.pop("STUD_SUPPORT_DSN", None)
    try:
        run = subprocess.run([sys.executable, "-m", "studtools.cli", "replay", "verify",
                              "--all", "--json", "-v"], env=env, capture_output=True,
                             text=True, timeout=VERIFY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"notes": [f"stud replay verify gave no answer in {VERIFY_TIMEOUT_S}s"]}
    try:
        report: dict[str, Any] = json.loads(run.stdout)
    except json.JSONDecodeError:
        return {"notes": [f"stud replay verify exited {run.returncode} without a report: "
                          f"{(run.stdout + run.stderr)[-2000:]}"]}
    print(f"replay verify: hands={report.get('hands')} verified={report.get('verified')} "
          f"failed={report.get('failed')}", flush=True)
    for failure in (report.get("failures") or [])[:5]:
        print(f"replay FAILED {failure}", flush=True)
    kinds = Counter(re.sub(r"\d+", "N", str(problem.get("what", problem)))
                    for failure in report.get("failures") or []
                    for problem in failure.get("problems") or [])
    for kind, n in kinds.most_common(10):
        print(f"replay problems x{n}: {kind}", flush=True)
    return report


async def failure_evidence(ar: ArchiveRoom, failures: Sequence[dict[str, Any]],
                           limit: int = 3) -> list[str]:
    """What both stores hold of each failed hand (the first ``limit``), read while they run:
    the wallet's ledger entries naming the hand in Redis and in PostgreSQL (any kind), the
    ledger's archived segments around them, and the hand's last events in each store."""
    admin = aredis.Redis.from_url(ar.room.redis.url, decode_responses=True)
    lines: list[str] = []
    try:
        async with await _pg_connect(ar.pg.dsn("admin")) as conn:
            for failure in failures[:limit]:
                table, hand = str(failure.get("table")), f"h{failure.get('hand')}"
                where = f"evidence table {table} hand {failure.get('hand')}"
                hot = []
                start = "-"
                while True:
                    batch: list[Any] = list(await admin.xrange(LEDGER, min=start,
                                                               count=1000) or [])
                    for entry_id, fields in batch:
                        plan = json.loads(fields["tx"])
                        if plan.get("table_id") == table and plan.get("hand_id") == hand:
                            hot.append(f"{entry_id} {plan.get('kind')} {plan['postings']}")
                    if len(batch) < 1000:
                        break
                    start = f"({batch[-1][0]}"
                first = await admin.xrange(LEDGER, count=1)
                head = str(first[0][0]) if first else "none"
                cur = await conn.execute(
                    "SELECT transaction_id, kind, account, amount FROM ledger.postings WHERE "
                    "table_id = %s AND hand_id = %s ORDER BY transaction_id, posting",
                    (table, hand))
                cold = [f"{tx} {kind} {account} {amount}"
                        for tx, kind, account, amount in await cur.fetchall()]
                cur = await conn.execute(  # a break-even hand's settlement: its row only
                    "SELECT transaction_id, kind, postings FROM ledger.transactions WHERE "
                    "table_id = %s AND hand_id = %s ORDER BY transaction_id", (table, hand))
                cold += [f"{tx} {kind} ({postings} postings: ledger.transactions)"
                         for tx, kind, postings in await cur.fetchall()]
                cur = await conn.execute(
                    "SELECT first_id, last_id, transactions FROM ledger.segments "
                    "ORDER BY last_ms, last_seq")
                segments = [f"{a}..{b}({n})" for a, b, n in await cur.fetchall()]
                lines.append(f"{where}: ledger in Redis {hot or 'none'} (its first entry "
                             f"{head}); in PostgreSQL "
                             f"{cold or 'none'}; ledger segments {segments[:8]}"
                             f"{' ...' if len(segments) > 8 else ''}")
                cur = await conn.execute(
                    "SELECT sequence, type FROM history.events WHERE table_id = %s AND "
                    "hand = %s ORDER BY sequence", (table, failure.get("hand")))
                events = [f"#{n} {t}" for n, t in await cur.fetchall()]
                cur = await conn.execute(
                    "SELECT count(DISTINCT hand_id) FROM (SELECT hand_id FROM ledger.postings "
                    "WHERE table_id = %s AND kind = 'settlement' UNION SELECT hand_id FROM "
                    "ledger.transactions WHERE table_id = %s AND kind = 'settlement') s",
                    (table, table))
                row = await cur.fetchone()
                lines.append(f"{where}: its events in PostgreSQL {len(events)}, the last "
                             f"{events[-6:]}; the table's hands settled in PostgreSQL "
                             f"{row[0] if row else '?'}")
    except Exception as exc:  # a diagnostic must not end the report
        lines.append(f"evidence not read: {type(exc).__name__}: {exc}")
    finally:
        await admin.aclose()
    for line in lines:
        print(line, flush=True)
    return lines


ARCHIVER_EVENTS: Final = ("archived", "trimmed", "archive_failed", "archive_round_failed")


def archiver_lines(proc: ServiceProcess) -> Counter[str]:
    """How many of each of :data:`ARCHIVER_EVENTS` an archiver's log has."""
    text = proc.logs()
    return Counter({name: text.count(f'"{name}"') for name in ARCHIVER_EVENTS})


async def finish(room: CampaignRoom, table_ids: Sequence[str], limit_s: float = 90.0
                 ) -> None:
    """Sit everyone out and let the playing bots finish the hands in progress (raises past
    ``limit_s``). Unlike :meth:`CampaignRoom.finish`, no new bot: one would fold the table
    from its first event, which has left Redis (``WatchTable`` refuses it: ``archived``)."""
    for table_id in table_ids:
        view = await room.router.view(table_id, OPERATOR)
        for seat in view.seats:
            try:
                await room.router.call(table_id, "SitOut", pb.SitOutRequest(
                    table_id=table_id, seat=seat.seat, command_id=new_id(f"end-{seat.player_id}")),
                    Principal(Role.PLAYER, seat.player_id))
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                    raise  # sitting out already is fine; anything else is not
    await wait_until(lambda: room.views(table_ids),
                     lambda vs: all(not v.HasField("hand")
                                    or v.hand.phase == pb.HAND_PHASE_COMPLETE
                                    for v in vs.values()),
                     limit_s, "hands still in progress")


async def check_ledger(ar: ArchiveRoom, out: Outcome) -> None:
    """The wallet's ledger across both stores (the archivers stopped): every transaction
    PostgreSQL and Redis both hold has the same postings in each; the union sums to zero and
    to the balances projection per account (a transaction trimmed before it was durable would
    be missing from it); no hand settled twice in it (``duplicate_settlements`` reads Redis
    alone); ``ledger_trimmed``: the transactions only PostgreSQL holds."""
    admin = aredis.Redis.from_url(ar.room.redis.url, decode_responses=True)
    try:
        hot: dict[str, tuple[tuple[str, int], ...]] = {}
        settled: dict[str, tuple[str, str]] = {}
        start = "-"
        while True:
            batch: list[Any] = list(await admin.xrange(LEDGER, min=start, count=1000) or [])
            for entry_id, fields in batch:
                plan = json.loads(fields["tx"])
                hot[entry_id] = tuple((str(a), int(v)) for a, v in plan["postings"])
                if plan.get("kind") == "settlement":
                    settled[entry_id] = (plan["table_id"], plan["hand_id"])
            if len(batch) < 1000:
                break
            start = f"({batch[-1][0]}"
        balances = {k: int(v) for k, v in (await admin.hgetall(BALANCES)).items() if int(v)}
    finally:
        await admin.aclose()
    cold: dict[str, list[tuple[str, int]]] = {}
    async with await _pg_connect(ar.pg.dsn("admin")) as conn:
        cur = await conn.execute("SELECT transaction_id, account, amount, kind, table_id, "
                                 "hand_id FROM ledger.postings ORDER BY transaction_id, posting")
        for tx, account, amount, kind, table, hand in await cur.fetchall():
            cold.setdefault(tx, []).append((account, int(amount)))
            if kind == "settlement":
                settled[tx] = (table, hand)
        cur = await conn.execute("SELECT transaction_id, table_id, hand_id FROM "
                                 "ledger.transactions WHERE kind = 'settlement' AND "
                                 "postings = 0")
        for tx, table, hand in await cur.fetchall():
            cold.setdefault(tx, [])  # compared with Redis's postings below where both hold it
            if tx not in hot:
                out.break_even += 1
                settled[tx] = (table, hand)
    differ = [tx for tx in hot.keys() & cold.keys() if tuple(cold[tx]) != hot[tx]]
    if differ:
        out.ledger_problems.append(f"{len(differ)} ledger transactions differ between Redis "
                                   f"and PostgreSQL, first {sorted(differ)[0]}")
    union = {**{tx: tuple(p) for tx, p in cold.items()}, **hot}
    sums: Counter[str] = Counter()
    for postings in union.values():
        for account, amount in postings:
            sums[account] += amount
    if sum(sums.values()) != 0:
        out.ledger_problems.append(f"the ledger in PostgreSQL and Redis sums to "
                                   f"{sum(sums.values())}, not zero")
    if {k: v for k, v in sums.items() if v} != balances:
        out.ledger_problems.append("the ledger in PostgreSQL and Redis does not sum to the "
                                   "balances (a transaction lost, or counted twice)")
    twice = Counter(settled.values())
    if any(n > 1 for n in twice.values()):
        out.ledger_problems.append(f"{sum(1 for n in twice.values() if n > 1)} hands settled "
                                   "twice in the ledger's two stores")
    out.ledger_trimmed = len(union) - len(hot)


# --- the campaign -------------------------------------------------------------------------------

async def campaign(hands: int, kills: int, n_tables: int, seed: int, work: Path,
                   archivers: int = 2, dealer_records: bool = True) -> Outcome:
    rng = random.Random(seed)
    out = Outcome()
    async with archive_room(work, archivers=archivers, dealer_records=dealer_records) as ar:
        room = ar.room
        table_ids = [f"archive-{i}" for i in range(n_tables)]
        await room.open_tables(table_ids)
        stop = asyncio.Event()
        stop_sampling = asyncio.Event()
        bots = [asyncio.create_task(b.run(stop))
                for b in room.bots(table_ids, out.tally, rng)]
        sampler = asyncio.create_task(sample(room.redis.url, ar.pg.dsn("admin"), table_ids,
                                             out, stop_sampling))
        per_kill = max(1, hands // (kills + 1))
        try:
            try:
                for k in range(kills):
                    target = TARGETS[k] if k < len(TARGETS) else rng.choice(TARGETS)
                    due = await room.hands_started(table_ids) + per_kill
                    await wait_until(functools.partial(room.hands_started, table_ids),
                                     functools.partial(operator.le, due), HANDS_PER_KILL_S,
                                     f"fewer than {per_kill} hands before kill {k + 1}")
                    await asyncio.sleep(rng.random())  # somewhere inside a hand, a step
                    await restart_exited(ar, out)
                    await kill_and_restart(target, rng, ar)
                    out.kills += 1
                    out.killed[target] += 1
                    print(f"kill {k + 1}: {target}", flush=True)
                await wait_until(functools.partial(room.hands_started, table_ids),
                                 functools.partial(operator.le, hands),
                                 max(HANDS_PER_KILL_S, hands * 2.0),
                                 f"fewer than {hands} hands")
                await restart_exited(ar, out)
                await finish(room, table_ids)
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*bots), 60)
            await room.settled(table_ids)
            out.hands = await room.hands_started(table_ids)
            await catch_up(ar, table_ids)
        finally:
            stop_sampling.set()
            await asyncio.wait_for(sampler, 60)
        for proc in ar.archivers:  # nothing moves while the stores are compared
            proc.terminate()
        out.archiver_lines = {p.log_path.stem: archiver_lines(p) for p in ar.archivers}
        await asyncio.wait_for(check_stores(ar, table_ids, out), VERIFY_TIMEOUT_S)
        out.chips_lost = await room.chips_lost(table_ids)
        out.duplicate_settlements = await duplicate_settlements(room.redis)
        await check_ledger(ar, out)
        report = await asyncio.to_thread(verify_all, ar, work)
        out.replay = check_replay(report, out.hands)
        out.unverified = out.replay.unverified
        if report.get("failures"):
            out.replay.problems.extend(await failure_evidence(ar, report["failures"]))
    out.judge(hands, kills)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make archive-chaos", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hands", type=int, default=200)
    parser.add_argument("--kills", type=int, default=12)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--archivers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-dealer-records", action="store_true",
                        help="archivers without the dealer (no record copied, no hand "
                        "released), as a comparison")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stud-archive-chaos-") as work:
        out = asyncio.run(campaign(args.hands, args.kills, args.tables, args.seed, Path(work),
                                   args.archivers, not args.no_dealer_records))
    for problem in out.problems:
        print(f"FAILED {problem}")
    killed = " ".join(f"{t}={out.killed[t]}" for t in TARGETS)
    lines = " ".join(f"{name}:" + ",".join(f"{k}={v}" for k, v in counts.items())
                     for name, counts in out.archiver_lines.items())
    print(f"killed {killed}; archivers {lines}")
    print(f"events={out.events} trimmed={sum(out.trimmed.values())} "
          f"archived={sum(out.archived.values())} samples={out.samples} "
          f"samples_skipped={out.samples_skipped} chips_lost={out.chips_lost} "
          f"duplicate_settlements={out.duplicate_settlements} actions={out.tally.actions} "
          f"bot_errors={len(out.tally.errors)} verified_in_full={out.replay.in_full} "
          f"break_even_archived={out.break_even} "
          f"seconds={time.monotonic() - started:.0f}")
    print(out.line())
    return 0 if not out.problems else 1


if __name__ == "__main__":
    sys.exit(main())
