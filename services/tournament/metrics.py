"""The tournament service's domain metrics (docs/operations.md "Metrics"), none labelled by a
tournament or a player: registrations accepted, and the tournaments this replica conducts
that are running and in hand-for-hand play (as its process manager last loaded them; a
tournament whose lease this replica no longer holds is not counted)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from studkit.metrics import Metrics
from tournament.state import RUNNING, Tournament

REGISTRATIONS = Counter("stud_tournament_registrations", "Registrations accepted.",
                        registry=None)


class TournamentGauges(Collector):
    """``stud_tournament_running`` and ``stud_tournament_hand_for_hand``, from what
    :meth:`seen` was last told of each tournament ``held()`` names."""

    def __init__(self) -> None:
        self.states: dict[str, tuple[bool, bool]] = {}
        self.held: Callable[[], Collection[str]] | None = None

    def seen(self, t: Tournament, over: bool) -> None:
        """Note a tournament as the process manager loaded it (``over``: forget it)."""
        if over:
            self.states.pop(t.tournament_id, None)
        else:
            self.states[t.tournament_id] = (t.phase == RUNNING, t.hand_for_hand)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        held = self.held() if self.held is not None else None
        states = [s for tid, s in list(self.states.items()) if held is None or tid in held]
        yield GaugeMetricFamily("stud_tournament_running", "Tournaments this replica "
                                "conducts that are running.", value=sum(r for r, _ in states))
        yield GaugeMetricFamily("stud_tournament_hand_for_hand", "Running tournaments of "
                                "this replica in hand-for-hand play.",
                                value=sum(r and h for r, h in states))


GAUGES = TournamentGauges()
"""The process's (its process manager feeds it)."""


def register(metrics: Metrics, held: Callable[[], Collection[str]]) -> None:
    """The tournament's families on ``metrics``' registry; ``held()``: the tournaments this
    replica holds."""
    GAUGES.held = held
    for collector in (REGISTRATIONS, GAUGES):
        with contextlib.suppress(ValueError):  # already there
            metrics.registry.register(collector)
