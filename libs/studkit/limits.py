"""Bounds on what one caller may hold open at a time, shared by the services' servers.

:class:`StreamLimiter` counts the server streams each principal and each peer (one client
connection, as ``context.peer()`` names it) has open, and refuses one more past either limit
with :class:`TooManyStreams` (``RESOURCE_EXHAUSTED``, reason ``too_many_streams``). Counts
live in this process only; nothing is awaited, so a count can never be left behind by a
cancelled stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import time
import urllib.parse
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from studkit.auth import Principal, Role
from studkit.errors import ResourceExhausted


class TooManyStreams(ResourceExhausted):
    """Raised when a caller, or its connection, already has as many streams open as allowed;
    close one (or wait for one to end) and retry."""

    default_reason = "too_many_streams"


class StreamLimiter:
    """At most ``per_principal`` open streams per caller and ``per_peer`` per connection.

    >>> import asyncio
    >>> from studkit.auth import Role
    >>> limiter = StreamLimiter(per_principal=1, per_peer=5)
    >>> ann = Principal(Role.PLAYER, "ann")
    >>> async def twice() -> str:
    ...     async with limiter.hold(ann, "ipv4:127.0.0.1:5000"):
    ...         try:
    ...             async with limiter.hold(ann, "ipv4:127.0.0.1:5001"):
    ...                 return "opened"
    ...         except TooManyStreams as exc:
    ...             return exc.reason
    >>> asyncio.run(twice()), limiter.open_streams(ann)
    ('too_many_streams', 0)
    """

    def __init__(self, per_principal: int, per_peer: int) -> None:
        if per_principal < 1 or per_peer < 1:
            raise ValueError("stream limits must be at least 1")
        self.per_principal = per_principal
        self.per_peer = per_peer
        self._principals: Counter[str] = Counter()
        self._peers: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, principal: Principal, peer: str) -> AsyncIterator[None]:
        """Count one stream of ``principal`` on ``peer`` while the block runs; raise
        :class:`TooManyStreams` instead when either is at its limit."""
        who = principal.subject
        if self._principals[who] >= self.per_principal:
            raise TooManyStreams(
                f"{who} already has {self.per_principal} streams open (the limit)")
        if self._peers[peer] >= self.per_peer:
            raise TooManyStreams(
                f"this connection already has {self.per_peer} streams open (the limit)")
        self._principals[who] += 1
        self._peers[peer] += 1
        try:
            yield
        finally:
            _release(self._principals, who)
            _release(self._peers, peer)

    def open_streams(self, principal: Principal) -> int:
        """How many streams ``principal`` has open now."""
        return self._principals[principal.subject]

    def open_on_peer(self, peer: str) -> int:
        """How many streams are open on connection ``peer`` now."""
        return self._peers[peer]

    def tracked(self) -> int:
        """How many principals and peers have an entry (both drop to zero when idle)."""
        return len(self._principals) + len(self._peers)


def _release(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]


# --- call rates ------------------------------------------------------------------------------

class RateLimited(ResourceExhausted):
    """Raised when a player, or one client connection of players, calls faster than allowed;
    back off and retry."""

    default_reason = "rate_limited"


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class CallRateLimiter:
    """Token buckets: a player may make ``per_player`` calls a second (bursts up to
    ``burst_s`` seconds' worth), one client carrying players ``per_peer``, and one client
    ``refused_per_peer`` calls whose token is refused (missing, forged, garbage, expired).
    A client (the ``peer`` argument) is the key :class:`CallerKeys` gives: the connection,
    or the client address a trusted proxy attests. Services, operators and auditors are not
    limited by the first two (they are few and trusted; a service such as the table must
    never be slowed by its players' floods).

    A call whose token is already known good (the verifier's cache) is counted as its
    caller, never against its client's refused calls: a caller with a good token is not
    refused for another caller's bad tokens on its connection (issue 29, G6: grpc-python's
    shared subchannels, or a gateway, put many callers on one connection). Any other call
    is checked twice. :meth:`admit`, before its token is even looked at, refuses a client
    that has spent its refused-call budget: a dictionary lookup, so a flood costs no
    signature check and no decoding past its budget, forged and garbage tokens included (a
    token never seen before from such a client is refused with it until the budget
    refills). :meth:`check`, once the caller is known, counts a player's call against the
    player and the client; :meth:`refused` counts a refused token against the client. A
    rate-limited call is answered after :meth:`hold`: half a second at least, then one
    client's held calls one after another, so a flooding client gets a trickle of
    refusals, whatever it keeps in flight. While a player has a rate-limited call held,
    every other call of theirs is refused too (:meth:`check`, before any work): a client that
    keeps calls in flight past its rate is served nothing until it slows down, instead of
    its whole allowance (100 ``GetTable`` a second by default: issue 17, F5, where the
    allowance, not the refusals, cost the other tables their latency). A client within its
    rate, or one that waits for its refusal before it calls again, is never held.

    >>> now = [0.0]
    >>> limiter = CallRateLimiter(per_player=2, per_peer=100, burst_s=1, clock=lambda: now[0],
    ...                           refused_per_peer=1, refused_burst_s=1)
    >>> ann = Principal(Role.PLAYER, "ann")
    >>> limiter.check(ann, "p1"); limiter.check(ann, "p1")
    >>> limiter.check(ann, "p1")
    Traceback (most recent call last):
    ...
    studkit.limits.RateLimited: more than 2 calls a second from player:ann
    >>> now[0] = 1.0; limiter.check(ann, "p1")  # refilled
    >>> limiter.admit("p2"); limiter.refused("p2")  # one bad token: the budget is spent
    >>> limiter.admit("p2")
    Traceback (most recent call last):
    ...
    studkit.limits.RateLimited: more than 1 refused calls a second on this connection
    >>> limiter.admit("p1")  # another connection is not affected
    >>> async def held_back() -> str:
    ...     limiter.hold_s = 0.05
    ...     waiting = asyncio.ensure_future(limiter.hold("p1", None, ann))
    ...     await asyncio.sleep(0)
    ...     try:
    ...         limiter.check(ann, "p1")  # ann has a refill, but a call of hers is held
    ...     except RateLimited as exc:
    ...         return str(exc)
    ...     finally:
    ...         await waiting
    ...     return "served"
    >>> now[0] = 5.0; asyncio.run(held_back())
    'player:ann has a rate-limited call held back: slow down'
    >>> limiter.check(ann, "p1")  # nothing held: served again
    """

    def __init__(self, per_player: float, per_peer: float, burst_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic, tracked: int = 100_000,
                 refused_per_peer: float = 5.0, refused_burst_s: float = 1.0,
                 hold_s: float = 0.5,
                 answers_per_peer: float = 20.0, max_held: int = 1000) -> None:
        self._rates = (per_player, per_peer)
        self._refused_rate = refused_per_peer
        self._refused_burst = refused_burst_s
        self._burst = burst_s
        self._clock = clock
        self._tracked = tracked
        self.hold_s = hold_s
        """How long a rate-limited call waits at least before it is answered (:meth:`hold`)."""
        self.answers_per_peer = answers_per_peer
        """How many held calls of one connection are answered a second at most."""
        self.max_held = max_held
        self._held = 0
        self._held_on: Counter[str] = Counter()
        self._held_players: Counter[str] = Counter()
        self._next_answer: dict[str, float] = {}
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CallRateLimiter:
        """``STUD_RATE_PER_PLAYER`` (calls/s, default 100), ``STUD_RATE_PER_CONNECTION``
        (default 400), ``STUD_RATE_REFUSED_PER_CONNECTION`` (calls/s with a refused token,
        default 5, with one second of burst), ``STUD_RATE_LIMITED_HOLD_MS`` (default 500;
        0 answers at once) and ``STUD_RATE_LIMITED_ANSWERS_PER_CONNECTION`` (held calls
        answered per second, default 20)."""
        return cls(float(env.get("STUD_RATE_PER_PLAYER", "100")),
                   float(env.get("STUD_RATE_PER_CONNECTION", "400")),
                   refused_per_peer=float(env.get("STUD_RATE_REFUSED_PER_CONNECTION", "5")),
                   hold_s=float(env.get("STUD_RATE_LIMITED_HOLD_MS", "500")) / 1000,
                   answers_per_peer=float(env.get("STUD_RATE_LIMITED_ANSWERS_PER_CONNECTION",
                                                  "20")))

    def _take(self, key: str, rate: float, burst_s: float | None = None) -> bool:
        now = self._clock()
        capacity = max(1.0, rate * (self._burst if burst_s is None else burst_s))
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(capacity, now)
            self._buckets[key] = bucket
            if len(self._buckets) > self._tracked:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.stamp) * rate)
            bucket.stamp = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _has(self, key: str, rate: float) -> bool:
        """Whether ``key``'s bucket holds a token now (nothing taken; no bucket is made)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return True
        tokens = bucket.tokens + (self._clock() - bucket.stamp) * rate
        return tokens >= 1.0

    def admit(self, peer: str) -> None:
        """Before a token not known good is checked: raise :class:`RateLimited` if client
        ``peer`` has spent its refused-call budget (nothing is counted). Its player-call
        budget is not looked at here: whether the caller is a player is known only once the
        token is (:meth:`check`)."""
        if not self._has(f"r|{peer}", self._refused_rate):
            where = "from this address" if peer.startswith("addr:") else "on this connection"
            raise RateLimited(f"more than {self._refused_rate:g} refused calls a second "
                              f"{where}")

    async def hold(self, peer: str, remaining_s: float | None,
                   principal: Principal | None = None) -> None:
        """Before a rate-limited call of connection ``peer`` (by ``principal``, when its
        token was checked) is answered: wait at least
        :attr:`hold_s`, and answer that connection's held calls one after another, at most
        :attr:`answers_per_peer` a second (each ends before its deadline, ``remaining_s``
        from now). However many calls a flooding connection keeps in flight, it gets about
        that many refusals a second, each costing a sleeping coroutine meanwhile, instead of
        as many as it can ask for; at most :attr:`max_held` calls wait at once in the
        process (past that they are answered at once), so the waiting never grows without
        bound. Meanwhile a player's other calls are refused (:meth:`check`)."""
        if self.hold_s <= 0 or self._held >= self.max_held:
            return
        now = self._clock()
        answer_at = max(now + self.hold_s, self._next_answer.get(peer, 0.0))
        self._next_answer[peer] = answer_at + 1.0 / self.answers_per_peer
        delay = answer_at - now if remaining_s is None else min(answer_at - now,
                                                                 remaining_s - 0.2)
        player = principal.subject if principal is not None and \
            principal.role is Role.PLAYER else None
        self._held += 1
        self._held_on[peer] += 1
        if player is not None:
            self._held_players[player] += 1
        try:
            if delay > 0:
                await asyncio.sleep(delay)
        finally:
            self._held -= 1
            self._held_on[peer] -= 1
            if self._held_on[peer] <= 0:
                del self._held_on[peer]
                self._next_answer.pop(peer, None)
            if player is not None:
                _release(self._held_players, player)

    def held(self) -> int:
        """How many rate-limited calls are waiting now."""
        return self._held

    def refused(self, peer: str) -> None:
        """Count one call of connection ``peer`` whose token was refused."""
        self._take(f"r|{peer}", self._refused_rate, self._refused_burst)

    def check(self, principal: Principal, peer: str) -> None:
        """Count one call; raise :class:`RateLimited` past a limit, or while a rate-limited
        call of the same player is held (:meth:`hold`; nothing is counted then): the call is
        not made."""
        if principal.role is not Role.PLAYER:
            return
        subject = principal.subject  # made once (issue 35: every call of every player)
        if subject in self._held_players:
            raise RateLimited(f"{subject} has a rate-limited call held back: slow down")
        per_player, per_peer = self._rates
        if not self._take(f"p|{subject}", per_player):
            raise RateLimited(f"more than {per_player:g} calls a second from {subject}")
        if not self._take(f"c|{peer}", per_peer):
            raise RateLimited(f"more than {per_peer:g} player calls a second on one "
                              "connection")


# --- whose budget a call spends --------------------------------------------------------------

TRUSTED_PROXIES_ENV = "STUD_TRUSTED_PROXIES"
"""Addresses or networks (``10.0.0.7``, ``10.8.0.0/16``, ``fd00::/8``; comma or space
separated) of the proxies whose ``x-forwarded-for`` a service believes: the ingress, the
gRPC-Web gateway. Unset or empty: none, every call is counted against its connection."""
FORWARDED_FOR = "x-forwarded-for"
MAX_HOPS = 16
"""Hops of ``x-forwarded-for`` looked at, from the last: past that, the header attests
nothing (a chain of more trusted proxies than that is not a deployment)."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class CallerKeys:
    """Whose budgets (:class:`CallRateLimiter`'s per-connection ones) a call spends: the
    client address a trusted proxy attests, else the connection (``context.peer()``).

    A proxy in ``trusted`` (a gateway that carries many clients on a few upstream
    connections) appends the address of its own peer to ``x-forwarded-for``. Read from the
    last hop back, past the trusted proxies (a gateway behind another proxy), the first
    address is the client's: the key is ``addr:<client>``. Hops a client wrote itself come
    before the ones the proxies appended, so they are never read. A hop that is not an
    address, or no header at all, attests nothing: the key is the connection. From a peer
    that is not a trusted proxy the header is ignored, whatever it says.

    >>> keys = CallerKeys(["10.0.0.0/8"])
    >>> keys.key("ipv4:10.1.2.3:5000", [("x-forwarded-for", "6.6.6.6, 203.0.113.5")])
    'addr:203.0.113.5'
    >>> keys.key("ipv4:10.1.2.3:5000", [("x-forwarded-for", "203.0.113.5, 10.9.9.9")])
    'addr:203.0.113.5'
    >>> keys.key("ipv4:198.51.100.7:5000", [("x-forwarded-for", "203.0.113.5")])
    'ipv4:198.51.100.7:5000'
    >>> keys.key("ipv4:10.1.2.3:5000", [("x-forwarded-for", "unknown")])
    'ipv4:10.1.2.3:5000'
    """

    def __init__(self, trusted: Iterable[str] = ()) -> None:
        networks = []
        for entry in trusted:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                raise ValueError(f"{TRUSTED_PROXIES_ENV}: {entry!r} is not an address or "
                                 "a network (10.0.0.7, 10.8.0.0/16, fd00::/8)") from None
        self._trusted = tuple(networks)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CallerKeys:
        """From :data:`TRUSTED_PROXIES_ENV` (none when unset)."""
        raw = env.get(TRUSTED_PROXIES_ENV, "")
        return cls(e for e in raw.replace(",", " ").split() if e)

    @property
    def trusted(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return self._trusted

    def is_trusted(self, address: Address | None) -> bool:
        return address is not None and any(address in n for n in self._trusted)

    def key(self, peer: str, metadata: Sequence[tuple[str, str | bytes]] | None) -> str:
        """The key of a call from ``peer`` carrying ``metadata``."""
        if not self._trusted or not self.is_trusted(peer_address(peer)):
            return peer
        values = [v.decode(errors="replace") if isinstance(v, bytes) else v
                  for k, v in (metadata or ()) if k.lower() == FORWARDED_FOR]
        hops = ",".join(values).split(",")[-MAX_HOPS:]
        for hop in reversed(hops):
            address = hop_address(hop)
            if address is None:
                return peer
            if not self.is_trusted(address):
                return f"addr:{address}"
        return peer


def _plain(address: Address) -> Address:
    """An IPv4 address written as IPv6 (``::ffff:10.0.0.1``, a dual-stack listener's
    peers) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def peer_address(peer: str) -> Address | None:
    """The IP address of a gRPC peer (``ipv4:10.0.0.1:5000``, ``ipv6:[::1]:5000``, also
    percent-encoded); None for any other (a Unix socket).

    >>> peer_address("ipv6:%5B::ffff:10.0.0.1%5D:5000"), peer_address("unix:/tmp/s")
    (IPv4Address('10.0.0.1'), None)
    """
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host = urllib.parse.unquote(rest).rpartition(":")[0]
    try:
        return _plain(ipaddress.ip_address(host.removeprefix("[").removesuffix("]")))
    except ValueError:
        return None


def hop_address(hop: str) -> Address | None:
    """One hop of ``x-forwarded-for`` as an address (``203.0.113.5``, ``2001:db8::1``,
    also with a port: ``203.0.113.5:4711``, ``[2001:db8::1]:4711``); None if it is not one.

    >>> hop_address(" [2001:db8::1]:4711"), hop_address("unknown")
    (IPv6Address('2001:db8::1'), None)
    """
    text = hop.strip()
    if text.startswith("["):
        text, closed, port = text[1:].partition("]")
        if not closed or (port and not port.startswith(":")):
            return None
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return _plain(ipaddress.ip_address(text))
    except ValueError:
        return None


# --- log lines -------------------------------------------------------------------------------

class LogSampler:
    """At most ``first`` log lines per key (a refusal's code and reason) in each window of
    ``window_s`` seconds; past that the lines are counted, and when the window ends
    ``summary(key, suppressed, window_s)`` is called once per key that lost lines (from a
    timer on the running loop, so a flood that stops is still summed up). Keys are the
    service's own (status codes, reasons), a closed set; memory is one counter per key.

    >>> now = [0.0]
    >>> lines = []
    >>> sampler = LogSampler(first=2, window_s=10, clock=lambda: now[0],
    ...                      summary=lambda key, n, w: lines.append((key, n)))
    >>> [sampler.allow(("RESOURCE_EXHAUSTED", "rate_limited")) for _ in range(5)]
    [True, True, False, False, False]
    >>> now[0] = 10.0; sampler.allow(("RESOURCE_EXHAUSTED", "rate_limited")); lines
    True
    [(('RESOURCE_EXHAUSTED', 'rate_limited'), 3)]
    """

    def __init__(self, summary: Callable[[tuple[str, ...], int, float], None],
                 first: int = 20, window_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if first < 0 or window_s <= 0:
            raise ValueError("first must be >= 0 and window_s > 0")
        self.first = first
        self.window_s = window_s
        self._summary = summary
        self._clock = clock
        self._counts: Counter[tuple[str, ...]] = Counter()
        self._window_end = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def allow(self, key: tuple[str, ...]) -> bool:
        """Count one line of ``key``; whether to write it."""
        now = self._clock()
        if now >= self._window_end:
            self.flush()
            self._window_end = now + self.window_s
        self._counts[key] += 1
        if self._counts[key] <= self.first:
            return True
        if self._timer is None:
            with contextlib.suppress(RuntimeError):  # no running loop: summed up lazily
                self._timer = asyncio.get_running_loop().call_later(
                    max(0.0, self._window_end - now), self.flush)
        return False

    def flush(self) -> None:
        """Sum up the lines the current window dropped, and start afresh."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        dropped = {k: n - self.first for k, n in self._counts.items() if n > self.first}
        self._counts.clear()
        self._window_end = 0.0
        for key, count in sorted(dropped.items()):
            self._summary(key, count, self.window_s)
