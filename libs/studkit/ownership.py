"""Who writes each table (DESIGN §3: one writer per table): leases with fencing epochs, and the
membership of table-service replicas that spreads tables over them. The tournament service
uses the same scheme for its tournaments' streams (DESIGN §5c), under its own keys
(``owner_key=keys.tournament_owner``, ``replicas_key=keys.tournament_replicas()``).

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
- **Rounds that scale**: a replica renews all its leases in pipelines of batched scripts
  (:meth:`Ownership.renew_many`; takes and releases many with :meth:`~Ownership.acquire_many`
  and :meth:`~Ownership.release_many`), so a round over thousands of tables is a few round
  trips on one connection (one per master on a cluster), never a burst that empties the pool
  player commands need.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from redis.crc import key_slot
from redis.exceptions import NoScriptError

from studkit import keys
from studkit.redis_client import Client, is_cluster

_LEASE_LUA: Final = """
-- KEYS: owner hashes, all in one Cluster slot (one table's, or several tables' that share a
-- slot); ARGV[1] mode (acquire|renew|release), ARGV[2] replica, ARGV[3] ttl ms, ARGV[4] the
-- epochs the caller holds for KEYS, comma-separated (renew, release; one string rather than
-- one argument each, cheaper to send for a batch). Replies one entry per key, in
-- order: the epoch (an integer) when the key got what was asked (acquired, renewed,
-- released), else {status, epoch, owner, remaining ms} (held, lost). The short form keeps a
-- round over thousands of leases cheap to build, send and read.
local mode, me, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
if mode ~= 'acquire' and mode ~= 'renew' and mode ~= 'release' then
  return redis.error_reply('ERR lease mode must be acquire, renew or release')
end
local held = {}
if mode ~= 'acquire' then
  for e in string.gmatch(ARGV[4], '[^,]+') do held[#held + 1] = tonumber(e) end
  if #held ~= #KEYS then
    return redis.error_reply('ERR one epoch per key')
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local f = redis.call('HMGET', key, 'replica', 'epoch', 'expires')
  local owner, epoch, expires = f[1], tonumber(f[2] or '0'), tonumber(f[3] or '0')
  if mode == 'acquire' then
    if owner and owner ~= me and expires > now then
      out[i] = {'held', epoch, owner, expires - now}
    else
      epoch = epoch + 1
      redis.call('HSET', key, 'replica', me, 'epoch', epoch, 'expires', now + ttl)
      out[i] = epoch
    end
  elseif owner ~= me or epoch ~= held[i] then
    out[i] = {'lost', epoch, owner or '', expires - now}
  else
    redis.call('HSET', key, 'expires', mode == 'renew' and now + ttl or 0)
    out[i] = epoch
  end
end
return out
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


class Spread:
    """Who should own each stream among the live replicas (:func:`rendezvous`), worked out
    once per stream while the live replicas stay the same: a round over thousands of streams
    hashes each one again only when a replica joins or leaves."""

    def __init__(self) -> None:
        self.live: dict[str, Replica] = {}
        self._among: set[tuple[str, str]] = set()
        self._desired: dict[str, Replica | None] = {}

    def update(self, live: Iterable[Replica]) -> None:
        """The live replicas now (a heartbeat's answer)."""
        self.live = {r.id: r for r in live}
        among = {(r.id, r.address) for r in self.live.values()}
        if self._among != among:  # who should own what changes with the replicas
            self._among, self._desired = among, {}

    def desired(self, stream_id: str) -> Replica | None:
        """The live replica that should own ``stream_id`` (None while none is live)."""
        if stream_id not in self._desired:
            self._desired[stream_id] = rendezvous(stream_id, self.live.values())
        return self._desired[stream_id]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


BATCH: Final = 200
"""Leases per script call in the batched calls (:meth:`Ownership.renew_many` and its
siblings): one script holds Redis for ~0.1 ms per lease, so other clients' commands wait at
most a few milliseconds between two batches."""


PER_ROUND_TRIP: Final = 1000
"""Leases per pipeline (whole batches): a round over many leases is sent about this many at
a time, so building and reading one pipeline never holds the caller's event loop for long
(a few milliseconds)."""


def _round_trips(batches: list[list[str]]) -> Iterator[list[list[str]]]:
    """``batches`` in runs of about :data:`PER_ROUND_TRIP` leases (at least one batch)."""
    run: list[list[str]] = []
    size = 0
    for batch in batches:
        if run and size + len(batch) > PER_ROUND_TRIP:
            yield run
            run, size = [], 0
        run.append(batch)
        size += len(batch)
    if run:
        yield run


@functools.lru_cache(maxsize=65_536)
def _owner_key(table_id: str) -> str:
    """:func:`studkit.keys.table_owner`, remembered (a round names every table again)."""
    return keys.table_owner(table_id)


OwnerKey = Callable[[str], str]
"""The owner record's key of a stream id (:func:`studkit.keys.table_owner`,
:func:`studkit.keys.tournament_owner`): the key the append script fences on."""


_GRANTED: Final = {"acquire": "acquired", "renew": "renewed", "release": "released"}
"""The status of a lease that got what was asked (the script's short reply)."""


class Ownership:
    """Leases and membership over one Redis client.

    Every call uses one connection at a time (one per master on a Redis Cluster), whatever
    the number of tables: one lease call is one script; the batched calls
    (:meth:`renew_many`, :meth:`acquire_many`, :meth:`release_many`) send their scripts in
    pipelines of about :data:`PER_ROUND_TRIP` leases, one after another, so a round over
    thousands of tables leaves the rest of the pool to player commands.

    The tables' keys by default; another service's streams name theirs: ``owner_key`` (each
    stream's owner record, the one its append script fences on) and ``replicas_key`` (the
    sorted set of its live replicas)."""

    def __init__(self, client: Client, replica: Replica, *, lease_ms: int = 3000,
                 batch: int = BATCH, owner_key: OwnerKey = keys.table_owner,
                 replicas_key: str = keys.table_replicas()) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._client = client
        self.replica = replica
        self.lease_ms = lease_ms
        self.batch = batch
        self._owner_key: OwnerKey = (_owner_key if owner_key is keys.table_owner
                                     else functools.lru_cache(maxsize=65_536)(owner_key))
        self._replicas_key = replicas_key

    async def _script(self, sha: str, source: str, keys_: list[str], args: list[str]) -> object:
        try:
            return await self._client.evalsha(sha, len(keys_), *keys_, *args)
        except NoScriptError:
            await self._client.script_load(source)
            return await self._client.evalsha(sha, len(keys_), *keys_, *args)

    async def _lease(self, table_id: str, mode: str, epoch: int = 0) -> Lease:
        reply = await self._script(_LEASE_SHA, _LEASE_LUA, [self._owner_key(table_id)],
                                   [mode, self.replica.id, str(self.lease_ms), str(epoch)])
        assert isinstance(reply, list) and len(reply) == 1
        return self._parse(mode, reply[0])

    def _parse(self, mode: str, reply: object) -> Lease:
        """One entry of the lease script's reply."""
        if isinstance(reply, int):
            return Lease(_GRANTED[mode], reply, self.replica.id,
                         0 if mode == "release" else self.lease_ms)
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

    # --- many tables at once -------------------------------------------------------------

    async def renew_many(self, leases: Mapping[str, int]) -> dict[str, Lease]:
        """Renew many leases in one round: ``leases`` maps each table id to the epoch this
        replica holds it at (:attr:`Lease.epoch` of its acquisition).

        Returns, for each table renewed this round, its :class:`Lease`:

        - ``renewed`` (``ok``): the lease now runs ``lease_ms`` from Redis's clock, at the
          same epoch (a lease that had expired but that nobody took since is renewed too);
        - ``lost`` (not ``ok``): the table has another owner or a newer epoch (``epoch`` and
          ``owner`` say which; the owner is "" if the record is gone). Stop driving it: the
          append fence refuses its writes anyway.

        Cost: ``ceil(n / batch)`` scripts on a single Redis, one script per (slot, batch) on
        a Redis Cluster (a script's keys must share a slot), sent in pipelines of
        :data:`PER_ROUND_TRIP` leases one after another: about ``n / 1000`` round trips
        on one connection (one per master on a cluster), never a connection per table. An empty
        mapping costs nothing.

        Errors: when Redis cannot be reached the ``redis.RedisError`` propagates and nothing
        is known; keep the tables and try again next round (each lease stays valid until
        ``lease_ms`` after its last renewal). On a cluster, the tables of a master that
        failed are absent from the result while the others are renewed: treat an absent
        table as "not renewed this round", never as lost.
        """
        return await self._many("renew", dict(leases))

    async def acquire_many(self, table_ids: Iterable[str]) -> dict[str, Lease]:
        """:meth:`acquire` for many tables in one round (batched as :meth:`renew_many`,
        with the same errors): each table's ``acquired`` lease (a new epoch) or ``held``
        (another live replica has it)."""
        return await self._many("acquire", dict.fromkeys(table_ids, 0))

    async def release_many(self, leases: Mapping[str, int]) -> dict[str, Lease]:
        """:meth:`release` for many tables in one round (batched as :meth:`renew_many`, with
        the same errors): ``released``, or ``lost`` for a lease this replica no longer
        holds (nothing changed then)."""
        return await self._many("release", dict(leases))

    def batches(self, table_ids: Iterable[str]) -> list[list[str]]:
        """How :meth:`renew_many` splits ``table_ids`` into script calls: runs of at most
        :attr:`batch` tables, each in one Cluster slot on a cluster."""
        ids = list(table_ids)
        if is_cluster(self._client):
            groups: dict[int, list[str]] = {}
            for table_id in ids:
                groups.setdefault(key_slot(self._owner_key(table_id).encode()),
                                  []).append(table_id)
            runs = list(groups.values())
        else:
            runs = [ids]
        return [run[i:i + self.batch] for run in runs for i in range(0, len(run), self.batch)]

    async def _many(self, mode: str, epochs: dict[str, int]) -> dict[str, Lease]:
        out: dict[str, Lease] = {}
        errors: list[Exception] = []
        for group in _round_trips(self.batches(epochs)):
            missing = self._collect(mode, group, await self._send(mode, epochs, group),
                                    out, errors)
            if missing:  # the script was not loaded (a restarted Redis): load, send again
                await self._client.script_load(_LEASE_LUA)
                if self._collect(mode, missing, await self._send(mode, epochs, missing),
                                 out, errors):
                    errors.append(NoScriptError("the lease script could not be loaded"))
        if errors and not out:
            raise errors[0]
        return out

    async def _send(self, mode: str, epochs: dict[str, int], group: list[list[str]]
                    ) -> list[object]:
        """One round trip: the lease script once per batch of ``group``."""
        pipe = self._client.pipeline(transaction=False)
        for batch in group:
            # Through execute_command: a cluster pipeline blocks its ``evalsha`` method (it
            # cannot load a missing script itself) but routes the command by its first key.
            pipe.execute_command("EVALSHA", _LEASE_SHA, len(batch), *map(self._owner_key, batch),
                                 mode, self.replica.id, str(self.lease_ms),
                                 ",".join(str(epochs[t]) for t in batch))
        replies: list[object] = await pipe.execute(raise_on_error=False)
        return replies

    def _collect(self, mode: str, group: list[list[str]], replies: list[object],
                 out: dict[str, Lease], errors: list[Exception]) -> list[list[str]]:
        """Each batch's leases into ``out``, its error into ``errors``; the batches whose
        script was missing (nothing ran)."""
        missing = []
        for batch, reply in zip(group, replies, strict=True):
            if isinstance(reply, NoScriptError):
                missing.append(batch)
            elif isinstance(reply, Exception):
                errors.append(reply)
            else:
                assert isinstance(reply, list) and len(reply) == len(batch)
                out.update((t, self._parse(mode, r)) for t, r in zip(batch, reply, strict=True))
        return missing

    async def owner(self, table_id: str) -> tuple[str, int]:
        """(replica id, epoch) of the table's owner record ("" and 0 if none)."""
        replica, epoch = await self._client.hmget(self._owner_key(table_id),
                                                  ["replica", "epoch"])
        return ("" if replica is None else _text(replica),
                0 if epoch is None else int(_text(epoch)))

    async def heartbeat(self, alive: bool = True) -> list[Replica]:
        """Announce this replica for ``lease_ms`` (or leave, ``alive=False``); the live
        replicas."""
        member = self.replica.member if alive else ""
        if not alive:
            await self._client.zrem(self._replicas_key, self.replica.member)
        reply = await self._script(_HEARTBEAT_SHA, _HEARTBEAT_LUA, [self._replicas_key],
                                   [member, str(self.lease_ms)])
        assert isinstance(reply, list)
        return [Replica.parse(_text(m)) for m in reply]
