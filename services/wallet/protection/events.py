"""Player protection's events (issue 34), past tense; each carries the time it was decided
(``at_ms``), and one that waits a cooling-off the time it takes effect (``effective_ms``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from wallet.protection.exclusion import Period
from wallet.protection.limits import LimitKind, Window


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitSet:
    """A first limit for (kind, window), in force at once."""

    at_ms: int
    kind: LimitKind
    window: Window
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitDecreased:
    """A lower limit, in force at once (a waiting raise is dropped)."""

    at_ms: int
    kind: LimitKind
    window: Window
    amount: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitIncreaseRequested:
    """A higher limit (``amount`` 0: none), in force from ``effective_ms``."""

    at_ms: int
    kind: LimitKind
    window: Window
    amount: int
    effective_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitIncreaseCancelled:
    """A waiting raise withdrawn."""

    at_ms: int
    kind: LimitKind
    window: Window


@dataclass(frozen=True, slots=True, kw_only=True)
class SelfExcluded:
    """The player excluded themself until ``until_ms`` (0: indefinitely)."""

    at_ms: int
    period: Period
    until_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayerExcluded:
    """An operator excluded the player until ``until_ms`` (0: indefinitely), with a reason."""

    at_ms: int
    period: Period
    until_ms: int
    operator: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExclusionLiftRequested:
    """An operator lifted an indefinite exclusion, in force from ``effective_ms``."""

    at_ms: int
    operator: str
    reason: str
    effective_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RealityCheckSet:
    """The player asked for a reminder every ``minutes`` of play (0: none)."""

    at_ms: int
    minutes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionLimitSet:
    """A session time limit of ``minutes`` (0: none), in force from ``effective_ms`` (its
    ``at_ms`` for a first or lower one)."""

    at_ms: int
    minutes: int
    effective_ms: int


ProtectionEvent = (LimitSet | LimitDecreased | LimitIncreaseRequested | LimitIncreaseCancelled
                   | SelfExcluded | PlayerExcluded | ExclusionLiftRequested | RealityCheckSet
                   | SessionLimitSet)
EVENT_TYPES: Final[Mapping[str, type[ProtectionEvent]]] = {
    cls.__name__: cls for cls in (LimitSet, LimitDecreased, LimitIncreaseRequested,
                                  LimitIncreaseCancelled, SelfExcluded, PlayerExcluded,
                                  ExclusionLiftRequested, RealityCheckSet, SessionLimitSet)}
"""Every event type by its stored name (the codec's ``type``)."""
