"""The tournament app's read path for tournaments whose stream left Redis for PostgreSQL
(docs/tournament.md, "Finished tournaments"): the tombstone that says one did, its events
for GetTournament, VerifyTournament and WatchTournament, its lines in ListTournaments, and
the refusal of a caller's retry whose record left with it, read through the :class:`Archive`
port (over PostgreSQL: :class:`tournament.history.ArchivedTournaments`).

:class:`TournamentApp <tournament.app.TournamentApp>` calls :class:`ArchivedReads` only for an
id with no stream in Redis, or one it already read from here (:meth:`ArchivedReads.final`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final, Protocol

import structlog

from stud.v1.envelope_pb2 import EventEnvelope
from studhistory.tournament_archive import TOMBSTONE
from studkit import keys
from studkit.errors import FailedPrecondition, NotFound, Unavailable
from studkit.redis_client import Client
from tournament.codec import Record, record_from_envelope
from tournament.state import Tournament, apply

log = structlog.get_logger("tournament.archived")

NO_ARCHIVE: Final = ("this tournament service has no TOURNAMENT_HISTORY_DSN, so tournaments "
                     "whose history the archiver moved to PostgreSQL cannot be read")
ARCHIVED_OUTCOMES: Final = frozenset({"finished", "cancelled"})
"""The phases an archived tournament may have (how it ended: ``tournaments.endings``)."""


class ArchiveUnavailable(Unavailable):
    """PostgreSQL could not answer for an archived tournament (retry)."""

    default_reason = "archive_unavailable"


class CommandExpired(FailedPrecondition):
    """A caller's command retried after its tournament, and with it the command's record,
    left Redis: it was applied, and its outcome can no longer be replayed."""

    default_reason = "command_expired"


class Archive(Protocol):
    """The archived tournaments, as the app reads them (the port; each read raises
    :class:`ArchiveUnavailable` when the archive cannot answer)."""

    async def events(self, tournament_id: str, after: int = 0) -> list[tuple[int, bytes]]:
        """The tournament's archived events after ``after`` (sequence, stored envelope), in
        order; none when it is not archived."""

    async def applied(self, tournament_id: str, command_id: str) -> bool:
        """Whether an archived event of the tournament was appended by ``command_id``."""

    async def page(self, before: str | None, outcome: str, limit: int
                   ) -> list[tuple[str, str]]:
        """Up to ``limit`` archived tournaments with how each ended, ids descending, below
        ``before`` (None: from the last), of that ``outcome`` only (``""``: any)."""

    async def aclose(self) -> None: ...


class ArchivedReads:
    """Reads of tournaments that left Redis: ``client`` for their tombstones, ``archive``
    for their events (None: no ``TOURNAMENT_HISTORY_DSN``, so such a tournament is
    ``NOT_FOUND`` ``archived``), and the ids read whole from it (over: final)."""

    def __init__(self, client: Client, archive: Archive | None) -> None:
        self._client = client
        self.archive = archive
        self._final: set[str] = set()

    def final(self, tournament_id: str) -> bool:
        """Whether the app's state of ``tournament_id`` was read whole from the archive (or
        from Redis before its stream left): nothing more will be appended to it."""
        return tournament_id in self._final

    def forget(self, tournament_id: str) -> None:
        """The app let its state of ``tournament_id`` go: it is read again when next asked."""
        self._final.discard(tournament_id)

    async def carry_on(self, tournament_id: str, t: Tournament) -> Tournament:
        """``t`` (what was read of it before, if anything) carried on from the archive, for
        a tournament with no stream in Redis: only when the archiver's trim left its
        tombstone (:data:`studhistory.tournament_archive.TOMBSTONE`, the archived version),
        or this replica read it from Redis before; an id never created costs no query.
        ``NotFound`` ``archived`` without an archive; ``ArchiveUnavailable`` when the
        archive holds fewer events than the tombstone names."""
        mark = await self._client.get(keys.tournament_key(tournament_id, TOMBSTONE))
        if mark is None and t.config is None:
            return t  # never created: nothing to read anywhere
        if self.archive is None:
            raise NotFound(f"tournament {tournament_id} is archived: {NO_ARCHIVE}",
                           reason="archived")
        rows = await self.archive.events(tournament_id, t.version)
        if rows:
            t = apply(t, (record_from_envelope(EventEnvelope.FromString(raw)).event
                          for _, raw in rows))
        if mark is not None and t.version < int(mark):
            raise ArchiveUnavailable(f"the archive holds {t.version} of tournament "
                                     f"{tournament_id}'s {int(mark)} events")
        self._final.add(tournament_id)  # read whole, or read from Redis before it left
        return t

    async def records(self, tournament_id: str, after: int) -> list[Record]:
        """A final tournament's archived records after ``after`` (none without an archive)."""
        if self.archive is None:
            return []
        return [record_from_envelope(EventEnvelope.FromString(raw))
                for _, raw in await self.archive.events(tournament_id, after)]

    async def refuse_expired(self, tournament_id: str, command_id: str, chosen: str) -> None:
        """Refuse ``command_expired`` a caller's command with no record in Redis whose
        tournament left Redis for the archive (final: just loaded from it) when an archived
        event was appended by it: a retry after the command window, whose record left with
        the stream. It is not decided again on the archived state, whose refusal would tell
        the caller it was not applied. A tournament in Redis costs nothing here."""
        if self.archive is None or tournament_id not in self._final:
            return
        if await self.archive.applied(tournament_id, command_id):
            raise CommandExpired(
                f"command {chosen} was applied to tournament {tournament_id}, which is over "
                "and archived with its command records: its outcome can no longer be "
                "replayed (read the tournament); send a new command")

    async def lobby(self, hot: list[str], before: str | None, phase: str, batch: int
                    ) -> AsyncIterator[tuple[str, str | None]]:
        """Redis's tournament ids ``hot`` (descending, read once, first) merged with the
        archive's, walked in keyset pages of ``batch`` (``TournamentApp.lobby``): each id
        with how it ended if listed from the archive, None if from Redis; one in both
        stores is listed once, from Redis; PostgreSQL down, the rest lists Redis's alone."""
        i = 0
        if self.archive is not None and (not phase or phase in ARCHIVED_OUTCOMES):
            cursor = before
            while True:
                try:
                    rows = await self.archive.page(cursor, phase, batch)
                except Unavailable:
                    log.warning("tournament_archive_listing_failed", exc_info=True)
                    break
                for tid, outcome in rows:
                    while i < len(hot) and hot[i] > tid:
                        yield hot[i], None
                        i += 1
                    if i < len(hot) and hot[i] == tid:
                        continue  # still in Redis too: listed from there
                    yield tid, outcome
                if len(rows) < batch:
                    break
                cursor = rows[-1][0]
        for tid in hot[i:]:
            yield tid, None
