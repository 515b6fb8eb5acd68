"""Player protection's one codec (issue 34): events as stored JSON, the projection
``apply.lua`` reads (and what it answers from it), and the text forms of a usage entry and a
session. Only the store, the gRPC mapping and the script's readers use it."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from wallet.protection.events import EVENT_TYPES, ProtectionEvent
from wallet.protection.exclusion import Period
from wallet.protection.limits import Limit, LimitKind, Usage, Window
from wallet.protection.sessions import Session
from wallet.protection.state import Protection


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
    kinds: dict[str, type[StrEnum]] = {"kind": LimitKind, "window": Window, "period": Period}
    fields: dict[str, Any] = {k: kinds[k](v) if k in kinds else v for k, v in body.items()}
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


def usage_to_text(usage: Usage) -> str:
    """A usage list entry: ``<at_ms>:<deposit>:<wager>:<loss>``."""
    return f"{usage.at_ms}:{usage.deposit}:{usage.wager}:{usage.loss}"


def usage_from_text(text: str) -> Usage:
    """The inverse of :func:`usage_to_text`."""
    at, deposit, wager, loss = (int(part) for part in text.split(":"))
    return Usage(at, deposit, wager, loss)


def session_limit_in(projected: str | None, now_ms: int) -> int:
    """The session limit in minutes a :func:`projection` holds in force at ``now_ms`` (0:
    none)."""
    raw = json.loads(projected).get("session_limit") if projected else None
    if not raw:
        return 0
    limit = Limit(int(raw["amount"]), int(raw["pending"]) if raw["pending"] else None,
                  int(raw["effective_ms"]))
    return limit.in_force(now_ms) or 0


def session_to_text(session: Session) -> str:
    """A sessions hash value: ``<started_ms>:<last_ms>``."""
    return f"{session.started_ms}:{session.last_ms}"


def session_from_text(text: str) -> Session:
    """The inverse of :func:`session_to_text`."""
    started, last = (int(part) for part in text.split(":"))
    return Session(started, last)
