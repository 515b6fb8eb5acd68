"""What each simulated part of the archiver process keeps of its run (the tables' step,
``sim.archive``; the wallet's ledger's, ``sim.ledger_archive``; the tournaments',
``sim.tournament_archive``): its log, its step, crash and failure counts, and the
violations its checks found, each reported once and kept until the run takes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.world import World


class ArchiverPart:
    """The log, the counts and the found violations of one part of the archiver."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.steps = self.crashes = self.failed = 0
        self.log: list[str] = []
        self.found: list[str] = []
        """Violations seen between the run's steps, not yet taken."""
        self._reported: set[str] = set()

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
