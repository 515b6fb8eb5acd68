"""Exclusions (issue 34): by the player (a break is a short one) or by an operator, never
shortened, an indefinite one lifted by an operator only after six months and a cooling-off."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Final

from studkit.errors import FailedPrecondition
from wallet.protection.limits import DAY_MS

INDEFINITE_MIN_MS: Final = 182 * DAY_MS
"""The least an indefinite exclusion lasts before an operator may lift it."""
LIFT_COOLING_OFF_MS: Final = DAY_MS
"""How long an operator's lift of an indefinite exclusion waits before it applies."""


@unique
class Period(StrEnum):
    """How long a self-exclusion (or a break) lasts."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    SIX_MONTHS = "six_months"
    INDEFINITE = "indefinite"


PERIOD_MS: Final[Mapping[Period, int]] = {
    Period.DAY: DAY_MS, Period.WEEK: 7 * DAY_MS, Period.MONTH: 30 * DAY_MS,
    Period.SIX_MONTHS: 182 * DAY_MS, Period.INDEFINITE: 0}
"""0: until an operator lifts it."""


@dataclass(frozen=True, slots=True)
class Exclusion:
    """An exclusion: by the player (``by`` empty) or an operator; ``until_ms`` 0 is
    indefinite; ``lift_ms`` is when an operator's lift applies (0: none)."""

    started_ms: int
    until_ms: int
    by: str = ""
    reason: str = ""
    lift_ms: int = 0

    def active(self, now_ms: int) -> bool:
        """Whether it stops play at ``now_ms``."""
        if self.lift_ms and now_ms >= self.lift_ms:
            return False
        return self.until_ms == 0 or now_ms < self.until_ms

    @property
    def refusal(self) -> str:
        """The reason a refused move carries."""
        return "operator_excluded" if self.by else "self_excluded"


class Excluded(FailedPrecondition):
    """A deposit, buy-in or entry of an excluded player (``self_excluded`` or
    ``operator_excluded``)."""

    def __init__(self, reason: str, until_ms: int) -> None:
        until = "until an operator lifts it" if until_ms == 0 else f"until {until_ms} ms"
        super().__init__(f"the account is excluded from play {until}", reason=reason)
        self.until_ms = until_ms
        self.error_metadata = {"until_ms": str(until_ms)}


def until(period: Period, now_ms: int) -> int:
    """When an exclusion for ``period`` from ``now_ms`` ends (0: indefinitely)."""
    span = PERIOD_MS[period]
    return now_ms + span if span else 0


def extends(current: Exclusion | None, until_ms: int, now_ms: int) -> bool:
    """A new exclusion is recorded unless one already active lasts as long or longer (an
    exclusion is never shortened, not even by excluding again for less)."""
    if current is None or not current.active(now_ms):
        return True
    if current.until_ms == 0 and not current.lift_ms:
        return False
    return until_ms == 0 or until_ms > current.until_ms
