"""Who writes each table (DESIGN §3: one writer per table): leases with fencing epochs, and the
membership of table-service replicas that spreads tables over them.

- **Lease**: a table's owner record ``stud:table:{id}:owner`` (replica, epoch, expiry) lives
  in the table's Cluster slot. Taking a table over (a free one, or one whose lease expired)
  increments its epoch; the owner renews before expiry. Times come from Redis's own clock
  (``TIME`` inside the scripts), so replicas' clocks never matter.
- **Fence**: the event store's append script refuses any append whose epoch is not the
  table's current one (:class:`studkit.store.NotOwner`): a paused or partitioned former owner
  can never write, whatever it believes.
- **Membership**: replicas heartbeat into one sorted set (score = expiry); each table's
  desired owner is the live replica with the highest rendezvous hash for it, so tables spread
  evenly and only ``1/n`` of them move when a replica joins or leaves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from redis.exceptions import NoScriptError

from studkit import keys
from studkit.redis_client import Client

_LEASE_LUA: Final = """
-- KEYS[1] owner hash; ARGV[1] mode (acquire|renew|release), ARGV[2] replica, ARGV[3] ttl ms,
-- ARGV[4] epoch the caller holds (renew, release). Replies {status, epoch, owner, expires}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = redis.call('HGET', KEYS[1], 'replica')
local epoch = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
local expires = tonumber(redis.call('HGET', KEYS[1], 'expires') or '0')
local mode, me, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if mode == 'acquire' then
  if owner and owner ~= me and expires > now then
    return {'held', epoch, owner, expires - now}
  end
  epoch = epoch + 1
  redis.call('HSET', KEYS[1], 'replica', me, 'epoch', epoch, 'expires', now + ttl)
  return {'acquired', epoch, me, ttl}
end
local held = tonumber(ARGV[4])
if owner ~= me or epoch ~= held then
  return {'lost', epoch, owner or '', expires - now}
end
if mode == 'renew' then
  redis.call('HSET', KEYS[1], 'expires', now + ttl)
  return {'renewed', epoch, me, ttl}
end
redis.call('HSET', KEYS[1], 'expires', 0)
return {'released', epoch, me, 0}
"""
_LEASE_SHA: Final = hashlib.sha1(_LEASE_LUA.encode()).hexdigest()

_HEARTBEAT_LUA: Final = """
-- KEYS[1] replicas zset; ARGV[1] member, ARGV[2] ttl ms. Drops expired members, returns the
-- live ones (Redis's clock).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] ~= '' then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
end
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""
_HEARTBEAT_SHA: Final = hashlib.sha1(_HEARTBEAT_LUA.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Lease:
    """The outcome of a lease call: ``status`` is acquired, renewed, released, held (another
    replica holds it) or lost (this replica no longer does)."""

    status: str
    epoch: int
    owner: str
    remaining_ms: int

    @property
    def ok(self) -> bool:
        """Whether the caller holds the lease now (or released it as asked)."""
        return self.status in ("acquired", "renewed", "released")


@dataclass(frozen=True, slots=True)
class Replica:
    """A live table-service replica: its id and the address clients reach it at."""

    id: str
    address: str

    @property
    def member(self) -> str:
        """Its entry in the replicas set."""
        return f"{self.id}|{self.address}"

    @staticmethod
    def parse(member: str) -> Replica:
        """The replica of a set entry ``id|address``."""
        replica_id, _, address = member.partition("|")
        return Replica(replica_id, address)


def rendezvous(table_id: str, replicas: Iterable[Replica]) -> Replica | None:
    """The replica that should own ``table_id``: the highest hash of (table, replica).

    >>> a, b = Replica("a", "h:1"), Replica("b", "h:2")
    >>> rendezvous("t1", [a, b]) == rendezvous("t1", [b, a])
    True
    >>> rendezvous("t1", []) is None
    True
    """
    best: tuple[bytes, Replica] | None = None
    for replica in replicas:
        score = hashlib.sha256(f"{table_id}\x00{replica.id}".encode()).digest()
        if best is None or score > best[0]:
            best = (score, replica)
    return None if best is None else best[1]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Ownership:
    """Leases and membership over one Redis client."""

    def __init__(self, client: Client, replica: Replica, *, lease_ms: int = 3000
                 ) -> None:
        self._client = client
        self.replica = replica
        self.lease_ms = lease_ms

    async def _script(self, sha: str, source: str, keys_: list[str], args: list[str]) -> object:
        try:
            return await self._client.evalsha(sha, len(keys_), *keys_, *args)
        except NoScriptError:
            await self._client.script_load(source)
            return await self._client.evalsha(sha, len(keys_), *keys_, *args)

    async def _lease(self, table_id: str, mode: str, epoch: int = 0) -> Lease:
        reply = await self._script(_LEASE_SHA, _LEASE_LUA, [keys.table_owner(table_id)],
                                   [mode, self.replica.id, str(self.lease_ms), str(epoch)])
        assert isinstance(reply, list)
        status, current, owner, remaining = reply
        return Lease(_text(status), int(current), _text(owner), int(remaining))

    async def acquire(self, table_id: str) -> Lease:
        """Take the table if it is free, its lease expired, or this replica holds it (a new
        epoch every time: a previous incarnation of this replica is fenced too)."""
        return await self._lease(table_id, "acquire")

    async def renew(self, table_id: str, epoch: int) -> Lease:
        """Extend the lease held at ``epoch``; ``lost`` if another replica took over."""
        return await self._lease(table_id, "renew", epoch)

    async def release(self, table_id: str, epoch: int) -> Lease:
        """Let the table go at once (a graceful stop or a hand-over)."""
        return await self._lease(table_id, "release", epoch)

    async def owner(self, table_id: str) -> tuple[str, int]:
        """(replica id, epoch) of the table's owner record ("" and 0 if none)."""
        replica, epoch = await self._client.hmget(keys.table_owner(table_id),
                                                  ["replica", "epoch"])
        return ("" if replica is None else _text(replica),
                0 if epoch is None else int(_text(epoch)))

    async def heartbeat(self, alive: bool = True) -> list[Replica]:
        """Announce this replica for ``lease_ms`` (or leave, ``alive=False``); the live
        replicas."""
        member = self.replica.member if alive else ""
        if not alive:
            await self._client.zrem(keys.table_replicas(), self.replica.member)
        reply = await self._script(_HEARTBEAT_SHA, _HEARTBEAT_LUA, [keys.table_replicas()],
                                   [member, str(self.lease_ms)])
        assert isinstance(reply, list)
        return [Replica.parse(_text(m)) for m in reply]
