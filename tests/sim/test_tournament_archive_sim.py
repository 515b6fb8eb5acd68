"""Finished tournaments leave Redis in the simulator (issue 31, ``sim.tournament_archive``):
the archiver's real step for tournaments (``studhistory.tournament_archive``: write, verify,
trim past the command window through the trim script, the tombstone) on tournaments the
tournament service's model plays and its app writes (``sim.tournaments``), into a simulated
PostgreSQL, dying after the write's commit, as it sends the trim script and before the
index, PostgreSQL failing statements and Redis calls failing, breaks no invariant (nothing
trimmed before PostgreSQL holds it byte for byte with its facts, nor within the window;
archive and Redis together each tournament's whole stream; the tombstone only after the
rows; each row once); every tournament leaves Redis by the end and the service reads it back
from the archive; and each way of breaking it is seen."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sim.run import Run, run_seed
from sim.tournament_archive import TournamentArchiver
from sim.world import Probabilities

RATE = 0.3


def _violations(knob: Callable[[TournamentArchiver], None]) -> list[str]:
    def sabotage(run: Run) -> None:
        assert run.archiver is not None
        knob(run.archiver.tournaments)

    result = run_seed(31, tables=2, hands=10,
                      probabilities=replace(Probabilities(), archive=RATE),
                      sabotage=sabotage)
    assert result.first_step is not None
    return result.violations


def test_the_tournament_archiver_among_the_faults_breaks_no_invariant() -> None:
    """Seeds from 31 on, until every crash point and a failing statement have been met
    (which seed meets which follows the whole run's draws, so no one seed is pinned); each
    seed breaks no invariant and moves every tournament exactly once."""
    crashes = {"after the write's commit", "as it sent the trim script",
               "after the trim script, before the index"}
    seen: set[str] = set()
    failed = False
    for seed in range(31, 39):
        result = run_seed(seed, tables=2, hands=30,
                          probabilities=replace(Probabilities(), archive=RATE))
        assert result.violations == [], seed
        archived = result.archive
        assert archived["tournaments"] == 4
        assert archived["tournament_events"] > 300
        # Each tournament written once (a retried step writes nothing again), trimmed
        # once, and read back from the archive by the tournament service.
        assert archived["tournament_written"] == archived["tournament_trimmed"] == 4
        assert archived["tournament_read_back"] == 4
        seen |= {c for c in crashes
                 if any(f"tournament archiver crash {c}" in line for line in result.log)}
        failed = failed or any("tournament archiver step failed: OperationalError" in line
                               for line in result.log)
        if seen == crashes and failed:
            break
    assert seen == crashes, crashes - seen
    assert failed


def test_a_tournament_trimmed_before_postgresql_holds_it_is_seen() -> None:
    """A broken archiver runs the trim script first: the tournament's keys leave Redis with
    no row in PostgreSQL, seen as the script removes them."""
    def trim_first(a: TournamentArchiver) -> None:
        a.trim_first = True

    violations = _violations(trim_first)
    assert any("left Redis before PostgreSQL held it (0 of its" in v for v in violations), \
        violations[:5]


def test_a_tournament_trimmed_within_the_command_window_is_seen() -> None:
    """The archiver's clock runs a command window ahead: it trims a tournament as soon as it
    is over, while a caller's retry would still want its command record."""
    def hasty(a: TournamentArchiver) -> None:
        a.hasty = True

    violations = _violations(hasty)
    assert any("within the command window" in v for v in violations), violations[:5]
    assert not any("before PostgreSQL held it" in v for v in violations), violations[:5]


def test_a_tombstone_before_the_rows_is_seen() -> None:
    def early(a: TournamentArchiver) -> None:
        a.early_tombstone = True

    violations = _violations(early)
    assert any("its tombstone names version" in v and "PostgreSQL holds 0 events" in v
               for v in violations), violations[:5]


def test_an_event_row_the_archive_loses_is_seen() -> None:
    """The write loses its fifth event row: the archive has a gap (and the step's verify
    refuses to trim, so nothing leaves Redis)."""
    def drop(a: TournamentArchiver) -> None:
        a.db.drop_row = 5

    violations = _violations(drop)
    assert any("(a gap: [5] missing)" in v for v in violations), violations[:5]
    assert not any("left Redis" in v for v in violations), violations[:5]


def test_a_write_the_archive_holds_twice_is_seen() -> None:
    def twice(a: TournamentArchiver) -> None:
        a.db.twice = 1

    violations = _violations(twice)
    assert any("PostgreSQL holds events [1, 2, 3, 4, 5] more than once" in v
               for v in violations), violations[:5]
    assert any("tournaments.endings more than once" in v for v in violations), violations[:5]
