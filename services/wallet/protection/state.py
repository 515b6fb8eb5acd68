"""A player's protection state (issue 34), folded from their events: ``evolve`` is total
over every event type."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import assert_never

from wallet.protection.events import (
    ExclusionLiftRequested,
    LimitDecreased,
    LimitIncreaseCancelled,
    LimitIncreaseRequested,
    LimitSet,
    PlayerExcluded,
    ProtectionEvent,
    RealityCheckSet,
    SelfExcluded,
    SessionLimitSet,
)
from wallet.protection.exclusion import Exclusion
from wallet.protection.limits import Limit, LimitKey


@dataclass(frozen=True, slots=True)
class Protection:
    """A player's limits and exclusion, folded from their events."""

    limits: Mapping[LimitKey, Limit] = field(default_factory=dict)
    exclusion: Exclusion | None = None
    version: int = 0
    reality_check_minutes: int = 0
    """A reminder every that many minutes of play (0: none)."""
    session_limit: Limit | None = None
    """The session time limit in minutes (a raise waits its cooling-off, as a limit's)."""


def evolve(state: Protection, event: ProtectionEvent) -> Protection:
    """``state`` after ``event`` (a raise due at ``event.at_ms`` is applied first)."""
    limits = dict(state.limits)
    version = state.version + 1
    match event:
        case LimitSet() | LimitDecreased():
            limits[(event.kind, event.window)] = Limit(event.amount)
        case LimitIncreaseRequested():
            key = (event.kind, event.window)
            current = limits[key].settled(event.at_ms) if key in limits else None
            if current is not None:
                limits[key] = Limit(current.amount, event.amount, event.effective_ms)
        case LimitIncreaseCancelled():
            key = (event.kind, event.window)
            if key in limits:
                limits[key] = Limit(limits[key].amount)
        case SelfExcluded():
            return replace(state, version=version, exclusion=Exclusion(event.at_ms,
                                                                       event.until_ms))
        case PlayerExcluded():
            return replace(state, version=version, exclusion=Exclusion(
                event.at_ms, event.until_ms, by=event.operator, reason=event.reason))
        case RealityCheckSet():
            return replace(state, version=version, reality_check_minutes=event.minutes)
        case SessionLimitSet():
            if event.effective_ms <= event.at_ms:
                return replace(state, version=version,
                               session_limit=Limit(event.minutes) if event.minutes else None)
            current = (state.session_limit.settled(event.at_ms)
                       if state.session_limit is not None else None)
            return replace(state, version=version, session_limit=None if current is None
                           else Limit(current.amount, event.minutes, event.effective_ms))
        case ExclusionLiftRequested():
            if state.exclusion is not None:
                return replace(state, version=version, exclusion=replace(
                    state.exclusion, lift_ms=event.effective_ms))
            return replace(state, version=version)
        case _:
            assert_never(event)
    return replace(state, limits=limits, version=version)


def fold(events: Iterable[ProtectionEvent]) -> Protection:
    """The protection state after ``events``."""
    state = Protection()
    for event in events:
        state = evolve(state, event)
    return state
