"""Money limits (issue 34): what a limit counts, over which rolling window, the amount in
force at a time (a raise waits its cooling-off) and how much of it a player's moves used."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Final, assert_never

from studkit.errors import FailedPrecondition

HOUR_MS: Final = 3_600_000
DAY_MS: Final = 24 * HOUR_MS
COOLING_OFF_MS: Final = DAY_MS
"""How long a raised (or removed) limit waits before it applies."""
USAGE_KEPT_MS: Final = 31 * DAY_MS
"""How long a money move is kept in the player's usage list (longer than any window)."""


@unique
class LimitKind(StrEnum):
    """What a limit counts."""

    DEPOSIT = "deposit"
    LOSS = "loss"
    WAGER = "wager"


@unique
class Window(StrEnum):
    """A rolling window: the last 24 hours, 7 × 24 hours or 30 × 24 hours before now."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"


WINDOW_MS: Final = {Window.DAY: DAY_MS, Window.WEEK: 7 * DAY_MS, Window.MONTH: 30 * DAY_MS}

LimitKey = tuple[LimitKind, Window]


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit: ``amount`` in force, and a raise waiting for ``effective_ms`` (``pending``
    0 removes the limit)."""

    amount: int
    pending: int | None = None
    effective_ms: int = 0

    def in_force(self, now_ms: int) -> int | None:
        """The amount that applies at ``now_ms`` (None: no limit)."""
        if self.pending is not None and now_ms >= self.effective_ms:
            return self.pending or None
        return self.amount

    def settled(self, now_ms: int) -> Limit | None:
        """The limit with a due raise applied (None if that removed it)."""
        if self.pending is not None and now_ms >= self.effective_ms:
            return Limit(self.pending) if self.pending else None
        return self


class LimitExceeded(FailedPrecondition):
    """A money move that would pass a limit (``deposit_limit``, ``loss_limit``,
    ``wager_limit``); ``error_metadata`` says how much is left and when the window frees
    some of it."""

    def __init__(self, kind: LimitKind, window: Window, limit: int, remaining: int,
                 resets_at_ms: int) -> None:
        super().__init__(
            f"the {window.value} {kind.value} limit of {limit} has {remaining} left; the "
            f"window frees more at {resets_at_ms} ms", reason=f"{kind.value}_limit")
        self.kind, self.window, self.limit = kind, window, limit
        self.remaining, self.resets_at_ms = remaining, resets_at_ms
        self.error_metadata = {"kind": kind.value, "window": window.value, "limit": str(limit),
                               "remaining": str(remaining), "resets_at_ms": str(resets_at_ms)}


@dataclass(frozen=True, slots=True)
class Usage:
    """One money move as the limits count it: at ``at_ms``, deposited, wagered (buy-ins,
    top-ups, entries; a refund counts back) and the change of the net loss (in minus out)."""

    at_ms: int
    deposit: int = 0
    wager: int = 0
    loss: int = 0

    def of(self, kind: LimitKind) -> int:
        """What this move adds to ``kind``."""
        match kind:
            case LimitKind.DEPOSIT:
                return self.deposit
            case LimitKind.WAGER:
                return self.wager
            case LimitKind.LOSS:
                return self.loss
            case _:
                assert_never(kind)


@dataclass(frozen=True, slots=True)
class Standing:
    """One limit as it stands at a moment: in force, used, left and when the window frees
    some (``resets_at_ms``: the oldest counted move leaves the window; ``now`` if none)."""

    kind: LimitKind
    window: Window
    limit: Limit
    in_force: int | None
    used: int
    remaining: int | None
    resets_at_ms: int


def used(usage: Sequence[Usage], kind: LimitKind, window: Window, now_ms: int
         ) -> tuple[int, int]:
    """What ``kind`` counts in the rolling ``window`` ending at ``now_ms`` (a net loss below
    zero is zero), and when the window frees some of it. A move stamped after ``now_ms``
    counts too: concurrent calls read the clock in one order and apply in another, and a
    move applied first is never outside the window of the next."""
    start = now_ms - WINDOW_MS[window]
    inside = [u for u in usage if start < u.at_ms]
    total = max(0, sum(u.of(kind) for u in inside))
    counted = [u.at_ms for u in inside if u.of(kind) > 0]
    return total, (min(counted) + WINDOW_MS[window]) if counted else now_ms
