"""Player protection as pure functions (issue 34): limits, self-exclusion and breaks.

A player's protection is an event-sourced aggregate of its own (its stream
``stud:wallet:{wallet}:protection:<player>``): ``decide(state, command, now_ms)`` returns
events, ``evolve`` folds them. The clock is data: every event carries the time it was
decided (``at_ms``) and a raise carries the time it takes effect (``effective_ms``); nothing
sleeps, and :func:`Limit.in_force` answers for any ``now``. A restart or a second wallet
changes nothing.

- **Limits** per (kind, window): a deposit limit, a loss limit (net of what went in to tables
  and tournaments and what came back) and a wager limit (buy-ins, top-ups and tournament
  entries), each over a rolling day (24 h), week (7 × 24 h) or month (30 × 24 h). A first
  limit (``LimitSet``) and a lower one (``LimitDecreased``) apply at once; a higher one, or
  removing one, is ``LimitIncreaseRequested`` and applies 24 hours later with no further
  action unless cancelled (``LimitIncreaseCancelled``). Every limit that applies is checked:
  the lowest remaining wins.
- **Exclusion**: ``SelfExcluded`` for a day, a week, a month, six months or indefinitely (a
  break is a short self-exclusion); ``PlayerExcluded`` by an operator, with a reason. While
  one is active, no deposit, buy-in, top-up or tournament entry is accepted. A timed
  exclusion cannot be lifted early by anyone; an indefinite one can be lifted by an operator
  after six months, and the lift takes effect after 24 hours of cooling-off
  (``ExclusionLiftRequested``).

Enforcement happens in ``apply.lua`` with the money move (one script): this module also
builds what it needs (:func:`projection`, :func:`rule_for`) and the same check in Python
(:func:`check`), which the tests compare with the script.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum, unique
from typing import Any, Final, assert_never

from studkit.errors import BadRequest, FailedPrecondition
from wallet.model import MAX_AMOUNT, AccountKind, TxKind
from wallet.transaction import Transaction

HOUR_MS: Final = 3_600_000
DAY_MS: Final = 24 * HOUR_MS
COOLING_OFF_MS: Final = DAY_MS
"""How long a raised (or removed) limit waits before it applies."""
INDEFINITE_MIN_MS: Final = 182 * DAY_MS
"""The least an indefinite exclusion lasts before an operator may lift it."""
LIFT_COOLING_OFF_MS: Final = DAY_MS
"""How long an operator's lift of an indefinite exclusion waits before it applies."""
USAGE_KEPT_MS: Final = 31 * DAY_MS
"""How long a money move is kept in the player's usage list (longer than any window)."""
MAX_REASON: Final = 500


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


class ProtectionRefused(FailedPrecondition):
    """A protection command the player's state forbids now (``no_pending_increase``,
    ``not_excluded``, ``exclusion_active``)."""


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


class Excluded(FailedPrecondition):
    """A deposit, buy-in or entry of an excluded player (``self_excluded`` or
    ``operator_excluded``)."""

    def __init__(self, reason: str, until_ms: int) -> None:
        until = "until an operator lifts it" if until_ms == 0 else f"until {until_ms} ms"
        super().__init__(f"the account is excluded from play {until}", reason=reason)
        self.until_ms = until_ms
        self.error_metadata = {"until_ms": str(until_ms)}


# --- state ----------------------------------------------------------------------------------


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


LimitKey = tuple[LimitKind, Window]


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


# --- commands and events --------------------------------------------------------------------


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
MAX_REALITY_CHECK_MINUTES: Final = 24 * 60
MAX_SESSION_MINUTES: Final = 24 * 60
SESSION_GAP_MS: Final = 30 * 60_000
"""A session ends after this long with no buy-in and no settled hand of the player."""


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
EVENT_TYPES: Final[Mapping[str, type[Any]]] = {
    cls.__name__: cls for cls in (LimitSet, LimitDecreased, LimitIncreaseRequested,
                                  LimitIncreaseCancelled, SelfExcluded, PlayerExcluded,
                                  ExclusionLiftRequested, RealityCheckSet, SessionLimitSet)}


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
            until = _until(command.period, now_ms)
            if not _extends(state.exclusion, until, now_ms):
                return ()
            return (SelfExcluded(at_ms=now_ms, period=command.period, until_ms=until),)
        case ExcludePlayer():
            reason = _reason(command.reason)
            until = _until(command.period, now_ms)
            if not _extends(state.exclusion, until, now_ms):
                return ()
            return (PlayerExcluded(at_ms=now_ms, period=command.period, until_ms=until,
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


def _until(period: Period, now_ms: int) -> int:
    span = PERIOD_MS[period]
    return now_ms + span if span else 0


def _extends(current: Exclusion | None, until_ms: int, now_ms: int) -> bool:
    """A new exclusion is recorded unless one already active lasts as long or longer (an
    exclusion is never shortened, not even by excluding again for less)."""
    if current is None or not current.active(now_ms):
        return True
    if current.until_ms == 0 and not current.lift_ms:
        return False
    return until_ms == 0 or until_ms > current.until_ms


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


def event_to_json(event: ProtectionEvent) -> str:
    """The stored form of an event (``type`` plus its fields)."""
    body: dict[str, Any] = {"type": type(event).__name__}
    for name in event.__dataclass_fields__:
        value = getattr(event, name)
        body[name] = value.value if isinstance(value, StrEnum) else value
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def event_from_json(text: str) -> ProtectionEvent:
    """The inverse of :func:`event_to_json`."""
    body = json.loads(text)
    cls = EVENT_TYPES[body.pop("type")]
    kinds = {"kind": LimitKind, "window": Window, "period": Period}
    fields = {k: kinds[k](v) if k in kinds else v for k, v in body.items()}
    event: ProtectionEvent = cls(**fields)
    return event


def projection(state: Protection) -> str:
    """What ``apply.lua`` reads of a player's protection (amounts as decimal strings)."""
    limits = {
        f"{kind.value}:{window.value}": {
            "amount": str(limit.amount),
            "pending": "" if limit.pending is None else str(limit.pending),
            "effective_ms": str(limit.effective_ms)}
        for (kind, window), limit in state.limits.items()}
    body: dict[str, Any] = {"limits": limits}
    if state.session_limit is not None:
        s = state.session_limit
        body["session_limit"] = {
            "amount": str(s.amount), "pending": "" if s.pending is None else str(s.pending),
            "effective_ms": str(s.effective_ms)}
    if state.exclusion is not None:
        e = state.exclusion
        body["exclusion"] = {"until_ms": str(e.until_ms), "lift_ms": str(e.lift_ms),
                             "reason": e.refusal}
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def excluded_in(projected: str, now_ms: int) -> bool:
    """Whether a :func:`projection` says the player is excluded at ``now_ms`` (the rule
    ``apply.lua`` applies to it)."""
    exclusion = json.loads(projected).get("exclusion")
    if not exclusion:
        return False
    lift, until = int(exclusion["lift_ms"]), int(exclusion["until_ms"])
    return not (lift and now_ms >= lift) and (until == 0 or now_ms < until)


# --- the check with a money move ------------------------------------------------------------


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
class ProtectRule:
    """What ``apply.lua`` checks and records for one transaction: the limits of ``checks``
    (and the exclusion when ``blocked``) against the player's usage, then ``usage``; with
    ``session`` (a buy-in), the session time limit too, and the player's session goes on or
    starts (:func:`seen`), in the same script."""

    player_id: str
    checks: tuple[LimitKind, ...]
    blocked: bool
    usage: Usage
    session: bool = False


def rule_for(transaction: Transaction, now_ms: int) -> ProtectRule | None:
    """The protection rule of a transaction: deposits, buy-ins (top-ups too) and tournament
    entries are checked and counted (a buy-in against the session time limit too, which
    tournament entries are not); cash-outs, refunds and prizes are counted (they lower
    the net loss, a refund the wager too); withdrawals and settlements are neither."""
    players = [p for p in transaction.postings if p.account.kind is AccountKind.PLAYER]
    if len(players) != 1:
        return None
    posting = players[0]
    player, moved = posting.account.player_id, abs(posting.amount)
    match transaction.kind:
        case TxKind.DEPOSIT:
            return ProtectRule(player, (LimitKind.DEPOSIT,), True, Usage(now_ms, deposit=moved))
        case TxKind.BUY_IN:
            return ProtectRule(player, (LimitKind.WAGER, LimitKind.LOSS), True,
                               Usage(now_ms, wager=moved, loss=moved), session=True)
        case TxKind.TOURNAMENT_ENTRY:
            return ProtectRule(player, (LimitKind.WAGER, LimitKind.LOSS), True,
                               Usage(now_ms, wager=moved, loss=moved))
        case TxKind.CASH_OUT | TxKind.PRIZE:
            return ProtectRule(player, (), False, Usage(now_ms, loss=-moved))
        case TxKind.ENTRY_REFUND:
            return ProtectRule(player, (), False, Usage(now_ms, wager=-moved, loss=-moved))
        case TxKind.WITHDRAWAL | TxKind.SETTLEMENT:
            return None
        case _:
            assert_never(transaction.kind)


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
    zero is zero), and when the window frees some of it."""
    start = now_ms - WINDOW_MS[window]
    inside = [u for u in usage if start < u.at_ms <= now_ms]
    total = max(0, sum(u.of(kind) for u in inside))
    counted = [u.at_ms for u in inside if u.of(kind) > 0]
    return total, (min(counted) + WINDOW_MS[window]) if counted else now_ms


def standings(state: Protection, usage: Sequence[Usage], now_ms: int) -> tuple[Standing, ...]:
    """Every limit of ``state`` at ``now_ms``, in kind and window order."""
    rows = []
    for kind in LimitKind:
        for window in Window:
            limit = state.limits.get((kind, window))
            if limit is None:
                continue
            amount = limit.in_force(now_ms)
            total, resets = used(usage, kind, window, now_ms)
            left = None if amount is None else max(0, amount - total)
            rows.append(Standing(kind, window, limit, amount, total, left, resets))
    return tuple(rows)


def check(state: Protection, usage: Sequence[Usage], rule: ProtectRule, now_ms: int) -> None:
    """The refusal ``apply.lua`` gives (the same rule in Python): an active exclusion first,
    then, among the limits a move would pass, the one with the least left (the first in
    ``rule.checks`` order, then day, week, month, on a tie)."""
    if rule.blocked and state.exclusion is not None and state.exclusion.active(now_ms):
        raise Excluded(state.exclusion.refusal, state.exclusion.until_ms)
    worst: LimitExceeded | None = None
    rows = [row for row in standings(state, usage, now_ms) if row.kind in rule.checks]
    for row in sorted(rows, key=lambda row: rule.checks.index(row.kind)):  # the script's order
        if row.in_force is None or row.remaining is None:
            continue
        if row.used + rule.usage.of(row.kind) > row.in_force and (
                worst is None or row.remaining < worst.remaining):
            worst = LimitExceeded(row.kind, row.window, row.in_force, row.remaining,
                                  row.resets_at_ms)
    if worst is not None:
        raise worst


@dataclass(frozen=True, slots=True)
class RealityCheck:
    """A reminder: how long the session has lasted and its net result (money back from
    tables and tournaments less money put in since it started; chips still at a table
    count as put in)."""

    at_ms: int
    session_ms: int
    net_result: int
    interval_minutes: int


def reality_check(usage: Sequence[Usage], started_ms: int, now_ms: int, minutes: int
                  ) -> RealityCheck:
    """The reminder at ``now_ms`` of a session that started at ``started_ms``."""
    net = -sum(u.loss for u in usage if started_ms <= u.at_ms <= now_ms)
    return RealityCheck(now_ms, now_ms - started_ms, net, minutes)


def usage_to_text(usage: Usage) -> str:
    """A usage list entry: ``<at_ms>:<deposit>:<wager>:<loss>``."""
    return f"{usage.at_ms}:{usage.deposit}:{usage.wager}:{usage.loss}"


def usage_from_text(text: str) -> Usage:
    """The inverse of :func:`usage_to_text`."""
    at, deposit, wager, loss = (int(part) for part in text.split(":"))
    return Usage(at, deposit, wager, loss)


# --- sessions (a session time limit) --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Session:
    """A player's session: started at ``started_ms`` (a buy-in or a settled hand after at
    least :data:`SESSION_GAP_MS` without either), last seen at ``last_ms`` (the latest
    buy-in or settled hand). Data, never a timer: whether it goes on is asked at a time."""

    started_ms: int
    last_ms: int

    def ongoing(self, now_ms: int) -> bool:
        """Whether the session still runs at ``now_ms`` (seen less than the gap before)."""
        return now_ms - self.last_ms < SESSION_GAP_MS

    def to_text(self) -> str:
        """The stored form, ``<started_ms>:<last_ms>``."""
        return f"{self.started_ms}:{self.last_ms}"

    @staticmethod
    def from_text(text: str) -> Session:
        """The inverse of :meth:`to_text`."""
        started, last = (int(part) for part in text.split(":"))
        return Session(started, last)


def seen(session: Session | None, now_ms: int) -> Session:
    """The session after a buy-in or a settled hand at ``now_ms``: the same one, seen now,
    or a new one when none runs."""
    if session is None or not session.ongoing(now_ms):
        return Session(now_ms, now_ms)
    return Session(session.started_ms, max(session.last_ms, now_ms))


def exclusion_reason(projected: str | None) -> str:
    """The refusal reason of the exclusion a :func:`projection` holds (``self_excluded``
    when it holds none)."""
    exclusion = json.loads(projected).get("exclusion") if projected else None
    return str(exclusion["reason"]) if exclusion else "self_excluded"


def session_limit_in(projected: str | None, now_ms: int) -> int:
    """The session limit in minutes a :func:`projection` holds in force at ``now_ms`` (0:
    none)."""
    raw = json.loads(projected).get("session_limit") if projected else None
    if not raw:
        return 0
    limit = Limit(int(raw["amount"]), int(raw["pending"]) if raw["pending"] else None,
                  int(raw["effective_ms"]))
    return limit.in_force(now_ms) or 0


def session_ends_at(minutes: int, session: Session | None, now_ms: int) -> int:
    """When the player's running session reaches a session limit of ``minutes`` (0: no
    limit, or no session running at ``now_ms``): from then no new hand is dealt to them and
    a buy-in is refused ``session_limit``."""
    if not minutes or session is None or not session.ongoing(now_ms):
        return 0
    return session.started_ms + minutes * 60_000


class SessionLimitReached(FailedPrecondition):
    """A buy-in after the player's session limit (``session_limit``)."""

    def __init__(self, started_ms: int, ended_ms: int) -> None:
        super().__init__(
            f"the session that started at {started_ms} ms reached its time limit at "
            f"{ended_ms} ms; a new one may start {SESSION_GAP_MS // 60_000} minutes after the "
            "last hand", reason="session_limit")
        self.error_metadata = {"session_started_ms": str(started_ms),
                               "ended_ms": str(ended_ms)}
