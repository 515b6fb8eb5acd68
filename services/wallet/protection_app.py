"""Player protection's use cases (issue 34): who may do what, then read the player's events,
fold, decide at the wallet's clock and append conditionally (a lost race decides again).

Access: a player sets, lowers, raises, removes and cancels their own limits and excludes
themself, never another player's account; an operator may not change a player's limits (only
the player may, so a raise always waits its cooling-off) but excludes players, with a reason,
and lifts an indefinite exclusion after six months; the player, services, operators and
auditors read a player's protection. Enforcement is not here: ``apply.lua`` checks every
deposit, buy-in and entry in the script that moves the money.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import structlog

from studkit.auth import Forbidden, Principal, Role, require_role
from studkit.errors import FailedPrecondition
from wallet.protection import (
    CancelLimitIncrease,
    ExcludePlayer,
    LiftExclusion,
    Protection,
    ProtectionCommand,
    ProtectionEvent,
    RealityCheck,
    SelfExclude,
    SetLimit,
    SetRealityCheck,
    SetSessionLimit,
    Standing,
    decide,
    evolve,
    reality_check,
    standings,
)
from wallet.protection_store import ProtectionStore, VersionChanged

log = structlog.get_logger("wallet")

READERS = (Role.SERVICE, Role.OPERATOR, Role.AUDITOR)


@dataclass(frozen=True, slots=True)
class ProtectionView:
    """A player's protection as read at ``now_ms``."""

    player_id: str
    state: Protection
    standings: tuple[Standing, ...]
    events: tuple[tuple[str, ProtectionEvent], ...]
    now_ms: int
    session_started_ms: int = 0
    """When the player's running session started (0: none runs)."""


def _own(principal: Principal, player_id: str) -> None:
    if not principal.is_player(player_id):
        raise Forbidden(f"only player {player_id} may change their own limits and exclusion")


def _may_read(principal: Principal, player_id: str) -> None:
    """The player themself, or a service, an operator, an auditor."""
    if not principal.is_player(player_id):
        if principal.role is Role.PLAYER:
            raise Forbidden(f"a player may only read their own account, not {player_id}")
        require_role(principal, *READERS)


class ProtectionApp:
    """One method per protection RPC."""

    def __init__(self, store: ProtectionStore, *, retries: int = 5,
                 clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._store = store
        self._retries = retries
        self._clock_ms = clock_ms
        self._sleep = sleep

    async def set_limit(self, principal: Principal, command: SetLimit) -> ProtectionView:
        """The player: set, lower, raise or remove one of their limits."""
        _own(principal, command.player_id)
        return await self._change(command)

    async def cancel_increase(self, principal: Principal,
                              command: CancelLimitIncrease) -> ProtectionView:
        """The player: withdraw a waiting raise."""
        _own(principal, command.player_id)
        return await self._change(command)

    async def self_exclude(self, principal: Principal, command: SelfExclude) -> ProtectionView:
        """The player: exclude themself."""
        _own(principal, command.player_id)
        return await self._change(command)

    async def exclude(self, principal: Principal, command: ExcludePlayer) -> ProtectionView:
        """An operator: exclude a player, with a reason."""
        require_role(principal, Role.OPERATOR)
        return await self._change(command)

    async def lift(self, principal: Principal, command: LiftExclusion) -> ProtectionView:
        """An operator: lift an indefinite exclusion (in force after the cooling-off)."""
        require_role(principal, Role.OPERATOR)
        return await self._change(command)

    async def set_reality_check(self, principal: Principal,
                                command: SetRealityCheck) -> ProtectionView:
        """The player: a reminder every N minutes of play (0: none)."""
        _own(principal, command.player_id)
        return await self._change(command)

    async def set_session_limit(self, principal: Principal,
                                command: SetSessionLimit) -> ProtectionView:
        """The player: a session time limit (0: none; a raise waits its cooling-off)."""
        _own(principal, command.player_id)
        return await self._change(command)

    async def reality_checks(self, principal: Principal, player_id: str
                             ) -> AsyncIterator[RealityCheck]:
        """The player's reminders: the session starts when they start watching; every
        interval (read again each time: changed or turned off, it follows) a reminder with
        the session's time and net result. FAILED_PRECONDITION reality_check_off when none
        is set; the stream ends when it is turned off."""
        _own(principal, player_id)
        started = self._clock_ms()
        minutes = (await self._store.state(player_id)).reality_check_minutes
        if not minutes:
            raise FailedPrecondition("no reality check is set: SetRealityCheck first",
                                     reason="reality_check_off")
        while minutes:
            await self._sleep(minutes * 60.0)
            minutes = (await self._store.state(player_id)).reality_check_minutes
            if not minutes:
                return
            yield reality_check(await self._store.usage(player_id), started,
                                self._clock_ms(), minutes)

    async def read(self, principal: Principal, player_id: str) -> ProtectionView:
        """A player's protection: their own, or anyone's for services, operators, auditors."""
        _may_read(principal, player_id)
        return await self._view(player_id, self._clock_ms())

    async def events(self, principal: Principal, player_id: str
                     ) -> list[tuple[str, ProtectionEvent]]:
        """A player's protection events, oldest first (their statement's protection section):
        who may read :meth:`read` may read these."""
        _may_read(principal, player_id)
        return await self._store.events(player_id)

    async def _view(self, player_id: str, now_ms: int) -> ProtectionView:
        events = tuple(await self._store.events(player_id))
        state = Protection()
        for _, event in events:
            state = evolve(state, event)
        usage = await self._store.usage(player_id)
        session = (await self._store.sessions([player_id])).get(player_id)
        started = session.started_ms if session is not None and session.ongoing(now_ms) else 0
        return ProtectionView(player_id, state, standings(state, usage, now_ms), events, now_ms,
                              started)

    async def _change(self, command: ProtectionCommand) -> ProtectionView:
        for attempt in range(1, self._retries + 1):
            now_ms = self._clock_ms()
            state = await self._store.state(command.player_id)
            events = decide(state, command, now_ms)
            if not events:
                break
            after = state
            for event in events:
                after = evolve(after, event)
            try:
                await self._store.append(command.player_id, state.version, events, after)
            except VersionChanged:
                log.info("protection_retried", attempt=attempt)
                if attempt == self._retries:
                    raise
                continue
            for event in events:
                log.info("protection_event", player_id=command.player_id,
                         event_type=type(event).__name__,
                         operator=getattr(event, "operator", ""),
                         reason=getattr(event, "reason", ""))
            break
        return await self._view(command.player_id, self._clock_ms())
