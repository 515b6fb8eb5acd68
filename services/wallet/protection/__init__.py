"""Player protection as pure functions (issue 34): limits, self-exclusion and breaks,
sessions and reality checks. This package is the public surface; its modules hold one idea
each and do no I/O (no Redis, no gRPC, no clock: time is an argument).

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

- **Sessions**: a player's play at cash tables, as data (``Session``, ``seen``); a session
  time limit ends one, a reality check reports on one.

Enforcement happens in ``apply.lua`` with the money move (one script): this package also
builds what it needs (:func:`projection`, :func:`rule_for`) and the same check in Python
(:func:`check`), which the tests compare with the script.

Modules: ``limits`` (kinds, windows, a limit in force, usage), ``exclusion`` (periods, an
exclusion's rules), ``sessions`` (sessions, the session limit, reality checks),
``commands``, ``events``, ``state`` (``evolve``, ``fold``), ``decide``, ``check`` (the
check with a money move) and ``codec`` (stored and projected forms, the only JSON).
"""

from __future__ import annotations

from wallet.protection.check import (
    ProtectRule,
    check,
    replay_usage,
    rule_for,
    standings,
)
from wallet.protection.codec import (
    event_from_json,
    event_to_json,
    projection,
    session_from_text,
    session_limit_in,
    session_to_text,
    usage_from_text,
    usage_to_text,
)
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
from wallet.protection.decide import (
    MAX_REASON,
    ProtectionRefused,
    decide,
)
from wallet.protection.events import (
    EVENT_TYPES,
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
from wallet.protection.exclusion import (
    INDEFINITE_MIN_MS,
    LIFT_COOLING_OFF_MS,
    PERIOD_MS,
    Excluded,
    Exclusion,
    Period,
)
from wallet.protection.limits import (
    COOLING_OFF_MS,
    DAY_MS,
    HOUR_MS,
    USAGE_KEPT_MS,
    WINDOW_MS,
    Limit,
    LimitExceeded,
    LimitKey,
    LimitKind,
    Standing,
    Usage,
    Window,
    used,
)
from wallet.protection.sessions import (
    MAX_REALITY_CHECK_MINUTES,
    MAX_SESSION_MINUTES,
    SESSION_GAP_MS,
    RealityCheck,
    Session,
    SessionLimitReached,
    reality_check,
    replay_sessions,
    seen,
    session_ends_at,
    sessions_seen,
)
from wallet.protection.state import (
    Protection,
    evolve,
    fold,
)

__all__ = [
    "COOLING_OFF_MS",
    "DAY_MS",
    "EVENT_TYPES",
    "HOUR_MS",
    "INDEFINITE_MIN_MS",
    "LIFT_COOLING_OFF_MS",
    "MAX_REALITY_CHECK_MINUTES",
    "MAX_REASON",
    "MAX_SESSION_MINUTES",
    "PERIOD_MS",
    "SESSION_GAP_MS",
    "USAGE_KEPT_MS",
    "WINDOW_MS",
    "CancelLimitIncrease",
    "ExcludePlayer",
    "Excluded",
    "Exclusion",
    "ExclusionLiftRequested",
    "LiftExclusion",
    "Limit",
    "LimitDecreased",
    "LimitExceeded",
    "LimitIncreaseCancelled",
    "LimitIncreaseRequested",
    "LimitKey",
    "LimitKind",
    "LimitSet",
    "Period",
    "PlayerExcluded",
    "ProtectRule",
    "Protection",
    "ProtectionCommand",
    "ProtectionEvent",
    "ProtectionRefused",
    "RealityCheck",
    "RealityCheckSet",
    "SelfExclude",
    "SelfExcluded",
    "Session",
    "SessionLimitReached",
    "SessionLimitSet",
    "SetLimit",
    "SetRealityCheck",
    "SetSessionLimit",
    "Standing",
    "Usage",
    "Window",
    "check",
    "decide",
    "event_from_json",
    "event_to_json",
    "evolve",
    "fold",
    "projection",
    "reality_check",
    "replay_sessions",
    "replay_usage",
    "rule_for",
    "seen",
    "session_ends_at",
    "session_from_text",
    "session_limit_in",
    "session_to_text",
    "sessions_seen",
    "standings",
    "usage_from_text",
    "usage_to_text",
    "used",
]
