"""Player protection's ``decide`` (issue 34): the events of a command at a time, or a
refusal. A first or lower limit applies at once, a raise waits its cooling-off, an exclusion
is never shortened, an indefinite one is lifted by an operator only."""

from __future__ import annotations

from typing import Final, assert_never

from studkit.errors import BadRequest, FailedPrecondition
from wallet.model import MAX_AMOUNT
from wallet.protection.commands import (
    CancelLimitIncrease,
    ExcludePlayer,
    LiftExclusion,
    ProtectionCommand,
    SelfExclude,
    SetLimit,
    SetRealityCheck,
    SetSessionLimit,
)
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
from wallet.protection.exclusion import INDEFINITE_MIN_MS, LIFT_COOLING_OFF_MS, extends, until
from wallet.protection.limits import COOLING_OFF_MS
from wallet.protection.sessions import MAX_REALITY_CHECK_MINUTES, MAX_SESSION_MINUTES
from wallet.protection.state import Protection

MAX_REASON: Final = 500


class ProtectionRefused(FailedPrecondition):
    """A protection command the player's state forbids now (``no_pending_increase``,
    ``not_excluded``, ``exclusion_active``)."""


def _amount(value: int) -> int:
    if value < 0:
        raise BadRequest("amount", f"must be >= 0, got {value}", reason="negative_amount")
    if value > MAX_AMOUNT:
        raise BadRequest("amount", f"must be <= {MAX_AMOUNT}", reason="amount_too_large")
    return value


def _reason(value: str) -> str:
    if not value.strip() or len(value) > MAX_REASON:
        raise BadRequest("reason", f"must be 1..{MAX_REASON} characters, not blank")
    return value


def decide(state: Protection, command: ProtectionCommand, now_ms: int
           ) -> tuple[ProtectionEvent, ...]:
    """The events of ``command`` at ``now_ms`` (none when it changes nothing: a repeated
    request), or a refusal."""
    match command:
        case SetLimit():
            return _decide_set(state, command, now_ms)
        case CancelLimitIncrease():
            limit = state.limits.get((command.kind, command.window))
            if limit is None or limit.settled(now_ms) is not limit or limit.pending is None:
                raise ProtectionRefused(f"no raise of the {command.window.value} "
                                        f"{command.kind.value} limit is waiting",
                                        reason="no_pending_increase")
            return (LimitIncreaseCancelled(at_ms=now_ms, kind=command.kind,
                                           window=command.window),)
        case SelfExclude():
            ends = until(command.period, now_ms)
            if not extends(state.exclusion, ends, now_ms):
                return ()
            return (SelfExcluded(at_ms=now_ms, period=command.period, until_ms=ends),)
        case ExcludePlayer():
            reason = _reason(command.reason)
            ends = until(command.period, now_ms)
            if not extends(state.exclusion, ends, now_ms):
                return ()
            return (PlayerExcluded(at_ms=now_ms, period=command.period, until_ms=ends,
                                   operator=command.operator, reason=reason),)
        case LiftExclusion():
            return _decide_lift(state, command, now_ms)
        case SetRealityCheck():
            if not 0 <= command.minutes <= MAX_REALITY_CHECK_MINUTES:
                raise BadRequest("interval_minutes",
                                 f"must be 0..{MAX_REALITY_CHECK_MINUTES}")
            if command.minutes == state.reality_check_minutes:
                return ()
            return (RealityCheckSet(at_ms=now_ms, minutes=command.minutes),)
        case SetSessionLimit():
            return _decide_session_limit(state, command.minutes, now_ms)
        case _:
            assert_never(command)


def _decide_session_limit(state: Protection, minutes: int, now_ms: int
                          ) -> tuple[ProtectionEvent, ...]:
    if not 0 <= minutes <= MAX_SESSION_MINUTES:
        raise BadRequest("minutes", f"must be 0..{MAX_SESSION_MINUTES}")
    limit = state.session_limit.settled(now_ms) if state.session_limit is not None else None
    if limit is None:
        return (SessionLimitSet(at_ms=now_ms, minutes=minutes, effective_ms=now_ms),) \
            if minutes else ()
    if minutes and minutes < limit.amount:
        return (SessionLimitSet(at_ms=now_ms, minutes=minutes, effective_ms=now_ms),)
    if minutes == limit.amount or (limit.pending is not None and minutes == limit.pending):
        return ()  # unchanged, or the same raise again: its effective time stands
    return (SessionLimitSet(at_ms=now_ms, minutes=minutes,
                            effective_ms=now_ms + COOLING_OFF_MS),)



def _decide_set(state: Protection, command: SetLimit, now_ms: int
                ) -> tuple[ProtectionEvent, ...]:
    amount = _amount(command.amount)
    key = (command.kind, command.window)
    stored = state.limits.get(key)
    limit = stored.settled(now_ms) if stored is not None else None
    kind, window = command.kind, command.window
    if limit is None:
        return (LimitSet(at_ms=now_ms, kind=kind, window=window, amount=amount),) \
            if amount else ()
    if amount and amount < limit.amount:
        return (LimitDecreased(at_ms=now_ms, kind=kind, window=window, amount=amount),)
    if amount == limit.amount or (limit.pending is not None and amount == limit.pending):
        return ()  # unchanged, or the same raise again: its effective time stands
    return (LimitIncreaseRequested(at_ms=now_ms, kind=kind, window=window, amount=amount,
                                   effective_ms=now_ms + COOLING_OFF_MS),)


def _decide_lift(state: Protection, command: LiftExclusion, now_ms: int
                 ) -> tuple[ProtectionEvent, ...]:
    reason = _reason(command.reason)
    exclusion = state.exclusion
    if exclusion is None or not exclusion.active(now_ms):
        raise ProtectionRefused(f"player {command.player_id} is not excluded",
                                reason="not_excluded")
    if exclusion.until_ms:
        raise ProtectionRefused(f"the exclusion ends at {exclusion.until_ms} ms and cannot be "
                                "lifted before", reason="exclusion_active")
    if now_ms < exclusion.started_ms + INDEFINITE_MIN_MS:
        raise ProtectionRefused(
            "an indefinite exclusion can be lifted from "
            f"{exclusion.started_ms + INDEFINITE_MIN_MS} ms", reason="exclusion_active")
    if exclusion.lift_ms:
        return ()
    return (ExclusionLiftRequested(at_ms=now_ms, operator=command.operator, reason=reason,
                                   effective_ms=now_ms + LIFT_COOLING_OFF_MS),)
