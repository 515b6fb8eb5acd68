"""A tournament's structure: the levels of stakes on a clock, and the breaks (pure, no I/O).

A level is the four stakes of RULES 2.5 (ante, bring-in, small bet, big bet) and a length in
seconds; every level's stakes must pass RULES 2.3 (checked by the rules' own ``TableConfig``).
A break of ``break_seconds`` follows every ``break_every`` levels (0: no breaks). The clock is
the schedule from the start: level 1 starts at the start, each next level (or the break before
it) when the previous ends; the clock never stops (hand for hand does not stop it). The last
level of a ladder repeats its stakes for ever.

The default ladder (20-minute levels, modelled on the big live series) starts
100/200/500/1000, 200/200/800/1600, 300/400/1200/2400 (ante/bring-in/small/big) and goes on
doubling roughly every two levels; a break of 10 minutes every 4 levels. The turbo preset is
the same ladder at 6-minute levels with a 5-minute break every 8 levels.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.config import TableConfig
from rules.errors import RuleViolation
from studkit.errors import BadRequest


@dataclass(frozen=True, slots=True)
class Level:
    ante: int
    bring_in: int
    small_bet: int
    big_bet: int
    seconds: int

    def check(self, index: int) -> None:
        """Raise ``BadRequest`` unless the stakes pass RULES 2.3 and the length is positive."""
        field = f"levels[{index}]"
        if not isinstance(self.seconds, int) or self.seconds <= 0:
            raise BadRequest(field, "a level lasts a whole positive number of seconds")
        try:
            TableConfig(ante=self.ante, bring_in=self.bring_in, small_bet=self.small_bet,
                        big_bet=self.big_bet)
        except RuleViolation as exc:
            raise BadRequest(field, str(exc), reason="invalid_stakes") from exc


@dataclass(frozen=True, slots=True)
class Structure:
    levels: tuple[Level, ...]
    starting_stack: int
    break_every: int = 0
    break_seconds: int = 0

    def __post_init__(self) -> None:
        if not self.levels:
            raise BadRequest("levels", "at least one level")
        for i, level in enumerate(self.levels):
            level.check(i)
        if not isinstance(self.starting_stack, int) or self.starting_stack <= 0:
            raise BadRequest("starting_stack", "a positive whole number of chips")
        if self.break_every < 0 or self.break_seconds < 0:
            raise BadRequest("break_every", "breaks cannot be negative")
        if self.break_every > 0 and self.break_seconds == 0:
            raise BadRequest("break_seconds", "a break needs a length")

    def level(self, number: int) -> Level:
        """Level ``number`` (1-based); past the ladder's end, its last level."""
        if number < 1:
            raise ValueError("levels count from 1")
        return self.levels[min(number, len(self.levels)) - 1]

    def break_after(self, number: int) -> bool:
        """Whether a break follows level ``number``."""
        return self.break_every > 0 and number % self.break_every == 0


@dataclass(frozen=True, slots=True)
class Clock:
    """Where the schedule is at one instant: ``level`` (1-based), ``on_break`` (the break
    after ``level``), and when the current period ends (``ends_at``, seconds)."""

    level: int
    on_break: bool
    ends_at: float


def clock_at(structure: Structure, started_at: float, now: float) -> Clock:
    """The schedule at ``now`` for a tournament started at ``started_at``: a pure function of
    the structure and two instants, so every replica and every replay sees the same clock."""
    level, t = 1, started_at
    while True:
        t += structure.level(level).seconds
        if now < t:
            return Clock(level, False, t)
        if structure.break_after(level):
            t += structure.break_seconds
            if now < t:
                return Clock(level, True, t)
        level += 1


def period_end(structure: Structure, started_at: float, level: int, on_break: bool) -> float:
    """When the schedule ends level ``level`` (``on_break``: the break after it) of a
    tournament started at ``started_at``: the end of the period the log is in, whatever the
    time now (``GetTournament`` shows the log's level with this end, never the end of a
    period the process manager has not yet recorded)."""
    t = started_at
    for number in range(1, level):
        t += structure.level(number).seconds
        if structure.break_after(number):
            t += structure.break_seconds
    t += structure.level(level).seconds
    return t + structure.break_seconds if on_break else t


def _ladder(seconds: int) -> tuple[Level, ...]:
    stakes = (
        (100, 200, 500, 1000), (200, 200, 800, 1600), (300, 400, 1200, 2400),
        (400, 500, 1500, 3000), (500, 600, 2000, 4000), (1000, 1000, 3000, 6000),
        (1000, 1500, 4000, 8000), (2000, 2000, 6000, 12000), (2000, 3000, 8000, 16000),
        (3000, 4000, 10000, 20000), (4000, 5000, 15000, 30000), (5000, 8000, 20000, 40000),
        (10000, 10000, 30000, 60000), (10000, 15000, 40000, 80000),
        (20000, 20000, 60000, 120000), (20000, 30000, 80000, 160000),
    )
    return tuple(Level(a, b, s, g, seconds) for a, b, s, g in stakes)


DEFAULT = Structure(levels=_ladder(20 * 60), starting_stack=20000, break_every=4,
                    break_seconds=10 * 60)
"""The default ladder: 20-minute levels, a 10-minute break every 4 levels, 20,000 chips."""

TURBO = Structure(levels=_ladder(6 * 60), starting_stack=20000, break_every=8,
                  break_seconds=5 * 60)
"""The turbo preset: the same stakes at 6-minute levels, a 5-minute break every 8 levels."""

PRESETS = {"default": DEFAULT, "turbo": TURBO}
