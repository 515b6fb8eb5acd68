"""Player protection's commands (issue 34), imperative: what a player or an operator asks."""

from __future__ import annotations

from dataclasses import dataclass

from wallet.protection.exclusion import Period
from wallet.protection.limits import LimitKind, Window


@dataclass(frozen=True, slots=True, kw_only=True)
class SetLimit:
    """Set, lower, raise (``amount`` above the current one) or remove (``amount`` 0)."""

    player_id: str
    kind: LimitKind
    window: Window
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelLimitIncrease:
    """Withdraw a raise that has not taken effect."""

    player_id: str
    kind: LimitKind
    window: Window


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfExclude:
    """The player excludes themself for ``period``."""

    player_id: str
    period: Period


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcludePlayer:
    """An operator excludes a player, with a reason."""

    player_id: str
    period: Period
    reason: str
    operator: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LiftExclusion:
    """An operator lifts an indefinite exclusion (after six months; applies 24 h later)."""

    player_id: str
    reason: str
    operator: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetRealityCheck:
    """A reminder every ``minutes`` of play, with the session's time and net result (0:
    none)."""

    player_id: str
    minutes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SetSessionLimit:
    """A session time limit of ``minutes`` (0: none): a first or lower one at once, a higher
    one (or none) after the cooling-off."""

    player_id: str
    minutes: int


ProtectionCommand = (SetLimit | CancelLimitIncrease | SelfExclude | ExcludePlayer
                     | LiftExclusion | SetRealityCheck | SetSessionLimit)
