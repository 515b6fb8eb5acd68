"""``stud replay list|show|verify|export``: any hand of any table, from the live logs.

- ``list --table T``: the table's hands (time, players, pot, rake, winners).
- ``show --table T --hand N [--as-seat S | --observer | --auditor]``: the hand history,
  folded from the stream with the rules; a seat's down cards only with that player's (or an
  auditor's) token; the auditor's view merges the dealer's record and checks the commitment.
- ``verify [--table T] [--hand N] [--all]``: every command re-decided, chips conserved, the
  wallet's settlement postings equal to the folded result, and (with auditor credentials and
  the dealer) every dealt card against the committed deck, and the hash chain of the stored
  bytes (:mod:`studkit.chain`: the first broken link named with its table, event and the
  digests expected and found). Ends with ``hands=… verified=… failed=…``; exit status 1 on
  any failure, naming the hand and the first wrong event.
- ``export --table T [--hand N] --format phh|text|jsonl``.
- ``tournament --id T``: a tournament's history, verified against the tables' logs
  (:mod:`studtools.replay_tournament`).
- ``protection --player P``: a player's limit and exclusion events, in words
  (:mod:`studtools.replay_protection`).

``--json`` on each. Exit status 2 when the source cannot be read (no Redis, no such table or
hand). Connection settings: :mod:`studtools.replay_source`; see docs/replay.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_all_start_methods, get_context, get_start_method
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rules.config import TableConfig
from rules.history import render_history
from rules.phh import export_phh
from stud.v1 import room_pb2 as rpb
from studkit.chain import ChainBreak
from studkit.deckproof import audit_from_proto, verify_hand
from studkit.repository import encode
from studtools import replay_find
from studtools.replay_hands import (
    HandLog,
    HandVerdict,
    LedgerTx,
    Logged,
    Problem,
    Unfoldable,
    check_money,
    iter_verify_hands,
    merge_down_cards,
    split_hands,
    summary,
    verify_hand_log,
)
from studtools.replay_room import room_line
from studtools.replay_source import (
    AUDITOR_TOKEN_ENV,
    DEALER_ENV,
    DealerSource,
    RedisSource,
    RoomLogged,
    Settings,
    SourceError,
    TableLog,
    no_gc,
    token_role,
)

Handler = Callable[[argparse.Namespace, TextIO, Mapping[str, str]], int]
Ledger = dict[tuple[str, str], list[LedgerTx]]
"""The wallet's settlements by (table, hand id)."""
EXIT_OK, EXIT_FAILED, EXIT_SOURCE = 0, 1, 2


def _run(coro: Coroutine[Any, Any, int], err: TextIO) -> int:
    try:
        return asyncio.run(coro)
    except SourceError as exc:
        print(f"stud replay: {exc}", file=err)
        return EXIT_SOURCE
    except OSError as exc:  # Redis unreachable
        print(f"stud replay: cannot reach the source: {exc}", file=err)
        return EXIT_SOURCE
    except Unfoldable as exc:  # the log's own events do not fold (a tampered log)
        print(f"FAILED {exc}", file=err)
        return EXIT_FAILED


def _redis_errors() -> tuple[type[Exception], ...]:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    return (RedisConnectionError, RedisTimeoutError)


async def _table_hands(source: RedisSource, table_id: str, archive: Path | None = None,
                       err: TextIO | None = None) -> list[HandLog]:
    return (await _table_log(source, table_id, archive, err))[0]


async def _table_log(source: RedisSource, table_id: str, archive: Path | None = None,
                     err: TextIO | None = None) -> tuple[list[HandLog], list[RoomLogged]]:
    log = await source.log(table_id, archive)
    if log.note:
        print(f"note: {log.note}", file=err or sys.stderr)
    return split_hands(table_id, log.events, log.start)[0], log.room


def _of_hand(event: RoomLogged, number: int) -> bool:
    """Whether a room event belongs with hand ``number``'s history: its settlement, and
    the seats' money moved while it was played."""
    if isinstance(event.event, rpb.HandSettled):
        return event.event.hand_number == number
    return event.hand_number == number


def _pick(hands: Sequence[HandLog], number: int) -> HandLog:
    for hand in hands:
        if hand.number == number:
            return hand
    raise SourceError(f"no hand {number} at this table (it has {len(hands)})")


def _time(seconds: float) -> str:
    if not seconds:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _config(hand: HandLog) -> TableConfig:
    config = hand.before.config
    if config is None:
        raise SourceError(f"hand {hand.number}: the table was never opened")
    return config


def _event_json(table_id: str, hand: int, item: Logged) -> dict[str, Any]:
    return {"table": table_id, "hand": hand, "sequence": item.sequence,
            "command_id": item.command_id, "occurred_at": item.occurred_at,
            "type": type(item.event).__name__, "event": encode(item.event)}


# --- list ------------------------------------------------------------------------------------

async def _list(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    if args.player:
        return await replay_find.find(args, out, settings)
    if not args.table:
        raise SourceError("give --table T, or --player P")
    source = RedisSource.from_settings(settings)
    try:
        hands = await _table_hands(source, args.table, args.archive)
    finally:
        await source.aclose()
    since = args.since.timestamp() if args.since else float("-inf")
    until = args.until.timestamp() if args.until else float("inf")
    rows = [row for row in map(summary, hands)
            if since <= row["time"] < until and row["pot"] >= args.min_pot][-args.limit:]
    if args.json:
        json.dump({"table": args.table, "hands": rows}, out, indent=1)
        out.write("\n")
        return EXIT_OK
    print(f"{'hand':>5}  {'time (UTC)':<19}  {'pot':>8}  {'rake':>5}  players / winners",
          file=out)
    for row in rows:
        players = ", ".join(f"{s}:{name}" for s, name in row["players"].items())
        won = ", ".join(f"seat {s} +{amount}" for s, amount in row["winners"].items())
        state = "" if row["complete"] else f"  (in progress: {row['phase']})"
        if row["voided"]:
            won = "voided"
        print(f"{row['hand']:>5}  {_time(row['time']):<19}  {row['pot']:>8}  {row['rake']:>5}"
              f"  {players} / {won or '-'}{state}", file=out)
    print(f"{len(rows)} hand{'s' if len(rows) != 1 else ''} at table {args.table}", file=out)
    return EXIT_OK


# --- room ------------------------------------------------------------------------------------

async def _room(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    source = RedisSource.from_settings(settings)
    try:
        log = await source.log(args.table, args.archive)
    finally:
        await source.aclose()
    if args.json:
        json.dump({"table": args.table, "events": [
            {"sequence": e.sequence, "occurred_at": e.occurred_at, "hand": e.hand_number,
             "type": e.event.DESCRIPTOR.name, "line": room_line(e.event)} for e in log.room]},
            out, indent=1)
        out.write("\n")
        return EXIT_OK
    for e in log.room:
        print(f"{e.sequence:>7}  {_time(e.occurred_at):<19}  {room_line(e.event)}", file=out)
    print(f"{len(log.room)} room event{'s' if len(log.room) != 1 else ''} at table "
          f"{args.table}", file=out)
    return EXIT_OK


# --- show ------------------------------------------------------------------------------------

async def _show(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    source = RedisSource.from_settings(settings)
    try:
        window = None if args.archive else await source.hand_log(args.table, args.hand)
        if window is not None:  # archived: read that hand's segment only
            hands = split_hands(args.table, window.events, window.start)[0]
            room = window.room
        else:
            hands, room = await _table_log(source, args.table, args.archive)
        hand = _pick(hands, args.hand)
    finally:
        await source.aclose()
    room_lines = [room_line(e.event) for e in room if _of_hand(e, hand.number)]
    events = hand.events
    notes: list[str] = []
    commitment: dict[str, Any] | None = None
    viewer = "observer"
    if args.auditor or args.as_seat is not None:
        viewer = "auditor" if args.auditor else f"seat {args.as_seat}"
        events, notes, commitment = await _cards_for(args, settings, hand)
    history = render_history([item.event for item in events])
    if args.json:
        json.dump({"table": args.table, "hand": hand.number, "viewer": viewer,
                   "complete": hand.complete, "notes": notes, "commitment": commitment,
                   "history": history.splitlines(), "room": room_lines,
                   "events": [_event_json(args.table, hand.number, e) for e in events]},
                  out, indent=1)
        out.write("\n")
        return EXIT_OK
    print(f"Table {args.table}, hand {hand.number}, as {viewer}"
          f" (started {_time(hand.events[0].occurred_at)} UTC)", file=out)
    out.write(history if history.endswith("\n") else history + "\n")
    for line in room_lines:
        print(line, file=out)
    if commitment is not None:
        verdict = "verified" if commitment["ok"] else "FAILED: " + "; ".join(
            commitment["problems"])
        print(f"Deck commitment {commitment['commitment'][:16]}…: {verdict} "
              f"({commitment['cards_checked']} public cards, {commitment['draws']} draws)",
              file=out)
    for note in notes:
        print(f"note: {note}", file=out)
    return EXIT_OK if commitment is None or commitment["ok"] else EXIT_FAILED


async def _cards_for(args: argparse.Namespace, settings: Settings, hand: HandLog
                     ) -> tuple[list[Logged], list[str], dict[str, Any] | None]:
    """The hand's events with the down cards this viewer may see, notes, and (auditor) the
    commitment's verification."""
    token = settings.token
    auditor = settings.auditor_token if args.auditor else (
        token if token_role(token) == "auditor" else "")
    if args.auditor and not auditor:
        raise SourceError(f"the auditor's view needs {AUDITOR_TOKEN_ENV} "
                          "(or STUD_ISSUER_KEY)")
    if not settings.dealer_target:
        return hand.events, [f"down cards hidden: no dealer ({DEALER_ENV})"], None
    dealer = DealerSource(settings.dealer_target, settings.history_dsn)
    try:
        if auditor:
            record = await dealer.audit(auditor, hand.table_id, hand.number)
            if args.auditor:
                down = record.down
            else:
                down = {args.as_seat: record.down.get(args.as_seat, [])}
            checked = verify_hand(audit_from_proto(record.message),
                                  [item.event for item in hand.events])
            commitment = {"commitment": record.message.commitment, "ok": checked.ok,
                          "problems": list(checked.problems),
                          "cards_checked": checked.cards_checked, "draws": checked.draws}
            return merge_down_cards(hand.events, down), [], commitment
        if not token:
            return hand.events, [f"seat {args.as_seat}'s down cards hidden: no token "
                                 "(STUD_REPLAY_TOKEN: that player's or an auditor's)"], None
        try:
            seat, cards = await dealer.my_cards(token, hand.table_id, hand.number)
        except SourceError as exc:
            return hand.events, [f"seat {args.as_seat}'s down cards hidden: {exc}"], None
        if seat != args.as_seat:
            return hand.events, [f"seat {args.as_seat}'s down cards hidden: the token is "
                                 f"not that seat's player's"], None
        return merge_down_cards(hand.events, {seat: cards}), [], None
    finally:
        await dealer.aclose()


# --- verify ----------------------------------------------------------------------------------

def _progress(enabled: bool) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                    console=Console(file=sys.stderr), transient=False, disable=not enabled)


async def verify(table_ids: Sequence[str] | None, hand_number: int | None,
                 settings: Settings, show_progress: bool = False, workers: int = 1,
                 archive: Path | None = None) -> tuple[list[HandVerdict], list[str]]:
    """Verify the hands of the tables (None: every table); returns the verdicts (by table,
    then hand) and notes about checks that could not be made. With ``workers`` > 1 and a big
    enough history, tables are verified in that many processes (:func:`_verify_shared`)."""
    notes: list[str] = []
    cards = bool(settings.dealer_target and settings.auditor_token)
    if not cards:
        notes.append("dealt cards not checked against the decks: needs the dealer "
                     f"({DEALER_ENV}) and auditor credentials ({AUDITOR_TOKEN_ENV})")
    # The workers first, before this process opens a connection or starts a thread: forked,
    # they start while it reads the tables' sizes and the ledger (:func:`_workers`).
    pool = _workers(workers, cards) if workers > 1 and (
        not table_ids or len(table_ids) > 1) else None
    try:
        # The cyclic collector off for the whole run, not only while each log is built: on
        # again between tables, its next pass walked what the table's read had made (the
        # archive's rows come through tuples it tracks), and passes ran during each read.
        # What a table leaves is freed by reference counts; one pass runs at the end.
        with no_gc():
            return await _verify_with(pool, table_ids, hand_number, settings, show_progress,
                                      workers, archive, notes)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


async def _verify_with(pool: ProcessPoolExecutor | None, table_ids: Sequence[str] | None,
                       hand_number: int | None, settings: Settings, show_progress: bool,
                       workers: int, archive: Path | None, notes: list[str]
                       ) -> tuple[list[HandVerdict], list[str]]:
    # One source for the whole run in this process (its Redis connections and its one
    # connection to PostgreSQL), closed at the end; the workers make their own.
    source = RedisSource.from_settings(settings)
    try:
        return await _verify_through(source, pool, table_ids, hand_number, settings,
                                     show_progress, workers, archive, notes)
    finally:
        await source.aclose()


async def _verify_through(source: RedisSource, pool: ProcessPoolExecutor | None,
                          table_ids: Sequence[str] | None, hand_number: int | None,
                          settings: Settings, show_progress: bool, workers: int,
                          archive: Path | None, notes: list[str]
                          ) -> tuple[list[HandVerdict], list[str]]:
    tables = list(table_ids) if table_ids else await source.table_ids()
    sizes = await source.sizes(tables)
    wallet = await source.ledger_readable()
    # The wallet's settlements of every table in one read (one pass over the ledger, one
    # query of the archive), where each table read them all again; a table whose log
    # holds a hand settled since is read again on its own (verify_table).
    ledger = await source.settlements(tables) if wallet else None
    by_table: dict[str, Ledger] = {}
    for key, txs in (ledger or {}).items():
        by_table.setdefault(key[0], {})[key] = txs
    if not wallet:
        notes.append("wallet settlements not checked: this Redis user may not read the ledger")
    verdicts: list[HandVerdict] = []
    with _progress(show_progress) as progress:
        task = progress.add_task("verifying events", total=sum(sizes.values()), rate="")
        started = time.perf_counter()

        def done(table_id: str, found: list[HandVerdict]) -> None:
            verdicts.extend(found)
            notes.extend(n for v in found[:1] for n in v.notes if " are archived" in n)
            progress.advance(task, sizes.get(table_id, 0))
            rate = len(verdicts) / max(time.perf_counter() - started, 1e-9)
            progress.update(task, rate=f"{len(verdicts):,} hands, {rate:,.0f} hands/s")

        if pool is not None and len(tables) > 1 and sum(sizes.values()) >= PARALLEL_MIN_EVENTS:
            await _verify_shared(tables, sizes, workers, done, settings, hand_number, wallet,
                                 archive, by_table if ledger is not None else None, pool,
                                 source)
        else:
            await _verify_in_turn(deque(tables), done, settings, hand_number, wallet, archive,
                                  by_table if ledger is not None else None, source)
    if hand_number is not None and not verdicts:
        raise SourceError(f"no hand {hand_number}")
    verdicts.sort(key=lambda v: (v.table_id, v.hand))
    return verdicts, notes


def idle_cpus() -> int:
    """The CPUs this process may use less the load average (at least 1): ``--jobs``'s default.
    On a busy machine another process only adds its start-up (2,000 hands at a load average
    of 16 on 2 cores: 5.8-12.1 s alone against 7.0-15.0 s with --jobs 2). The load average
    counts this process too: its own share (:func:`own_load`) is not another's."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        load = max(0.0, os.getloadavg()[0] - own_load())
    except OSError:
        load = 0.0
    return max(1, min(cpus, round(cpus - load)))


def own_load() -> float:
    """This process's share of the 1-minute load average: its CPU time over its age, damped
    as the kernel damps the average (by 1 - e^(-age/60)). About 0 for a command just
    started, up to 1 for a long busy one (a benchmark calling :func:`verify`); 0 where the
    process's age is unknown (not Linux)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            started = int(stat.read().rsplit(b")", 1)[1].split()[19])  # field 22, in ticks
        with open("/proc/uptime", "rb") as uptime:
            now = float(uptime.read().split()[0])
        age = max(now - started / os.sysconf("SC_CLK_TCK"), 1e-3)
    except (OSError, ValueError, IndexError):
        return 0.0
    return min(1.0, time.process_time() / age) * (1.0 - math.exp(-age / 60.0))


PARALLEL_MIN_EVENTS = 20_000
"""Below this many events (about 400 hands) the worker processes' start-up (one import of
the replay's modules, in the fork server) costs more than they save."""


def _workers(jobs: int, cards: bool) -> ProcessPoolExecutor:
    """``jobs - 1`` worker processes, started now (a no-op task makes the pool start them).

    Forked from this process when that is safe: it runs one thread and the workers will make
    no gRPC call (no dealer to ask for the cards), so a fork copies nothing that a lock of
    another thread, or gRPC's core, holds. A fork costs milliseconds: the worker has every
    module imported already. Otherwise they are forked from a fork server that imports the
    replay's modules once (``multiprocessing``'s ``forkserver``: a process of its own with no
    threads), about a second before the first worker can start."""
    if cards or threading.active_count() > 1 or "fork" not in get_all_start_methods():
        server = get_context("forkserver")
        server.set_forkserver_preload(["studtools.replay_cli"])
        pool = ProcessPoolExecutor(jobs - 1, mp_context=server)
    else:
        pool = ProcessPoolExecutor(jobs - 1, mp_context=get_context("fork"))
    pool.submit(_started)
    return pool


def _started() -> str:
    """A worker's first task (the pool starts its processes on the first): its start method."""
    return get_start_method(allow_none=True) or ""


async def _verify_shared(tables: Sequence[str], sizes: Mapping[str, int], jobs: int,
                         done: Callable[[str, list[HandVerdict]], None], settings: Settings,
                         hand_number: int | None, wallet: bool, archive: Path | None,
                         ledger: Mapping[str, Ledger] | None,
                         pool: ProcessPoolExecutor, source: RedisSource) -> None:
    """Verify ``tables`` in ``jobs`` processes: this one and the ``jobs - 1`` workers of
    ``pool`` (:func:`_workers`), each taking the next table when it is free (the workers the
    biggest first, this process the smallest first, so neither waits for the other at the
    end). Tables are independent (each from its first event), so the verdicts are those of
    one process, in another order."""
    pending = deque(sorted(tables, key=lambda t: (sizes.get(t, 0), t)))
    loop = asyncio.get_running_loop()

    async def workers_side() -> None:
        running: set[asyncio.Future[list[tuple[str, list[HandVerdict]]]]] = set()
        while pending or running:
            while pending and len(running) < 2 * (jobs - 1):  # one queued behind each
                table_id = pending.pop()
                running.add(loop.run_in_executor(
                    pool, _verify_chunk, settings, [table_id], hand_number, wallet,
                    archive, None if ledger is None else {table_id: ledger.get(table_id, {})}))
            finished, running = await asyncio.wait(running,
                                                   return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                for table_id, found in future.result():
                    done(table_id, found)

    await asyncio.gather(
        _verify_in_turn(pending, done, settings, hand_number, wallet, archive, ledger, source),
        workers_side())


async def _verify_in_turn(pending: deque[str], done: Callable[[str, list[HandVerdict]], None],
                          settings: Settings, hand_number: int | None, wallet: bool,
                          archive: Path | None, ledger: Mapping[str, Ledger] | None,
                          source: RedisSource) -> None:
    """Verify tables in this process, taking each from the left of ``pending`` (which other
    processes' feeders take from too) when the one before is verified, through ``source``
    (the caller's: its connections to Redis and PostgreSQL for them all). The next table's log is
    read while this one is re-decided: its read is begun first, and the re-decision lets it
    go on between hands (:func:`verify_table`), so the servers' part of the read (and the
    round trips) overlaps this process's work instead of following it."""
    ahead: tuple[str, asyncio.Future[TableLog]] | None = None
    try:
        while pending or ahead is not None:
            if ahead is None:
                table_id = pending.popleft()
                log = await source.log(table_id, archive)
            else:
                (table_id, reading), ahead = ahead, None
                log = await reading
            if pending:
                next_id = pending.popleft()
                ahead = (next_id, asyncio.ensure_future(source.log(next_id, archive)))
            done(table_id, await verify_table(
                settings, table_id, hand_number, wallet, archive,
                None if ledger is None else ledger.get(table_id, {}), source=source, log=log))
    finally:
        if ahead is not None:
            ahead[1].cancel()
            with contextlib.suppress(BaseException):
                await ahead[1]


def _verify_chunk(settings: Settings, tables: Sequence[str], hand_number: int | None,
                  wallet: bool, archive: Path | None, ledger: Mapping[str, Ledger] | None = None
                  ) -> list[tuple[str, list[HandVerdict]]]:
    """A worker process: verify some tables (states dropped from the verdicts), the cyclic
    collector off meanwhile as in :func:`verify`."""
    async def run() -> list[tuple[str, list[HandVerdict]]]:
        out = []
        for table_id in tables:
            found = await verify_table(settings, table_id, hand_number, wallet, archive,
                                       None if ledger is None else ledger.get(table_id, {}))
            for verdict in found:
                verdict.after = None
            out.append((table_id, found))
        return out
    with no_gc():
        return asyncio.run(run())


YIELD_EVERY = 4
"""Hands re-decided between two turns given to the event loop (the next table's read:
:func:`_verify_in_turn`); a turn costs a few microseconds, four hands about 1.5 ms."""


async def verify_table(settings: Settings, table_id: str, hand_number: int | None,
                       wallet: bool, archive: Path | None = None,
                       settled: Ledger | None = None, *, source: RedisSource | None = None,
                       log: TableLog | None = None) -> list[HandVerdict]:
    """Verify one table's hands (all, or ``hand_number``): commands re-decided, chips, the
    wallet's settlements (``wallet``: readable; never at a tournament table, whose chips the
    wallet never holds) and, with the dealer and auditor credentials, the cards.
    ``settled``: the table's settlements read before its log (:func:`verify`), used when
    they cover every complete hand of the log; otherwise they are read after it.
    ``source``: read through it (the caller closes it; default: a source of its own);
    ``log``: the table's log, read already through it (default: read now)."""
    own = source is None
    if source is None:
        source = RedisSource.from_settings(settings)
    try:
        if log is None:
            log = await source.log(table_id, archive)
        wallet = wallet and not any(isinstance(e.event, rpb.TournamentModeSet)
                                    for e in log.room)
        with no_gc():  # the log is long-lived and acyclic: no collection passes over it
            if hand_number is None:  # each hand's state before it from the verdict before
                checked = []
                for count, pair in enumerate(
                        iter_verify_hands(table_id, log.events, log.start), 1):
                    checked.append(pair)
                    if not count % YIELD_EVERY:
                        await asyncio.sleep(0)  # the next table's read goes on meanwhile
            else:
                try:
                    checked = [(h, verify_hand_log(h)) for h in
                               split_hands(table_id, log.events, log.start)[0]
                               if h.number == hand_number]
                except Unfoldable as exc:  # the log's own events do not fold: that problem
                    checked = [(HandLog(table_id, exc.problem.hand, log.start, []),
                                HandVerdict(table_id, exc.problem.hand, [exc.problem]))]
        ledger = None
        if wallet:
            ledger = settled
            if ledger is None or any((table_id, f"h{hand.number}") not in ledger
                                     for hand, _verdict in checked if hand.complete):
                ledger = await source.settlements([table_id])
    finally:
        if own:
            await source.aclose()
    with no_gc():
        todo = [hand for hand, _verdict in checked]
        verdicts = []
        for hand, verdict in checked:
            if verdict.ok and hand.complete and ledger is not None and verdict.after:
                verdict.problems.extend(check_money(
                    hand, verdict.after, ledger.get((table_id, f"h{hand.number}"), [])))
                verdict.checks.append("wallet")
            verdicts.append(verdict)
    for hand, verdict in zip(todo, verdicts, strict=True):
        verdict.read_from = read_from(hand, log)
    await _recheck_last_settlement(settings, table_id, todo, verdicts)
    if log.chain is not None:
        _chain_problem(table_id, log.chain, todo, verdicts, hand_number)
    if log.note and verdicts:
        verdicts[0].notes.append(log.note)
    if log.chain_note and verdicts:
        verdicts[0].notes.append(log.chain_note)
    if settings.dealer_target and settings.auditor_token:
        dealer = DealerSource(settings.dealer_target, settings.history_dsn)
        try:
            await _check_cards(dealer, settings.auditor_token, table_id, todo, verdicts)
        finally:
            await dealer.aclose()
    return verdicts


def read_from(hand: HandLog, log: TableLog) -> list[str]:
    """Where ``hand``'s events (its lead's too) were read from: the archive's part
    (``log.archived_to``) and Redis's, each as ``events #a..#b from STORE``.

    >>> from rules import TableState
    >>> log = TableLog(TableState(), [], archived_to=5, archived_in="PostgreSQL")
    >>> hand = HandLog("t", 2, TableState(), [Logged(s, "", 0.0, None) for s in (4, 5, 6)])
    >>> read_from(hand, log)
    ['events #4..#5 from PostgreSQL', 'events #6..#6 from Redis']
    """
    sequences = [item.sequence for item in (*hand.lead, *hand.events)]
    parts = []
    for store, picked in ((log.archived_in, [s for s in sequences if s <= log.archived_to]),
                          ("Redis", [s for s in sequences if s > log.archived_to])):
        if picked:
            parts.append(f"events #{min(picked)}..#{max(picked)} from {store}")
    return parts


def _chain_problem(table_id: str, broken: ChainBreak, hands: Sequence[HandLog],
                   verdicts: list[HandVerdict], hand_number: int | None) -> None:
    """The chain's first broken link as a problem of the hand it falls in (the last hand
    that starts at or before it; with ``--hand``, only if it is that hand's)."""
    def first(hand: HandLog) -> int:
        items = hand.lead or hand.events
        return items[0].sequence if items else 0

    at = [i for i, h in enumerate(hands) if first(h) <= broken.sequence]
    index = at[-1] if at else 0
    if hand_number is not None and (not hands or hands[index].number != hand_number):
        return
    problem = Problem(hands[index].number if hands else 0, broken.sequence,
                      "chain broken: expected digest " + broken.expected.hex()
                      + ", found " + broken.found.hex() + f" ({broken.detail})")
    if not verdicts:
        verdicts.append(HandVerdict(table_id, 0))
    verdicts[index].problems.append(problem)
    verdicts[index].checks.append("chain")


SETTLE_GRACE_S = 2.0
"""How long a hand that has just ended may wait for its settlement in the ledger."""


async def _recheck_last_settlement(settings: Settings, table_id: str, hands: Sequence[HandLog],
                                   verdicts: Sequence[HandVerdict]) -> None:
    """The table's last complete hand may have ended just before the log was read, its
    settlement not yet written (the table settles right after ``HandEnded``): if the wallet
    has none, look again once after a grace period before calling it a failure."""
    if not hands:  # a broken chain's verdict alone (_chain_problem): no hand to settle
        return
    done = [(h, v) for h, v in zip(hands, verdicts, strict=True) if h.complete]
    if not done:
        return
    hand, verdict = done[-1]
    missing = [p for p in verdict.problems if p.what.startswith("the wallet has no settlement")]
    if not missing or verdict.after is None:
        return
    await asyncio.sleep(SETTLE_GRACE_S)
    source = RedisSource.from_settings(settings)
    try:
        ledger = await source.settlements([table_id]) or {}
    finally:
        await source.aclose()
    verdict.problems = [p for p in verdict.problems if p not in missing]
    verdict.problems.extend(check_money(hand, verdict.after,
                                        ledger.get((table_id, f"h{hand.number}"), [])))


async def _check_cards(dealer: DealerSource, token: str, table_id: str,
                       hands: Sequence[HandLog], verdicts: Sequence[HandVerdict]) -> None:
    """Every dealt card of each complete hand against its committed deck."""
    if not hands:  # a broken chain's verdict alone (_chain_problem): no hand dealt
        return
    pairs = [(h, v) for h, v in zip(hands, verdicts, strict=True) if h.complete]
    records = await dealer.audits(token, table_id, [h.number for h, _ in pairs])
    for hand, verdict in pairs:
        record = records[hand.number]
        if isinstance(record, SourceError):
            verdict.problems.append(Problem(hand.number, None, f"no deck: {record}"))
            continue
        checked = verify_hand(audit_from_proto(record.message),
                              [item.event for item in hand.events])
        verdict.checks.append("cards")
        verdict.read_from.append(f"deck from {record.source}")
        if not checked.ok:
            verdict.problems.append(Problem(
                hand.number, _first_card_event(hand), "cards: " + "; ".join(checked.problems)))


def _first_card_event(hand: HandLog) -> int | None:
    for item in hand.events:
        if type(item.event).__name__ in ("UpCardDealt", "DownCardDealt", "CardBurned"):
            return item.sequence
    return None


async def _verify(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    if args.hand is not None and not args.table:
        raise SourceError("--hand needs --table")
    show = not args.json and not args.no_progress and sys.stderr.isatty()
    started = time.perf_counter()
    verdicts, notes = await verify([args.table] if args.table else None, args.hand, settings,
                                   show_progress=show, workers=args.workers or idle_cpus(),
                                   archive=args.archive)
    elapsed = time.perf_counter() - started
    failed = [v for v in verdicts if not v.ok]
    line = f"hands={len(verdicts)} verified={len(verdicts) - len(failed)} failed={len(failed)}"
    if args.json:
        json.dump({"hands": len(verdicts), "verified": len(verdicts) - len(failed),
                   "failed": len(failed), "seconds": round(elapsed, 3), "notes": notes,
                   "failures": [v.to_json() for v in failed],
                   "results": [v.to_json() for v in verdicts] if args.verbose else None},
                  out, indent=1)
        out.write("\n")
    else:
        for verdict in failed:
            for problem in verdict.problems:
                print("FAILED " + problem.line(verdict.table_id), file=out)
            if verdict.read_from:
                print(f"read from: table {verdict.table_id} hand {verdict.hand}: "
                      + ", ".join(verdict.read_from), file=out)
        if args.verbose:
            for verdict in verdicts:
                for note in verdict.notes:
                    print(f"note: table {verdict.table_id} hand {verdict.hand}: {note}",
                          file=out)
        for note in notes:
            print(f"note: {note}", file=out)
        print(line, file=out)
    return EXIT_OK if not failed else EXIT_FAILED


# --- export ----------------------------------------------------------------------------------

async def _export(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    source = RedisSource.from_settings(settings)
    try:
        hands = await _table_hands(source, args.table, args.archive)
    finally:
        await source.aclose()
    if args.hand is not None:
        hands = [_pick(hands, args.hand)]
    elif args.format == "phh":
        hands = [h for h in hands if h.complete]  # a hand still being played is no PHH yet
    down: dict[int, dict[int, list[Any]]] = {}
    if args.auditor:
        if not settings.auditor_token:
            raise SourceError(f"the auditor's export needs {AUDITOR_TOKEN_ENV}")
        dealer = DealerSource(settings.dealer_target, settings.history_dsn)
        try:
            records = await dealer.audits(settings.auditor_token, args.table,
                                          [h.number for h in hands if h.complete])
        finally:
            await dealer.aclose()
        for number, record in records.items():
            if isinstance(record, SourceError):
                raise record
            down[number] = dict(record.down)
    text = export_text(args.table, hands, args.format, down)
    if args.json:
        json.dump({"table": args.table, "format": args.format,
                   "hands": [h.number for h in hands], "text": text}, out, indent=1)
        out.write("\n")
    else:
        out.write(text)
    return EXIT_OK


def export_text(table_id: str, hands: Sequence[HandLog], fmt: str,
                down: dict[int, dict[int, list[Any]]] | None = None) -> str:
    """The hands as PHH (one hand: ``.phh``; several: ``.phhs``), text history or JSON
    lines; ``down`` (hand -> seat -> cards) fills in down cards (the auditor's export)."""
    down = down or {}
    parts: list[str] = []
    for hand in hands:
        events = merge_down_cards(hand.events, down[hand.number]) if hand.number in down \
            else hand.events
        if fmt == "jsonl":
            parts.extend(json.dumps(_event_json(table_id, hand.number, item),
                                    separators=(",", ":")) + "\n" for item in events)
        elif fmt == "text":
            parts.append(render_history([e.event for e in events]) + "\n")
        else:
            text = phh_of(table_id, hand, events)
            if len(hands) > 1:
                text = f'["{table_id}-h{hand.number}"]\n' + text
            parts.append(text)
    return ("\n" if fmt in ("text", "phh") else "").join(parts)


def phh_of(table_id: str, hand: HandLog, events: Sequence[Logged]) -> str:
    """One hand as PHH."""
    before = hand.before
    started = events[0].event
    seats = getattr(started, "seats", ())
    stacks = {s: before.stack(s) for s in seats}
    players = {s: seat.player_id for s in seats if (seat := before.seat(s)) is not None}
    return export_phh([e.event for e in events], _config(hand), starting_stacks=stacks,
                      players=players, fields={"table": table_id})


# --- registration ------------------------------------------------------------------------------

Command = Callable[[argparse.Namespace, TextIO, Settings], Coroutine[Any, Any, int]]


async def _tournament(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    from studtools import replay_tournament
    source = RedisSource.from_settings(settings)
    try:
        return await replay_tournament.run(source, args.tournament, out)
    finally:
        await source.aclose()


async def _protection(args: argparse.Namespace, out: TextIO, settings: Settings) -> int:
    from studtools import replay_protection
    source = RedisSource.from_settings(settings)
    try:
        return await replay_protection.run(source.client, args.player, out, args.json)
    finally:
        await source.aclose()


def _handler(run: Command) -> Handler:
    def handle(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
        try:
            return _run(run(args, out, Settings.from_env(env)), sys.stderr)
        except _redis_errors() as exc:
            print(f"stud replay: cannot read Redis: {exc}", file=sys.stderr)
            return EXIT_SOURCE
    return handle


def register(replay_commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list``, ``room``, ``show``, ``verify`` and ``export`` under ``stud replay``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON")
    common.add_argument("--archive", type=Path, metavar="DIR",
                        help="the `stud archive` directory: hands whose events left Redis")

    p = replay_commands.add_parser(
        "list", parents=[common], help="a table's hands, or a player's, wherever they live",
        description="List a table's hands (time, players, pot, rake and winners), or with "
        "--player the hands a player was dealt into at any table; hands the archiver moved "
        "to PostgreSQL (STUD_SUPPORT_DSN) and hands still in Redis alike.")
    p.add_argument("--table", metavar="T")
    replay_find.add_arguments(p)
    p.set_defaults(handler=_handler(_list))

    p = replay_commands.add_parser(
        "room", parents=[common], help="the room's events: seats' money, closes, settlements",
        description="List a table's room events in order: buy-ins, refunds, top-ups, "
        "cash-outs, leaves, settlements, reconciliations and the close.")
    p.add_argument("--table", required=True, metavar="T")
    p.set_defaults(handler=_handler(_room))

    p = replay_commands.add_parser(
        "show", parents=[common], help="one hand's history, rebuilt from the live log",
        description="Fold a hand's events with the rules and print its history. A seat's "
        "down cards appear only with that player's or an auditor's token "
        "(STUD_REPLAY_TOKEN); --auditor merges the dealer's record and checks the deck "
        "commitment.")
    p.add_argument("--table", required=True, metavar="T")
    p.add_argument("--hand", required=True, type=int, metavar="N")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--as-seat", type=int, metavar="S", help="a seat's view")
    who.add_argument("--observer", action="store_true", help="the public view (default)")
    who.add_argument("--auditor", action="store_true", help="every card, deck verified")
    p.set_defaults(handler=_handler(_show))

    p = replay_commands.add_parser(
        "verify", parents=[common], help="verify hands from the live logs",
        description="Re-decide every command of each hand, check chips are conserved, the "
        "wallet's settlement postings and (with auditor credentials) every dealt card "
        "against the committed deck. Ends with 'hands=… verified=… failed=…'; exit status "
        "1 on any failure, 2 when the source cannot be read.")
    p.add_argument("--table", metavar="T", help="one table (default: every table)")
    p.add_argument("--hand", type=int, metavar="N", help="one hand (needs --table)")
    p.add_argument("--all", action="store_true", help="every hand of every table "
                   "(the default without --table)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--jobs", "--workers", type=int, default=None, metavar="N",
                   dest="workers", help="processes sharing the tables of a history of "
                   f"{PARALLEL_MIN_EVENTS:,} events or more (default: one per idle CPU, the "
                   "CPUs less the load average, at least 1; 1: this process alone)")
    p.add_argument("-v", "--verbose", action="store_true", help="also print notes")
    p.set_defaults(handler=_handler(_verify))

    p = replay_commands.add_parser(
        "export", parents=[common], help="export hands as PHH, text or JSON lines",
        description="Export a table's hands (or one): PHH that `stud replay check` and "
        "PokerKit read back, the text history, or JSON lines of the events.")
    p.add_argument("--table", required=True, metavar="T")
    p.add_argument("--hand", type=int, metavar="N")
    p.add_argument("--format", required=True, choices=("phh", "text", "jsonl"))
    p.add_argument("--auditor", action="store_true",
                   help="every card from the dealer's record (auditor credentials)")
    p.set_defaults(handler=_handler(_export))

    p = replay_commands.add_parser(
        "tournament", help="a tournament's history, verified against the tables' logs",
        description="A tournament's entrants, levels, breaks, moves, busts with places and "
        "payouts from its log; each move's and bust's stack checked against the tables' "
        "logs, the places against the prizes, the prizes against the wallet's pool. Ends "
        "with 'entrants=… levels=… moves=… busts=… payouts=… verified=yes|no'.")
    p.add_argument("--id", required=True, metavar="T", dest="tournament")
    p.set_defaults(handler=_handler(_tournament))

    p = replay_commands.add_parser(
        "protection", help="a player's limit and exclusion events (issue 34)",
        description="Every limit and exclusion event of a player, oldest first, from the "
        "wallet's stream of them: limits set, lowered, raises requested and cancelled, "
        "self- and operator exclusions, lifts, reality checks.")
    p.add_argument("--player", required=True, metavar="P")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_handler(_protection))

    # A player's own check of a hand (docs/fairness.md): the player's token, no Redis.
    from studclient.verify_mine import register as register_verify_mine
    register_verify_mine(replay_commands)
