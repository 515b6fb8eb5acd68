"""The wallet's ledger archive in the simulator (issue 31, ``sim.ledger_archive``): the
archiver's real step for the ledger (``studhistory.ledger_archive.archive_ledger``) into a
simulated PostgreSQL, dying after the copy and at its trims, PostgreSQL failing statements,
breaks no invariant (nothing trimmed before the archive holds it; the ledger across the
archive and Redis is the ledger appended, sums to zero and moves each account its balance;
every statement read through the wallet's merge is its lines as appended); and each way of
breaking it is seen: a trim before the copy (at the trim, and in the ledger across both
stores), a posting row the archive loses, a copy the archive holds twice, a statement line
trimmed behind the archive's back (in the statement read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sim.redis import SimRedis
from sim.run import Run, run_seed
from sim.world import Probabilities

RATE = 0.3


def _violations(sabotage: Callable[[Run], None]) -> list[str]:
    result = run_seed(31, tables=2, hands=30,
                      probabilities=replace(Probabilities(), archive=RATE),
                      sabotage=sabotage)
    assert result.first_step is not None
    return result.violations


def test_the_ledger_archiver_among_the_faults_breaks_no_invariant() -> None:
    """Two seeds, each without a violation, and between them both of the archiver's deaths
    (which of them a seed meets moves with the services' round trips: seed 31 alone stopped
    meeting the death after the copy when the dealer's StartHand lost one)."""
    log: list[str] = []
    for seed in (31, 32):
        result = run_seed(seed, tables=2, hands=30,
                          probabilities=replace(Probabilities(), archive=RATE))
        assert result.violations == []
        archived = result.archive
        assert archived["ledger_trimmed"] > 20  # transactions that live in the archive only
        assert archived["archived_lines_read"] > 50  # statement lines read from the archive
        assert archived["statements_read"] > 20
        log += result.log
    assert any("crash after the ledger's copy" in line for line in log)
    assert any("ledger archiver crash at trim" in line for line in log)


def test_a_ledger_trimmed_before_the_archive_holds_it_is_seen() -> None:
    """A broken archiver trims the ledger and the statements to its hot window before it
    copies: each trim is seen as it happens, and the ledger across both stores misses the
    transactions."""
    def trim_first(run: Run) -> None:
        assert run.archiver is not None
        run.archiver.ledger.trim_first = True

    violations = _violations(trim_first)
    assert any(v.startswith("ledger archive: transaction ") and "left Redis before the "
               "archive held it (at its trim" in v for v in violations), violations[:5]
    assert any("statement line" in v and "left Redis before the archive held it" in v
               for v in violations), violations[:5]
    assert any("left Redis before the archive held them (trimmed" in v
               for v in violations), violations[:5]


def test_a_posting_row_the_archive_loses_is_seen() -> None:
    """The archive's copy loses one posting row (its fifth): the archived transaction is
    incomplete and the ledger across both stores no longer sums to zero."""
    def drop(run: Run) -> None:
        assert run.archiver is not None
        run.archiver.ledger.db.drop_row = 5

    violations = _violations(drop)
    assert any("the archive holds" in v and "postings" in v for v in violations), \
        violations[:5]
    assert any("sums to" in v and "not 0" in v for v in violations), violations[:5]


def test_a_copy_the_archive_holds_twice_is_seen() -> None:
    """The archive stores its third copy twice (the rows again under other keys): those
    transactions are in it twice, and the ledger across both stores moves their postings
    twice."""
    def twice(run: Run) -> None:
        assert run.archiver is not None
        run.archiver.ledger.db.twice = 3

    violations = _violations(twice)
    assert any("the archive holds" in v and "postings" in v for v in violations), \
        violations[:5]
    assert any("moved" in v and "its balance is" in v for v in violations), violations[:5]


def test_a_statement_line_lost_from_both_stores_is_seen_in_the_statement_read() -> None:
    """At the end, an account's oldest statement line still in Redis, one the archive does
    not hold yet, is trimmed: the statement read through the wallet's merge misses it."""
    def trim_a_line(run: Run) -> None:
        if not run.ending:
            return
        assert run.archiver is not None
        data, archived = run.world.data, run.archiver.ledger.db.lines
        key, line = next((k, entries[0][0].decode()) for k in sorted(data.statement_log)
                         if (entries := data.streams.get(k))
                         and (k.decode().split(":postings:")[1], entries[0][0].decode())
                         not in archived)
        ms, seq = line.split("-")
        SimRedis(data)._xtrim(key.decode(), f"{ms}-{int(seq) + 1}")

    violations = _violations(trim_a_line)
    assert any("statement read from the archive and Redis has" in v for v in violations), \
        violations[:5]
