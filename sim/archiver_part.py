"""What the simulated parts of the archiver process share (the tables' step,
``sim.archive``; the wallet's ledger's, ``sim.ledger_archive``; the tournaments',
``sim.tournament_archive``): what each keeps of its run (its log, its step, crash and failure
counts, the violations its checks found, each reported once and kept until the run takes
them), the faults of its own Redis connection, its death (:class:`Crash`), and the
autocommit connection to a simulated PostgreSQL (:class:`SimPgConn`: a statement failed now
and then, a transaction's writes committed whole)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import psycopg

from sim.redis import Faults

if TYPE_CHECKING:
    from sim.world import World

STORE_FAIL = 0.0005
"""Per command of a part's own Redis connection: the store fails it (as every process's)."""


class Crash(Exception):
    """The archiver process died here."""


def norm(sql: str) -> str:
    """A statement with its white space folded, as the simulated databases match it."""
    return " ".join(sql.split())


class Rows:
    """What a statement answered, read as a psycopg cursor's."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    async def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows


PendingT = TypeVar("PendingT")


class SimPgConn(Generic[PendingT]):
    """An autocommit connection to a simulated PostgreSQL, as ``psycopg.AsyncConnection``:
    a statement fails with probability ``fail`` (drawn from ``rng``; never without one), and
    in :meth:`transaction` the writes are staged (``_pending``, made by :meth:`_begin`) and
    committed whole by :meth:`_commit` once the block ends without an error."""

    def __init__(self, rng: random.Random | None = None, fail: float = 0.0) -> None:
        self.rng = rng
        self.fail = fail
        self.closed = False
        self._pending: PendingT | None = None

    def _fault(self) -> None:
        if self.rng is not None and self.fail and self.rng.random() < self.fail:
            raise psycopg.OperationalError("simulated: PostgreSQL failed the statement")

    async def close(self) -> None:
        self.closed = True

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        self._pending = self._begin()
        try:
            yield
            pending = self._pending
        finally:
            self._pending = None
        assert pending is not None
        self._commit(pending)

    def _begin(self) -> PendingT:
        """A transaction's staged writes, none yet."""
        raise NotImplementedError

    def _commit(self, pending: PendingT) -> None:
        """A transaction's staged writes into the database, all or none (the archiver may
        die right after)."""
        raise NotImplementedError


class ArchiverPart:
    """The log, the counts and the found violations of one part of the archiver."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.steps = self.crashes = self.failed = 0
        self.log: list[str] = []
        self.found: list[str] = []
        """Violations seen between the run's steps, not yet taken."""
        self._reported: set[str] = set()

    def _store_faults(self, rng: random.Random) -> Faults:
        """The faults of the part's own connection to the simulated Redis, drawn from
        ``rng``."""
        p = self.world.probabilities
        return Faults(rng, STORE_FAIL, p.store_fail_before, p.store_fail_after)

    def _note(self, line: str) -> None:
        self.log.append(f"t={self.world.loop.time():9.3f} {line}")

    def _crashed(self, line: str) -> None:
        """The part's process died (``line``: where)."""
        self.crashes += 1
        self.world.count("archiver_crash")
        self._note(line)

    def _failed(self, line: str) -> None:
        """A step failed (``line``: why)."""
        self.failed += 1
        self._note(line)

    def _report(self, line: str) -> None:
        """A violation, once however often it is seen."""
        if line not in self._reported:
            self._reported.add(line)
            self.found.append(line)

    def take(self) -> list[str]:
        """The violations found since the last take."""
        found, self.found = self.found, []
        return found
