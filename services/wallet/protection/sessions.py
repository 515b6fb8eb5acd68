"""Sessions (issue 34): a player's play at cash tables as data, never a timer; the session
time limit that ends one, and the reality check that reports on one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from studkit.errors import FailedPrecondition
from wallet.model import TxKind
from wallet.protection.limits import Usage
from wallet.transaction import Transaction

MAX_REALITY_CHECK_MINUTES: Final = 24 * 60
MAX_SESSION_MINUTES: Final = 24 * 60
SESSION_GAP_MS: Final = 30 * 60_000
"""A session ends after this long with no buy-in and no settled hand of the player."""


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


def seen(session: Session | None, now_ms: int) -> Session:
    """The session after a buy-in or a settled hand at ``now_ms``: the same one, seen now,
    or a new one when none runs."""
    if session is None or not session.ongoing(now_ms):
        return Session(now_ms, now_ms)
    return Session(session.started_ms, max(session.last_ms, now_ms))


def sessions_seen(transaction: Transaction) -> tuple[str, ...]:
    """The players whose sessions ``transaction`` goes on with, or starts: a buy-in's (a
    sit-down or a top-up) player, a settled hand's players; nobody's for anything else
    (tournament entries are not sessions)."""
    match transaction.kind:
        case TxKind.BUY_IN:
            return transaction.players
        case TxKind.SETTLEMENT:
            return tuple(rule.player_id for rule in transaction.seats)
        case _:
            return ()


class Seen(Protocol):
    """A ledger entry as sessions read it: its time and the players it saw."""

    @property
    def at_ms(self) -> int: ...

    @property
    def players_seen(self) -> tuple[str, ...]: ...


def replay_sessions(entries: Iterable[Seen]) -> dict[str, Session]:
    """Every player's latest session, rebuilt from the ledger alone (oldest entry first): the
    sessions hash ``apply.lua`` writes with each buy-in and settlement is this fold."""
    sessions: dict[str, Session] = {}
    for entry in entries:
        for player in entry.players_seen:
            sessions[player] = seen(sessions.get(player), entry.at_ms)
    return sessions


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
