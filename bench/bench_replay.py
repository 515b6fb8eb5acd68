"""Benchmark of the replay tooling (issue: replay tooling from the live logs).

Plays random hands at tables with :class:`rules.testing.TableDriver` (seeded; 2-6 players,
default stakes so that PHH is faithful, short stacks topped up between hands), then measures:

1. ``fold``: whole hands folded from memory (each hand from the table's state before it).
2. ``stud replay check`` against PokerKit on the same hands: each hand exported as PHH, then
   parsed and replayed by us (:func:`studtools.replay_check.check_path` minus the file read)
   and loaded by PokerKit (``HandHistory.loads`` to its last state). Per hand, and the ratio.
3. ``stud replay verify --all`` from Redis: the tables written to a real ``redis-server`` as
   the table service writes them (public envelopes, one command id per command) with the
   wallet's settlement of every hand in its ledger, then :func:`studtools.replay_cli.verify`
   over every table (every command re-decided, chips, ledger; no dealer) as ``stud replay
   verify --all`` calls it: ``--jobs``'s default (:func:`studtools.replay_cli.idle_cpus`, the
   idle CPUs when the section starts, this process's own load not counted), the count
   printed; beside it one process (``--jobs 1``) and two, alternated. Also its parts:
   reading and decoding alone, and the pure verification alone.
4. A table with ``--big`` played hands (default 10,000): reading and resuming it through
   :class:`studkit.repository.TableRepository` with a snapshot at its last hand boundary
   (load + fold of the events after it), and without one (every event read and folded).
5. ``stud replay verify --all`` from PostgreSQL (issue 31): the same tables written again,
   chained as the event store seals them (each envelope's ``prev_digest``), with a snapshot
   at their end, then moved by the archiver's own step (:func:`studhistory.archiver.
   archive_table`, ``STUD_HOT_HANDS`` = 20) into a local PostgreSQL
   (:mod:`studtools.pg_server`); then :func:`studtools.replay_cli.verify` with the support
   role's URL: the archived head of each table read from PostgreSQL, its last 20 hands from
   Redis, the chain checked across both; with the jobs of 3, in one process and in two.
   Skipped (with a note) without PostgreSQL binaries.

Prints figures, the line before the last ``verify_jobs=... verify_1job_hands_s=...
verify_pg_1job_hands_s=...`` (the jobs the command chose by default, then 3 and 5 in one
process), and the last line ``fold_hands_s=... check_vs_pokerkit=... verify_hands_s=...
verify_pg_hands_s=...`` (1, the ratio of 2, 3 and 5 with ``verify_jobs`` processes; issue
18's targets 20,000, 10 and 2,000, issue 31's 2,000); asserts nothing about speed.
Run: ``make bench-replay`` or
``.venv/bin/python bench/bench_replay.py [--hands 2000] [--tables 8] [--big 10000] [--no-pg]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from rules import DECK, Event, TableConfig, fold, public_event
from rules.betting import WAGERS, ActionKind, LegalActions
from rules.commands import AddChips, Command, Fold, TimeOut
from rules.events import HandEnded, HandStarted
from rules.phh import export_phh, parse_phh, replay_phh
from rules.state import TableState
from rules.testing import StackedDeck, TableDriver, action_command
from studhistory.archiver import archive_table
from studhistory.pgarchive import PgHistory
from studkit import keys
from studkit.chain import GENESIS, digest
from studkit.mapping import event_from_envelope
from studkit.mapping.envelope import envelope_for
from studkit.repository import TableRepository, fold_stored
from studkit.store import EventStore
from studtools import replay_cli
from studtools.pg_server import PostgresNotFound, PostgresServer
from studtools.redis_server import RedisServer
from studtools.replay_cli import verify
from studtools.replay_hands import (
    expected_postings,
    split_hands,
    verify_hand_log,
    verify_hands,
)
from studtools.replay_source import RedisSource, Settings

SEED = 20261201
WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def _action(rng: random.Random, legal: LegalActions) -> Command:
    """Mostly check or call, sometimes a wager, a fold or a time-out."""
    seat = legal.seat
    roll = rng.random()
    wager = next((a for a in legal.actions if a.kind in WAGERS), None)
    if roll < 0.02:
        return TimeOut(seat=seat)
    if roll < 0.25 and wager is not None:
        return action_command(seat, wager.kind)
    if roll < 0.35 and legal.get(ActionKind.FOLD) is not None:
        return Fold(seat=seat)
    passive = next(a for a in legal.actions
                   if a.kind in (ActionKind.CHECK, ActionKind.CALL, ActionKind.BRING_IN))
    return action_command(seat, passive.kind)


class RecordingDriver(TableDriver):
    """A driver that keeps each command's events as one group (one command id)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.groups: list[tuple[Event, ...]] = []
        super().__init__(*args, **kwargs)

    def apply(self, command: Command) -> tuple[Event, ...]:
        events = super().apply(command)
        self.groups.append(events)
        return events


@dataclass
class PlayedTable:
    """One table's recording: its id, its commands' events, and each hand's state before."""

    table_id: str
    groups: list[tuple[Event, ...]]
    hands: list[tuple[TableState, tuple[Event, ...]]] = field(default_factory=list)


def play_table(rng: random.Random, table_id: str, hands: int) -> PlayedTable:
    """``hands`` random hands at one table (2-6 players, default stakes)."""
    config = TableConfig()
    big = config.big_bet
    seats = rng.sample(range(1, 9), rng.randint(2, 6))
    table = RecordingDriver(config, stacks={s: rng.randint(10 * big, 40 * big) for s in seats},
                            table_id=table_id)
    played = PlayedTable(table_id, table.groups)
    for _ in range(hands):
        for seat in seats:
            if table.state.stack(seat) < 5 * big:
                table.apply(AddChips(seat=seat, amount=30 * big))
        before, start = table.state, len(table.events)
        deck = list(DECK)
        rng.shuffle(deck)
        table.play_hand(StackedDeck(deck), act=lambda legal: _action(rng, legal),
                        mucks=lambda hands: [h.seat for h in hands if rng.random() < 0.5])
        played.hands.append((before, tuple(table.events[start:])))
    return played


def _best(repeats: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _best_cpu(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


# --- 1 and 2: from memory ------------------------------------------------------------------

def bench_fold(tables: list[PlayedTable]) -> tuple[str, float]:
    hands = [h for t in tables for h in t.hands]
    events = sum(len(e) for _, e in hands)

    def run() -> None:
        for before, hand_events in hands:
            fold(hand_events, before)

    seconds = _best(5, run)
    cpu = float("inf")
    for _ in range(5):  # in CPU time too: on a shared machine the wall clock counts waiting
        started = time.process_time()
        run()
        cpu = min(cpu, time.process_time() - started)
    return "\n".join([
        f"  fold whole hand (memory)     {len(hands) / seconds:>10,.0f} hands/s  "
        f"{1e3 * seconds / len(hands):.3f} ms/hand  {1e6 * seconds / events:.2f} us/event"
        f"  (target >= 20,000 hands/s)",
        f"    the same in CPU time       {len(hands) / cpu:>10,.0f} hands/s  "
        f"{1e3 * cpu / len(hands):.3f} ms/hand",
    ]), len(hands) / seconds


def agreeing_texts(tables: list[PlayedTable], limit: int) -> list[str]:
    """The first ``limit`` hands as PHH, those PokerKit reads to the same finishing stacks."""
    from pokerkit.notation import HandHistory

    texts = []
    for table in tables:
        for before, events in table.hands:
            seats = next(e.seats for e in events if isinstance(e, HandStarted))
            assert before.config is not None
            texts.append(export_phh(events, before.config,
                                    starting_stacks={s: before.stack(s) for s in seats}))
    texts = texts[:limit]
    agreeing = []
    for text in texts:
        try:
            with _quiet():
                pk = list(HandHistory.loads(text))[-1]
        except Exception:
            continue
        if list(pk.stacks) == list(parse_phh(text).finishing_stacks or ()):
            agreeing.append(text)
    return agreeing


def bench_check(tables: list[PlayedTable], limit: int) -> tuple[str, float]:
    """Our PHH check against PokerKit on the same files."""
    from pokerkit.notation import HandHistory

    agreeing = agreeing_texts(tables, limit)

    def ours() -> None:
        for text in agreeing:
            replay_phh(parse_phh(text))

    def pokerkit() -> None:
        with _quiet():
            for text in agreeing:
                list(HandHistory.loads(text))

    ours_s = pk_s = ours_cpu = pk_cpu = float("inf")
    for _ in range(3):  # alternated, so that a busy moment hurts both alike
        ours_s = min(ours_s, _best(1, ours))
        pk_s = min(pk_s, _best(1, pokerkit))
        # in CPU time too: on a shared machine the wall clock counts waiting for a core
        ours_cpu = min(ours_cpu, _best_cpu(ours))
        pk_cpu = min(pk_cpu, _best_cpu(pokerkit))
    n = len(agreeing)
    return "\n".join([
        f"  stud replay check (parse+replay) {1e3 * ours_s / n:>6.3f} ms/hand  "
        f"({n} hands both read to the same stacks)",
        f"  PokerKit HandHistory.loads       {1e3 * pk_s / n:>6.3f} ms/hand",
        f"  ratio PokerKit / ours            {pk_s / ours_s:>6.1f}x  (target >= 10x)",
        f"    the same in CPU time           {1e3 * ours_cpu / n:.3f} against "
        f"{1e3 * pk_cpu / n:.3f} ms/hand: {pk_cpu / ours_cpu:.1f}x",
    ]), pk_s / ours_s


class _quiet:
    def __enter__(self) -> None:
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc: Any) -> None:
        self._w.__exit__(*exc)


# --- 3 and 4: from Redis ---------------------------------------------------------------------

async def write_table(client: aioredis.Redis, table: PlayedTable, chained: bool = False
                      ) -> int:
    """Write the table's stream as the table service does (public envelopes, sequence ids
    0-n, version key, index) and the wallet's settlement of each hand; returns events.
    ``chained``: each envelope links to its predecessor's digest (the chain's head and start
    recorded), the hands marked settled and a snapshot saved at the end, as the archiver
    needs them."""
    stream = keys.table_stream(table.table_id)
    sequence = 0
    hand = 0
    link = GENESIS
    public: list[Event] = []
    pipe = client.pipeline(transaction=False)
    for number, group in enumerate(table.groups):
        command_id = f"c{number}"
        for event in group:
            if isinstance(event, HandStarted):
                hand = event.hand_number
            sequence += 1
            envelope = envelope_for(public_event(event), table_id=table.table_id,
                                    hand_number=hand, command_id=command_id, occurred_at=WHEN)
            envelope.sequence = sequence
            if chained:
                envelope.prev_digest = link
                public.append(event_from_envelope(envelope))
            raw = envelope.SerializeToString()
            link = digest(raw)
            pipe.xadd(stream, {b"envelope": raw}, id=f"0-{sequence}")
        if len(pipe) > 2000:
            await pipe.execute()
    pipe.set(keys.table_version(table.table_id), sequence)
    pipe.sadd(keys.table_index(), table.table_id)
    if chained:
        pipe.hset(keys.table_key(table.table_id, "chain"), mapping={"head": link, "since": 1})
        pipe.set(keys.legacy_table_key(table.table_id, "settled"), len(table.hands))
    for before, events in table.hands:
        after = fold(events, before)
        number = next(e.hand_number for e in events if isinstance(e, HandEnded))
        record = {"kind": "settlement", "table_id": table.table_id, "hand_id": f"h{number}",
                  "postings": [[k, v] for k, v in
                               expected_postings(table.table_id, after).items()]}
        pipe.xadd(keys.wallet_key("ledger"), {"tx": json.dumps(record)})
    await pipe.execute()
    if chained:
        await TableRepository(EventStore(client)).save_snapshot(
            table.table_id, sequence, fold(public, TableState()))
    return sequence


async def bench_verify(url: str, tables: list[PlayedTable], jobs: int
                       ) -> tuple[str, float, float]:
    client = aioredis.Redis.from_url(url)
    try:
        events = 0
        for table in tables:
            events += await write_table(client, table)
    finally:
        await client.aclose()
    hands = sum(len(t.hands) for t in tables)
    settings = Settings(redis_url=url)
    best, one, two_s = await _verify_rates(settings, hands, jobs)
    source = RedisSource.from_url(url)
    try:
        started = time.perf_counter()
        raw = [await source.raw_log(t.table_id) for t in tables]
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        logs = [await source.log(t.table_id) for t in tables]
        read_decode_s = time.perf_counter() - started
    finally:
        await source.aclose()
    assert sum(len(r) for r in raw) == sum(len(log.events) for log in logs) == events
    pure_s = lazy_s = float("inf")
    for _ in range(3):  # side by side, alternately, in CPU time (the machine may be shared):
        started = time.process_time()  # each hand folded by split_hands first, and each
        for table, log in zip(tables, logs, strict=True):  # state from the verdict before
            for hand in split_hands(table.table_id, log.events, log.start)[0]:
                verify_hand_log(hand)
        pure_s = min(pure_s, time.process_time() - started)
        started = time.process_time()
        for table, log in zip(tables, logs, strict=True):
            verify_hands(table.table_id, log.events, log.start)
        lazy_s = min(lazy_s, time.process_time() - started)
    return "\n".join([
        f"  verify --all (Redis, no dealer)  {hands / best:>10,.0f} hands/s  "
        f"({hands} hands, {events} events, {len(tables)} tables; --jobs {jobs}, the CLI's "
        "default here; target >= 2,000)",
        f"    one process (--jobs 1)         {hands / one:>10,.0f} hands/s",
        f"    --jobs 2                       {hands / two_s:>10,.0f} hands/s  "
        "(a forked worker; its start-up included)",
        f"    XRANGE alone                   {events / read_s:>10,.0f} events/s",
        f"    XRANGE + decode                {events / read_decode_s:>10,.0f} events/s  "
        f"= {hands / read_decode_s:,.0f} hands/s",
        f"    re-decide + chips (memory)     {hands / lazy_s:>10,.0f} hands/s  "
        f"(CPU time; verify_hands: each state from the verdict before)",
        f"      each hand folded first       {hands / pure_s:>10,.0f} hands/s  "
        f"(split_hands + verify_hand_log; ratio {pure_s / lazy_s:.2f})",
    ]), hands / best, hands / one


async def _verify_rates(settings: Settings, hands: int, jobs: int
                        ) -> tuple[float, float, float]:
    """Seconds of :func:`studtools.replay_cli.verify` over every table, best of 3 each, the
    three alternated: with ``jobs`` processes (as ``stud replay verify --all`` calls it), in
    one process, and in two."""
    best = {jobs: float("inf"), 1: float("inf"), 2: float("inf")}
    for _ in range(3):
        for workers in best:
            started = time.perf_counter()
            verdicts, _notes = await verify(None, None, settings, workers=workers)
            best[workers] = min(best[workers], time.perf_counter() - started)
            assert len(verdicts) == hands and all(v.ok for v in verdicts), [
                v.problems for v in verdicts if not v.ok][:3]
    return best[jobs], best[1], best[2]


async def bench_big_table(url: str, table: PlayedTable) -> str:
    client = aioredis.Redis.from_url(url)
    try:
        events = await write_table(client, table)
        store = EventStore(client)
        repo = TableRepository(store)
        before, last = table.hands[-1]
        state = fold(last, before)
        await repo.save_snapshot(table.table_id, events, state)

        async def resume() -> TableState:
            loaded = await repo.load(table.table_id)
            return fold_stored(loaded.state, loaded.after, event_from_envelope)

        best_snap = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            resumed = await resume()
            best_snap = min(best_snap, time.perf_counter() - started)
        assert resumed.hands_started == len(table.hands)
        await repo.delete_snapshot(table.table_id)
        started = time.perf_counter()
        full = await resume()
        full_s = time.perf_counter() - started
        assert full.hands_started == resumed.hands_started
        started = time.perf_counter()
        stored = await store.read(table.table_id)
        read_s = time.perf_counter() - started
    finally:
        await client.aclose()
    return "\n".join([
        f"  table of {len(table.hands):,} hands ({events:,} events): resume with snapshot "
        f"{1e3 * best_snap:>7.1f} ms  (target < 1 s)",
        f"    without snapshot (read + decode + fold all) {full_s:>7.2f} s "
        f"(EventStore.read alone {read_s:.2f} s, {len(stored) / read_s:,.0f} events/s)",
    ])


# --- 5: from PostgreSQL ------------------------------------------------------------------

HOT_HANDS = 20


async def archive_tables(url: str, dsn: str, tables: list[PlayedTable]) -> tuple[int, int]:
    """Redis emptied, the tables written chained, then the archiver's step for each (all
    settled hands copied, those older than the last :data:`HOT_HANDS` trimmed); returns
    (events, events left in Redis)."""
    client = aioredis.Redis.from_url(url)
    history = await PgHistory.connect(dsn)
    try:
        await client.flushall()
        events = kept = 0
        for table in tables:
            events += await write_table(client, table, chained=True)
            outcome = await archive_table(EventStore(client), history, table.table_id,
                                          keep_hands=HOT_HANDS)
            kept += await client.xlen(keys.table_stream(table.table_id))
            assert outcome.trimmed_to, outcome
    finally:
        await history.aclose()
        await client.aclose()
    return events, kept


async def bench_verify_pg(url: str, dsn: str, tables: list[PlayedTable],
                          events: int, kept: int, jobs: int) -> tuple[str, float, float]:
    hands = sum(len(t.hands) for t in tables)
    settings = Settings(redis_url=url, history_dsn=dsn)
    best, one, two = await _verify_rates(settings, hands, jobs)
    cpu = float("inf")
    for _ in range(3):
        cpu_started = time.process_time()
        await verify(None, None, settings, workers=1)
        cpu = min(cpu, time.process_time() - cpu_started)
    return "\n".join([
        f"  verify --all (PostgreSQL + Redis) {hands / best:>9,.0f} hands/s  ({hands} hands, "
        f"{events} events, {events - kept} of them from PostgreSQL; --jobs {jobs}, the CLI's "
        "default here; target >= 2,000)",
        f"    one process (--jobs 1)         {hands / one:>10,.0f} hands/s",
        f"      in CPU time                  {hands / cpu:>10,.0f} hands/s",
        f"    --jobs 2                       {hands / two:>10,.0f} hands/s  (this process and a "
        "forked worker; its start-up included)",
    ]), hands / best, hands / one


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=2000, help="hands for 1-3")
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--big", type=int, default=10_000, help="hands at the big table")
    parser.add_argument("--check-hands", type=int, default=300,
                        help="hands for the PokerKit comparison")
    parser.add_argument("--no-pg", action="store_true",
                        help="skip 5 (verify from PostgreSQL)")
    args = parser.parse_args(argv)
    rng = random.Random(SEED)
    started = time.perf_counter()
    per = max(1, args.hands // args.tables)
    tables = [play_table(rng, f"bench-{i}", per) for i in range(args.tables)]
    print(f"replay: {per * args.tables} random hands at {args.tables} tables (seed {SEED}), "
          f"played in {time.perf_counter() - started:.1f} s", flush=True)
    gc.collect()
    gc.freeze()  # the recordings are long-lived: keep the collector off them
    import rules.hands

    build = "pure" if str(rules.hands.__file__).endswith(".py") else "compiled (mypyc)"
    print(f"  core: {build}", flush=True)
    text, fold_rate = bench_fold(tables)
    print(text, flush=True)
    text, check_ratio = bench_check(tables, args.check_hands)
    print(text, flush=True)
    # As `stud replay verify --all` runs: --jobs's default (the idle CPUs, this process's own
    # load not counted), and the events' threshold for sharing them as it is.
    jobs = replay_cli.idle_cpus()
    with RedisServer(appendonly=False) as server:
        text, verify_rate, verify_one = asyncio.run(bench_verify(server.url, tables, jobs))
        print(text, flush=True)
        if args.big:
            started = time.perf_counter()
            big = play_table(random.Random(SEED + 1), "bench-big", args.big)
            print(f"  (the big table played in {time.perf_counter() - started:.0f} s)",
                  flush=True)
            print(asyncio.run(bench_big_table(server.url, big)), flush=True)
        pg_rate = pg_one = float("nan")
        if not args.no_pg:
            try:
                with PostgresServer(fsync=False) as pg:
                    pg.prepare()
                    events, kept = asyncio.run(archive_tables(server.url, pg.dsn("archiver"),
                                                              tables))
                    text, pg_rate, pg_one = asyncio.run(bench_verify_pg(
                        server.url, pg.dsn("support"), tables, events, kept, jobs))
                    print(text, flush=True)
            except PostgresNotFound as exc:
                print(f"  verify from PostgreSQL: skipped ({exc})", flush=True)
    print(f"  verify_jobs={jobs} verify_1job_hands_s={verify_one:.0f} "
          f"verify_pg_1job_hands_s={pg_one:.0f}")
    print(f"fold_hands_s={fold_rate:.0f} check_vs_pokerkit={check_ratio:.1f} "
          f"verify_hands_s={verify_rate:.0f} verify_pg_hands_s={pg_rate:.0f}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
