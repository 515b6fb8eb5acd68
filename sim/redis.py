"""The simulated store: an in-memory stand-in for the few Redis commands the table's event
store, the wallet's store and the dealer's store send, with their Lua scripts ported to
Python line for line (append.lua, the wallet's apply.lua, the dealer's create_hand.lua,
record_deal.lua and seeds.lua). The stores themselves (``studkit.store.EventStore``,
``wallet.store.WalletStore``, ``dealer.store.DealerStore``) run unchanged on top of it.

One :class:`Data` holds every key; each simulated process gets its own :class:`SimRedis`
view of it, through which the faults reach that process alone: latency, a call that fails
before it is applied, one that is applied and then times out, a paused process (its calls
wait), a dead one (its calls fail). A script runs atomically: between two awaits.
``tests/sim/test_store_contract.py`` runs the same appends against ``append.lua`` on a real
Redis and here, and they must agree.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sim import scripts
from sim.loop import pause
from studkit.redis_client import Client

Value = bytes
_T = TypeVar("_T")


def _b(value: object) -> bytes:
    if type(value) is bytes:  # the common cases first, without isinstance's walk
        return value
    if type(value) is str:
        return value.encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(int(value) if float(value).is_integer() else value).encode()
    return str(value).encode()


@dataclass
class Data:
    """Every key of the simulated Redis, and the record of accepted table appends."""

    strings: dict[bytes, bytes] = field(default_factory=dict)
    hashes: dict[bytes, dict[bytes, bytes]] = field(default_factory=dict)
    sets: dict[bytes, set[bytes]] = field(default_factory=dict)
    streams: dict[bytes, list[tuple[bytes, dict[bytes, bytes]]]] = field(default_factory=dict)
    stream_ids: dict[bytes, list[tuple[int, int]]] = field(default_factory=dict)
    """Each stream's entry ids, parsed (ascending, as XADD keeps them): XRANGE bisects."""
    zsets: dict[bytes, dict[bytes, float]] = field(default_factory=dict)
    """Sorted sets, member -> score (the tournament service's wake set)."""
    lists: dict[bytes, list[bytes]] = field(default_factory=dict)
    """Lists, head first (the wallet's usage lists of player protection)."""
    protection_log: list[tuple[str, str, str, tuple[str, ...], bool]] = field(
        default_factory=list)
    """Player protection's writes in the order the scripts made them: ("event", player,
    event JSON, (), False) and ("move", player, usage entry, the kinds checked, blocked by an
    exclusion): ``sim.checks.protection`` replays it."""
    appends: list[tuple[str, str, int]] = field(default_factory=list)
    """Each applied table append: (stream key, the writer's epoch, entries written)."""
    drop_every: int = 0
    """A broken store for the invariant tests: every n-th entry is dropped (0: never)."""
    unfenced: bool = False
    """A broken store for the invariant tests: the epoch is not checked."""
    mint_every: int = 0
    """A broken store for the invariant tests: every n-th wallet transaction credits one
    chip more than its postings say (0: never)."""
    audit: Any = None
    """The per-append checks (:class:`sim.checks.Audit`): told of every table append and
    every wallet transaction the store applies, as it applies it."""
    ledger_log: list[tuple[bytes, dict[bytes, bytes], tuple[tuple[bytes, int], ...]]] = field(
        default_factory=list)
    """Every wallet transaction as ``apply.lua``'s port appended it to the ledger: its id,
    its fields, and each posting's statement line (its id and the balance after it)."""
    statement_log: dict[bytes, list[tuple[bytes, dict[bytes, bytes]]]] = field(
        default_factory=dict)
    """Every statement line as appended, by its stream's key (``sim.ledger_archive`` holds
    the simulated archive and Redis to these)."""
    trimmed: dict[bytes, int] = field(default_factory=dict)
    """Entries XTRIM removed from each stream (XINFO's ``entries-added`` is the length
    plus this)."""
    on_trim: Callable[[bytes, list[tuple[bytes, dict[bytes, bytes]]]], None] | None = None
    """Told of every XTRIM's removed entries as it removes them (the ledger archive's check
    that nothing leaves before the archive holds it)."""
    tournament_log: dict[bytes, list[bytes]] = field(default_factory=dict)
    """Every tournament event as ``append.lua``'s port appended it, by its stream's key
    (``sim.tournament_archive`` holds the simulated archive and Redis to these)."""
    on_tournament_trim: Callable[[bytes, int], None] | None = None
    """Told by the tournament trim's port (its stream's key, the version) just before it
    removes a tournament's keys."""
    on_set: Callable[[bytes], None] | None = None
    """Told of every plain SET's key as it is applied."""
    _xadds: int = 0
    _mints: int = 0
    now_ms: Callable[[], int] = lambda: 0

    def xadd(self, key: bytes, entry_id: bytes | None, fields: dict[bytes, bytes]) -> bytes:
        stream = self.streams.setdefault(key, [])
        if entry_id is None:
            ms = self.now_ms()
            last = stream[-1][0].split(b"-") if stream else [b"0", b"0"]
            seq = int(last[1]) + 1 if int(last[0]) >= ms else 0
            entry_id = b"%d-%d" % (max(ms, int(last[0])), seq)
        self._xadds += 1
        if self.drop_every and self._xadds % self.drop_every == 0 and b":events" in key:
            return entry_id
        stream.append((entry_id, fields))
        self.stream_ids.setdefault(key, []).append(_id(entry_id))
        return entry_id


@dataclass
class Faults:
    """What a process's calls to the store suffer (drawn from the run's one random source)."""

    rng: Any = None
    latency_s: float = 0.0005
    fail_before: float = 0.0
    fail_after: float = 0.0
    injected: int = 0


def _id(value: bytes) -> tuple[int, int]:
    ms, _, seq = value.partition(b"-")
    return int(ms), int(seq or 0)


class Pipeline:
    """A MULTI or a plain pipeline: the commands run at ``execute``, together."""

    def __init__(self, redis: SimRedis) -> None:
        self._redis = redis
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Pipeline]:
        def queue(*args: Any, **kwargs: Any) -> Pipeline:
            self._calls.append((name, args, kwargs))
            return self
        return queue

    async def execute(self) -> list[Any]:
        redis = self._redis
        await redis.io()
        return redis.returned("pipeline", [getattr(redis, f"_{name}")(*args, **kwargs)
                                           for name, args, kwargs in self._calls])

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        return None


def as_client(redis: SimRedis) -> Client:
    """The simulated connection where the stores expect a redis-py client (it answers the
    commands they send; see the module's doc)."""
    return cast(Client, redis)


class SimRedis:
    """One process's connection to the simulated Redis (``decode`` as redis-py's
    ``decode_responses``)."""

    def __init__(self, data: Data, faults: Faults | None = None, decode: bool = False) -> None:
        self.data = data
        self.faults = faults or Faults()
        self.decode = decode
        self.dead = False
        self.gate = asyncio.Event()
        self.gate.set()
        self.on_return: Callable[[str], None] | None = None
        """Told of every call as it returns, before the caller gets the answer (the aimed
        crashes: it may kill the process, and then raises)."""

    def returned(self, name: str, value: _T) -> _T:
        """``value``, the answer of the call ``name``, unless the process died as it came."""
        if self.on_return is not None:
            self.on_return(name)
            if self.dead:
                raise RedisConnectionError("the process is dead")
        return value

    def _out(self, value: bytes | None) -> Any:
        if value is None or not self.decode:
            return value
        return value.decode()

    async def io(self, *, may_fail: bool = True) -> None:
        """A round trip: the latency, the gate of a paused process, a fault before."""
        faults = self.faults
        await pause(faults.latency_s)
        if not self.gate.is_set():
            await self.gate.wait()
        if self.dead:
            raise RedisConnectionError("the process is dead")
        if may_fail and faults.rng is not None and faults.fail_before and \
                faults.rng.random() < faults.fail_before:
            faults.injected += 1
            raise RedisTimeoutError("simulated: failed before it was applied")

    async def after(self) -> None:
        """A reply lost after the command was applied."""
        faults = self.faults
        if faults.rng is not None and faults.fail_after and \
                faults.rng.random() < faults.fail_after:
            faults.injected += 1
            raise RedisTimeoutError("simulated: applied, then the reply timed out")

    # --- plain commands (sync bodies, shared by pipelines) -------------------------------

    def _get(self, key: str) -> Any:
        return self._out(self.data.strings.get(_b(key)))

    def _hgetall(self, key: str) -> Any:
        raw = self.data.hashes.get(_b(key), {})
        return {self._out(k): self._out(v) for k, v in raw.items()}

    def _hget(self, key: str, name: str) -> Any:
        return self._out(self.data.hashes.get(_b(key), {}).get(_b(name)))

    def _hmget(self, key: str, names: list[str]) -> Any:
        raw = self.data.hashes.get(_b(key), {})
        return [self._out(raw.get(_b(n))) for n in names]

    def _exists(self, *names: str) -> int:
        d = self.data
        return sum(1 for n in names if _b(n) in d.strings or _b(n) in d.hashes
                   or _b(n) in d.sets or _b(n) in d.streams)

    async def ping(self) -> bool:
        await self.io(may_fail=False)
        return True

    async def aclose(self) -> None:
        return None

    def pipeline(self, transaction: bool = True) -> Pipeline:
        return Pipeline(self)

    async def get(self, key: str) -> Any:
        await self.io()
        return self.returned("get", self._get(key))

    async def hgetall(self, key: str) -> Any:
        await self.io()
        return self.returned("hgetall", self._hgetall(key))

    async def hget(self, key: str, name: str) -> Any:
        await self.io()
        return self.returned("hget", self._hget(key, name))

    async def hmget(self, key: str, names: list[str]) -> Any:
        await self.io()
        return self.returned("hmget", self._hmget(key, names))

    async def lrange(self, key: str, start: int, end: int) -> list[Any]:
        await self.io()
        values = self.data.lists.get(_b(key), [])
        stop = len(values) if end == -1 else end + 1
        return [self._out(v) for v in values[start:stop]]

    async def hexists(self, key: str, name: str) -> bool:
        await self.io()
        return self.returned("hexists", _b(name) in self.data.hashes.get(_b(key), {}))

    async def hkeys(self, key: str) -> list[Any]:
        await self.io()
        return self.returned("hkeys", [self._out(k) for k in self.data.hashes.get(_b(key), {})])

    async def hsetnx(self, key: str, name: str, value: object) -> bool:
        await self.io()
        h = self.data.hashes.setdefault(_b(key), {})
        if _b(name) in h:
            return self.returned("hsetnx", False)
        h[_b(name)] = _b(value)
        await self.after()
        return self.returned("hsetnx", True)

    async def hset(self, key: str, name: str | None = None, value: object = None,
                   mapping: dict[str, object] | None = None) -> int:
        await self.io()
        h = self.data.hashes.setdefault(_b(key), {})
        pairs = dict(mapping or {})
        if name is not None:
            pairs[name] = value
        for k, v in pairs.items():
            h[_b(k)] = _b(v)
        await self.after()
        return self.returned("hset", len(pairs))

    async def delete(self, *names: str) -> int:
        await self.io()
        gone = 0
        for n in names:
            for space in (self.data.strings, self.data.hashes, self.data.sets,
                          self.data.streams):
                if space.pop(_b(n), None) is not None:
                    gone += 1
            self.data.stream_ids.pop(_b(n), None)
        return self.returned("delete", gone)

    async def set(self, key: str, value: object) -> bool:
        """A plain SET (no script of the stores sends one; a broken archiver's tombstone
        in the invariant tests): ``data.on_set`` is told as it is applied."""
        await self.io()
        self.data.strings[_b(key)] = _b(value)
        if self.data.on_set is not None:
            self.data.on_set(_b(key))
        await self.after()
        return self.returned("set", True)

    async def srem(self, key: str, *members: str) -> int:
        await self.io()
        s = self.data.sets.get(_b(key), set())
        gone = {_b(m) for m in members} & s
        s -= gone
        await self.after()
        return self.returned("srem", len(gone))

    async def zadd(self, key: str, mapping: dict[str, float]) -> int:
        """A sorted set as a hash of member -> score (the tournament service's wake set)."""
        await self.io()
        z = self.data.zsets.setdefault(_b(key), {})
        new = sum(1 for m in mapping if _b(m) not in z)
        z.update({_b(m): float(v) for m, v in mapping.items()})
        await self.after()
        return self.returned("zadd", new)

    async def zrem(self, key: str, *members: str) -> int:
        await self.io()
        z = self.data.zsets.get(_b(key), {})
        gone = sum(1 for m in members if z.pop(_b(m), None) is not None)
        await self.after()
        return self.returned("zrem", gone)

    async def xlen(self, key: str) -> int:
        await self.io()
        return self.returned("xlen", len(self.data.streams.get(_b(key), ())))

    async def sadd(self, key: str, *members: str) -> int:
        await self.io()
        s = self.data.sets.setdefault(_b(key), set())
        new = {_b(m) for m in members} - s
        s |= new
        return self.returned("sadd", len(new))

    async def xadd(self, key: str, fields: dict[str, object], id: str = "*") -> Any:
        """A raw XADD (only the contract test writes one: behind the store's back)."""
        await self.io()
        entry = self.data.xadd(_b(key), None if id == "*" else _b(id),
                               {_b(k): _b(v) for k, v in fields.items()})
        return self.returned("xadd", self._out(entry))

    async def smembers(self, key: str) -> builtins.set[Any]:
        await self.io()
        return self.returned("smembers", {self._out(m) for m in self.data.sets.get(_b(key), set())})

    async def xrange(self, key: str, min: str = "-", max: str = "+",
                     count: int | None = None) -> list[Any]:
        await self.io()
        return self.returned("xrange", self._xrange(key, min, max, count))

    def _xrange(self, key: str, lo: str, hi: str, count: int | None) -> list[Any]:
        entries = self.data.streams.get(_b(key), [])
        ids = self.data.stream_ids.get(_b(key), [])
        exclusive = lo.startswith("(")
        start = (0, 0) if lo in ("-", "(-") else _id(_b(lo.lstrip("(")))
        first = (bisect.bisect_right if exclusive else bisect.bisect_left)(ids, start)
        last = len(ids) if hi == "+" else bisect.bisect_right(ids, _id(_b(hi)))
        if count is not None:
            last = min(last, first + count)
        out = self._out
        return [(out(entry_id), {out(k): out(v) for k, v in fields.items()})
                for entry_id, fields in entries[first:last]]

    async def xtrim(self, name: str, maxlen: int | None = None, approximate: bool = True,
                    minid: str | None = None, limit: int | None = None) -> int:
        """XTRIM ``MINID`` (the wallet's ledger archive): the entries below ``minid`` go."""
        if minid is None or maxlen is not None:
            raise NotImplementedError("the simulated XTRIM takes MINID only")
        await self.io()
        removed = self._xtrim(name, minid)
        await self.after()
        return self.returned("xtrim", removed)

    def _xtrim(self, name: str, minid: str) -> int:
        data, key = self.data, _b(name)
        ids = data.stream_ids.get(key, [])
        cut = bisect.bisect_left(ids, _id(_b(minid)))
        if not cut:
            return 0
        entries = data.streams[key]
        removed = entries[:cut]
        del entries[:cut]
        del ids[:cut]
        data.trimmed[key] = data.trimmed.get(key, 0) + cut
        if data.on_trim is not None:
            data.on_trim(key, removed)
        return cut

    async def xinfo_stream(self, name: str) -> dict[str, Any]:
        """XINFO STREAM's length and ``entries-added`` (Redis 7), nothing else."""
        await self.io()
        key = _b(name)
        length = len(self.data.streams.get(key, ()))
        return self.returned("xinfo_stream", {
            "length": length, "entries-added": length + self.data.trimmed.get(key, 0)})

    async def xrevrange(self, key: str, max: str = "+", min: str = "-",
                        count: int | None = None) -> list[Any]:
        await self.io()
        found = self._xrange(key, min, max, None)[::-1]
        return self.returned("xrevrange", found[:count] if count is not None else found)

    # --- scripts -------------------------------------------------------------------------

    async def script_load(self, _script: str) -> str:
        return ""

    async def evalsha(self, _sha: str, numkeys: int, *args: Any) -> Any:
        """Only the event store's append runs through EVALSHA."""
        await self.io()
        raw = [a if type(a) is bytes else _b(a) for a in args]  # bytes mostly: no call
        reply = scripts.append_script(self.data, raw[:numkeys], raw[numkeys:])
        await self.after()
        return self.returned("append", reply)

    async def eval(self, script: str, numkeys: int, *args: Any) -> Any:
        """Only the archiver's trims run through EVAL: a table's (``studkit/trim.lua``) and
        a finished tournament's (``studhistory.tournament_archive.TRIM_LUA``)."""
        await self.io()
        keys_, argv = [_b(a) for a in args[:numkeys]], [_b(a) for a in args[numkeys:]]
        if "'gone'" in script:
            reply = scripts.tournament_trim_script(self.data, keys_, argv)
            await self.after()
            return self.returned("tournament_trim", reply)
        reply = scripts.trim_script(self.data, keys_, argv)
        await self.after()
        return self.returned("trim", reply)

    def register_script(self, source: str) -> Callable[..., Any]:
        name = scripts.script_name(source)
        body = scripts.SCRIPTS[name]

        async def run(keys: list[str], args: list[object]) -> Any:
            await self.io()
            reply = body(self, [_b(k) for k in keys], [_b(a) for a in args])
            await self.after()
            return self.returned(name, reply)
        return run

