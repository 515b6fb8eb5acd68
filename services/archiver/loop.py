"""The archiver's rounds: every ``interval_s``, each table with events is taken one step
(:func:`studhistory.archiver.archive_table`) under its advisory lock; a table whose step
fails is logged, counted and tried again next round, never trimmed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog
from prometheus_client import Gauge, Histogram

from studhistory.archiver import ArchiveError, archive_table
from studhistory.dealer_records import DealerAudits
from studhistory.ledger_archive import (
    DEFAULT_HOT_TRANSACTIONS,
    LedgerArchiveError,
    archive_ledger,
)
from studhistory.pgarchive import PgHistory, TableLock
from studhistory.tournament_archive import archive_tournaments
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.metrics import Metrics
from studkit.store import EventStore

log = structlog.get_logger("archiver")


@dataclass
class Archiver:
    """One archiver process's work over every table."""

    store: EventStore
    dsn: str
    """PostgreSQL as the ``stud_archiver`` role; one connection, made again after an error."""
    metrics: Metrics
    hot_hands: int
    dealer: DealerAudits | None = None
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    tournaments_seen: dict[str, int] = field(default_factory=dict)
    """Tournament -> its stream's length when last read and not over yet."""
    history: PgHistory | None = None
    command_window_s: float = COMMAND_WINDOW_S
    """The least seconds a command record stays after its events (``STUD_COMMAND_WINDOW_S``)."""
    wallet_hot: int = DEFAULT_HOT_TRANSACTIONS
    """The wallet's latest transactions kept in Redis (``WALLET_HOT_TRANSACTIONS``); 0: its
    ledger is copied, never trimmed (the wallet reads archived statements only with
    ``WALLET_HISTORY_DSN``)."""
    trim_tournaments: bool = False
    """``ARCHIVER_TRIM_TOURNAMENTS``: a tournament archived and verified leaves Redis once
    past the command window (set it only when the tournament service reads the archive,
    ``TOURNAMENT_HISTORY_DSN``); False: copied, its stream kept."""
    clock: Callable[[], float] = time.time
    """Unix seconds: when a tournament's command window is over (a test's clock)."""

    def __post_init__(self) -> None:
        registry = self.metrics.registry
        self._events = self.metrics.counter(
            "stud_archiver_events_total", "Events copied to PostgreSQL.")
        self._trimmed = self.metrics.counter(
            "stud_archiver_trimmed_events_total", "Events trimmed from Redis once archived, "
            "verified and out of the hot window.")
        self._hands = self.metrics.counter(
            "stud_archiver_hands_total", "Hands copied to PostgreSQL.")
        self._lag = Histogram(
            "stud_archiver_lag_seconds", "From a hand's end to its copy being durable in "
            "PostgreSQL.", buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
            registry=registry)
        self._failures = self.metrics.counter(
            "stud_archiver_failures_total", "Steps that could not write or verify (nothing "
            "trimmed; tried again next round).")
        self._busy = self.metrics.counter(
            "stud_archiver_tables_skipped_total", "Tables skipped because another archiver "
            "holds their lock.")
        self._ledger = self.metrics.counter(
            "stud_archiver_ledger_transactions_total", "The wallet's ledger transactions "
            "copied to PostgreSQL (with their postings and statement lines).")
        self._ledger_trimmed = self.metrics.counter(
            "stud_archiver_ledger_trimmed_total", "The wallet's ledger transactions trimmed "
            "from Redis once archived, verified and out of its hot window.")
        self._tournaments = self.metrics.counter(
            "stud_archiver_tournaments_total", "Tournaments whose facts (entries, busts, "
            "places, prizes, refunds, ending) were written to PostgreSQL.")
        self._tournaments_trimmed = self.metrics.counter(
            "stud_archiver_tournaments_trimmed_total", "Tournaments whose keys left Redis "
            "once their stream was archived and verified.")
        self._round = Histogram("stud_archiver_round_seconds", "Time of one round over every "
                                "table.", registry=registry)
        self._last_round = Gauge("stud_archiver_last_round_unix", "When the last round "
                                 "ended.", registry=registry)

    async def connected(self) -> PgHistory:
        """The PostgreSQL connection, made when there is none."""
        if self.history is None or self.history.conn.closed:
            self.history = await PgHistory.connect(self.dsn)
        return self.history

    async def aclose(self) -> None:
        if self.history is not None:
            await self.history.aclose()
            self.history = None

    async def step(self, table_id: str) -> None:
        """One step for one table (skipped when another archiver holds it)."""
        history = await self.connected()
        lock = TableLock(history.conn)
        if not await lock.acquire(table_id):
            self._busy.inc()
            return
        try:
            outcome = await archive_table(self.store, history, table_id,
                                          keep_hands=self.hot_hands, dealer=self.dealer,
                                          command_window_s=self.command_window_s)
        except ArchiveError as exc:
            self._failures.inc()
            log.error("archive_failed", table_id=table_id, error=str(exc))
            return
        finally:
            if not history.conn.closed:
                await lock.release(table_id)
        p = outcome.plan
        now = time.time()
        if outcome.wrote:
            self._events.inc(p.copy_to - p.archived)
            self._hands.inc(len(p.hands))
            for ended in outcome.ended:
                self._lag.observe(max(0.0, now - ended.timestamp()))
            log.info("archived", table_id=table_id, first=p.archived + 1, last=p.copy_to,
                     hands=len(p.hands))
        if outcome.trimmed_to is not None:
            self._trimmed.inc(p.trim_to - p.trimmed)
            log.info("trimmed", table_id=table_id, first=p.trimmed + 1, last=p.trim_to,
                     hands=len(p.trim_hands))

    async def ledger_step(self) -> None:
        """One step for the wallet's ledger (skipped when another archiver holds it)."""
        history = await self.connected()
        try:
            outcome = await archive_ledger(self.store.client, history.conn,
                                           keep=self.wallet_hot)
        except LedgerArchiveError as exc:
            self._failures.inc()
            log.error("ledger_archive_failed", error=str(exc))
            return
        if outcome.skipped:
            self._busy.inc()
        if outcome.copied:
            self._ledger.inc(outcome.copied)
            log.info("ledger_archived", transactions=outcome.copied, postings=outcome.postings)
        if outcome.trimmed:
            self._ledger_trimmed.inc(outcome.trimmed)
            log.info("ledger_trimmed", transactions=outcome.trimmed,
                     lines=outcome.trimmed_lines, through=outcome.trimmed_through)

    async def tournaments_step(self) -> None:
        """The facts of every tournament that is over and paid out, once."""
        history = await self.connected()
        outcome = await archive_tournaments(self.store.client, history.conn,
                                            self.tournaments_seen,
                                            trim_streams=self.trim_tournaments,
                                            command_window_s=self.command_window_s,
                                            clock=self.clock)
        for tid in outcome.archived:
            self._tournaments.inc()
            log.info("tournament_archived", tournament_id=tid,
                     events=outcome.copied.get(tid, 0))
        for tid in outcome.trimmed:
            self._tournaments_trimmed.inc()
            log.info("tournament_trimmed", tournament_id=tid)
        self._busy.inc(len(outcome.busy))
        for tid, error in outcome.failed.items():
            self._failures.inc()
            log.error("tournament_archive_failed", tournament_id=tid, error=error)

    async def round(self) -> None:
        """One step for every table, then for the wallet's ledger and the tournaments."""
        started = time.monotonic()
        for table_id in await self.store.table_ids():
            if self.stopping.is_set():
                return
            await self.step(table_id)
        if not self.stopping.is_set():
            await self.ledger_step()
        if not self.stopping.is_set():
            await self.tournaments_step()
        self._round.observe(time.monotonic() - started)
        self._last_round.set(time.time())

    async def run(self, interval_s: float) -> None:
        """Rounds until ``stopping``; an error of Redis or PostgreSQL is logged and the round
        tried again after the interval."""
        while not self.stopping.is_set():
            try:
                await self.round()
            except Exception as exc:  # Redis or PostgreSQL down: retry
                self._failures.inc()
                log.error("archive_round_failed", error=f"{type(exc).__name__}: {exc}")
                await self.aclose()  # a fresh connection (and no lock held) next round
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), interval_s)
