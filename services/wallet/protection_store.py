"""The store of players' protection (issue 34): each player's event stream
``stud:wallet:{wallet}:protection:<player>`` (the truth), the projection ``apply.lua`` checks
money moves against (``…:protection``, player -> JSON) and the usage list it counts them in
(``…:usage:<player>``, read here for what is left) and players' sessions (``…:sessions``,
read here; ``apply.lua`` alone writes them, with the money move, see ``wallet.store``). Events
are appended by one Lua script that checks the stream's length (the expected version) and
updates the projection with them, so a lost race is decided again and the two never
disagree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, cast

from studkit.errors import Conflict
from studkit.keys import wallet_key
from studkit.redis_client import Client
from wallet.keys import ACCOUNTS, PROTECTION, SESSIONS, usage_key
from wallet.protection import (
    Protection,
    ProtectionEvent,
    Session,
    Usage,
    event_from_json,
    event_to_json,
    fold,
    projection,
    session_from_text,
    usage_from_text,
)
from wallet.store import UnknownAccount

_APPEND: Final = """
-- KEYS[1] the player's protection stream  KEYS[2] the projection hash  KEYS[3] accounts
-- ARGV[1] player  ARGV[2] expected stream length  ARGV[3] projection JSON  ARGV[4..] events
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then return -1 end
if redis.call('XLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return -2 end
for i = 4, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'event', ARGV[i])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return #ARGV - 3
"""


def protection_key(player_id: str) -> str:
    """One player's protection event stream."""
    return wallet_key(f"protection:{player_id}")


class VersionChanged(Conflict):
    """Another change of the player's protection landed first; decide again."""

    default_reason = "conflict"


class ProtectionStore:
    """Reads and conditional appends of players' protection."""

    def __init__(self, client: Client) -> None:
        self._redis = client
        self._append = client.register_script(_APPEND)

    async def events(self, player_id: str) -> list[tuple[str, ProtectionEvent]]:
        """The player's protection events, oldest first, with their stream ids;
        :class:`UnknownAccount` for an unopened account."""
        if not await self._redis.hexists(ACCOUNTS, player_id):
            raise UnknownAccount(f"no account player:{player_id}")
        rows = cast(list[tuple[str, dict[str, str]]],
                    await self._redis.xrange(protection_key(player_id)))
        return [(entry_id, event_from_json(fields["event"])) for entry_id, fields in rows]

    async def state(self, player_id: str) -> Protection:
        """The player's protection, folded from their stream."""
        return fold(event for _, event in await self.events(player_id))

    async def usage(self, player_id: str) -> list[Usage]:
        """The player's recent money moves as the limits count them."""
        raw = cast(list[str], await self._redis.lrange(usage_key(player_id), 0, -1))
        return [usage_from_text(text) for text in raw]

    async def append(self, player_id: str, expected: int,
                     events: Sequence[ProtectionEvent], state: Protection) -> None:
        """Append ``events`` if the stream holds ``expected`` events, and write ``state``'s
        projection with them; :class:`VersionChanged` otherwise."""
        args: list[Any] = [player_id, expected, projection(state),
                           *(event_to_json(e) for e in events)]
        done = int(await self._append(
            keys=[protection_key(player_id), PROTECTION, ACCOUNTS], args=args))
        if done == -1:
            raise UnknownAccount(f"no account player:{player_id}")
        if done == -2:
            raise VersionChanged(f"player:{player_id}'s protection changed meanwhile")

    async def sessions(self, player_ids: Sequence[str]) -> dict[str, Session]:
        """The recorded sessions of those of ``player_ids`` that have one."""
        if not player_ids:
            return {}
        raw = cast(list[str | None], await self._redis.hmget(SESSIONS, list(player_ids)))
        return {p: session_from_text(text)
                for p, text in zip(player_ids, raw, strict=True) if text is not None}
