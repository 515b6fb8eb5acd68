"""The archive step in the simulator (issue 31, ``sim.archive``): an archiver that copies
settled hands to a simulated archive and trims the tables' streams at random moments, dying
between the copy and the trim and between the verify and the trim, breaks no invariant
(nothing leaves Redis before the archive holds it; archive and stream are the whole log,
gapless; the replay of a trimmed table equals the live room); and a broken order (trim
first, copy after) is seen."""

from __future__ import annotations

from dataclasses import replace

from sim.run import Run, run_seed
from sim.world import Probabilities

RATE = 0.3


def test_the_archiver_among_the_faults_breaks_no_invariant() -> None:
    result = run_seed(31, tables=2, hands=30,
                      probabilities=replace(Probabilities(), archive=RATE))
    assert result.violations == []
    assert result.archive["trims"] > 0
    assert result.archive["trimmed"] > 200  # events that live in the archive only
    assert any("crash after the copy" in line for line in result.log)
    assert any("crash after the verify, before the trim" in line for line in result.log)


def test_the_archiver_leaves_the_run_as_it_was() -> None:
    """The tables' log (archive and stream together) is the one a run without the archiver
    writes: the archiver draws from its own random source and changes no table's course."""
    plain = run_seed(31, tables=2, hands=30)
    archived = run_seed(31, tables=2, hands=30,
                        probabilities=replace(Probabilities(), archive=RATE))
    assert plain.archive == {}
    assert archived.digest == plain.digest


def test_a_trim_before_the_copy_is_seen() -> None:
    """Each step trims first, then copies: with steps rare enough that the archive lags
    behind the hot window (a step's copy would cover its trim), events leave Redis before
    the archive holds them. The same rate in the right order passes."""
    def trim_first(run: Run) -> None:
        assert run.archiver is not None
        run.archiver.wrong_order = True

    result = run_seed(31, tables=2, hands=30,
                      probabilities=replace(Probabilities(), archive=0.03),
                      sabotage=trim_first)
    assert any(line.startswith("archive: ") and "left Redis before the archive held them"
               in line for line in result.violations), result.violations[:5]
