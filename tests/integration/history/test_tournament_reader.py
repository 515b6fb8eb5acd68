"""The tournament service's role in the archive (issue 31, review): ``stud_tournament_reader``
(login ``tournament``, migration 0009) reads the archived tournaments' events and the lobby's
view, and nothing else: not the tables' history, the command outcomes, the ledger, the dealer's
records nor the other tournament facts, and it writes nothing. Real PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

from studtest.postgres import HistoryDsns

pytestmark = pytest.mark.integration

REFUSED = ["history.events", "history.hands", "history.hand_players", "history.commands",
           "history.segments", "ledger.postings", "ledger.segments", "ledger.balances",
           "auditor.dealer_hands", "tournaments.entries", "tournaments.prizes",
           "tournaments.results"]


def test_the_tournament_reader_reads_its_two_relations_only(history_dsns: HistoryDsns
                                                             ) -> None:
    with psycopg.connect(history_dsns.tournament, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("tournament",)
        assert conn.execute("SELECT count(*) FROM tournaments.events").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM tournaments.archived").fetchone() == (0,)
        for relation in REFUSED:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT 1 FROM {relation} LIMIT 1")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO tournaments.events (tournament_id, sequence, "
                         "occurred_at, event_type, command_id, envelope, digest) VALUES "
                         "('t', 1, now(), 'Created', 'c', '\\x01', '\\x02')")
