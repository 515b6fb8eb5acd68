"""The tamper-evident chain of a stream's events (DESIGN §3a; docs/history.md "The chain").

Every envelope carries ``prev_digest``: the SHA-256 of the exact stored bytes of the event
before it in its stream (the bytes XADDed, and the bytes PostgreSQL archives), or
:data:`GENESIS` (32 zero bytes) for a stream's first event. The event store seals the links
when it appends (:mod:`studkit.store`) and the append script refuses an append whose first
link is not the stream's head; the script compares links only (Lua cannot hash cheaply).
Whether the bytes hash to what the chain says is checked by readers: :func:`verify_chain`
here, over whatever part of a stream they hold (Redis's hot window, PostgreSQL's rows, or
both in order), and ``stud replay verify``.

A table written before the chain existed has envelopes without a link. Its chain starts at
a recorded point: the first append after the upgrade links to the digest of the last stored
event and records that event's successor as where the chain begins (``since``, in the
stream's ``chain`` key). Envelopes before that point carry no link and are not checked; from
it on every envelope must carry one.

A break is named: the table, the sequence of the event whose bytes (or link) are wrong, the
digest the chain expected and the digest found. One byte changed in a stored event changes
its digest, so the next event's link no longer matches it; if the byte was in the event's own
link, that link is broken too. The verifier looks one event ahead to tell the two apart, so
it names the changed event, not its neighbour.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from stud.v1.envelope_pb2 import EventEnvelope

DIGEST_SIZE: Final = 32
GENESIS: Final = bytes(DIGEST_SIZE)
"""The link of a stream's first event: 32 zero bytes."""
_LINK_TAG: Final = bytes([10 << 3 | 2, DIGEST_SIZE])
"""The wire tag and length of ``prev_digest`` (field 10, 32 bytes)."""


def digest(raw: bytes) -> bytes:
    """The SHA-256 of an envelope's stored bytes (what the next event links to)."""
    return hashlib.sha256(raw).digest()


def short(value: bytes | None) -> str:
    """A digest as hex (``-`` for none, ``''`` shown as ``(empty)``)."""
    if value is None:
        return "-"
    return value.hex() if value else "(empty)"


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """The first broken link of a stream: event ``sequence``'s digest (or its link) is
    ``found`` where the chain says ``expected``; ``detail`` says which."""

    table_id: str
    sequence: int
    expected: bytes
    found: bytes
    detail: str

    def line(self) -> str:
        """One line naming the break (``stud replay verify`` prints it)."""
        return (f"table {self.table_id}: chain broken at event #{self.sequence}: expected "
                f"digest {short(self.expected)}, found {short(self.found)} ({self.detail})")

    def to_json(self) -> dict[str, object]:
        return {"table": self.table_id, "sequence": self.sequence,
                "expected": self.expected.hex(), "found": self.found.hex(),
                "detail": self.detail}


@dataclass(frozen=True, slots=True)
class _Pending:
    """A link found broken at event ``sequence``: whose fault it is shows at the next one."""

    sequence: int
    link: bytes
    """What event ``sequence`` records as its predecessor's digest."""
    before: bytes
    """The digest of its predecessor's bytes (or the start digest)."""
    own: bytes
    """The digest of event ``sequence``'s own bytes."""
    first: bool
    """Whether the predecessor is before what was fed (the start digest)."""


class ChainVerifier:
    """Feed a stream's stored envelopes in order, one at a time (:meth:`feed`), then
    :meth:`finish`; each returns the first break, once, or None. Streams from any size of
    log (Redis's pages, PostgreSQL's rows) without holding it.

    ``start`` is the digest of the event before the first one fed: :data:`GENESIS` from a
    stream's beginning, the archive's last digest when continuing it, None when unknown (the
    first link is then taken as it is). ``since`` is the recorded start of a pre-existing
    table's chain: envelopes before it may lack a link, from it on none may (None: an
    envelope without a link is accepted until the first one with a link)."""

    def __init__(self, table_id: str, start: bytes | None = GENESIS, *,
                 since: int | None = None) -> None:
        self.table_id = table_id
        self.since = since
        self.last: bytes | None = start
        """The digest of the last event fed (the start digest before any)."""
        self.sequence = 0
        """The sequence of the last event fed (0 before any)."""
        self.count = 0
        self.chained = 0
        """How many of the events fed carry a link (the rest predate the chain)."""
        self._started = False
        self._pending: _Pending | None = None
        self._broken = False

    def feed(self, raw: bytes) -> ChainBreak | None:
        """One more stored envelope (its exact bytes)."""
        if self._broken:
            return None
        own = digest(raw)
        if (self._started and self._pending is None and raw[-34:-32] == _LINK_TAG
                and raw[-32:] == self.last):
            # The store serializes deterministically, so the link (field 10) ends the bytes:
            # an envelope that links to its predecessor is confirmed without parsing it (a
            # link that does not match takes the full path below).
            self.last = own
            self.sequence += 1
            self.count += 1
            self.chained += 1
            return None
        try:
            envelope: EventEnvelope | None = EventEnvelope.FromString(raw)
        except DecodeError:
            envelope = None
        sequence = envelope.sequence if envelope is not None and envelope.sequence else (
            self.sequence + 1)
        link = envelope.prev_digest if envelope is not None else None
        before, first, previous = self.last, self.count == 0, self.sequence
        self.last, self.sequence = own, sequence
        if not first and self._pending is None and sequence != previous + 1:
            self._broken = True
            return ChainBreak(self.table_id, previous + 1, b"" if link is None else link,
                              before or b"", f"events #{previous + 1}..#{sequence - 1} are "
                              f"missing (expected: what event #{sequence} links to; found: "
                              f"the digest of event #{previous})")
        self.count += 1
        if self._pending is not None:
            return self._resolve(link is None or link != self._pending.own, link)
        if link == b"" and not self._started and (self.since is None or sequence < self.since):
            return None  # written before the chain: not linked, not checked
        if not self._started and sequence == self.since and link == GENESIS:
            self._started = True  # a chain begun where the last old event had left Redis
            self.chained += 1
            return None
        self._started = True
        malformed = link is None or len(link) != DIGEST_SIZE
        self.chained += not malformed
        if malformed or (before is not None and link != before):
            self._pending = _Pending(sequence, b"" if link is None else link, before or b"", own,
                                     first)
        return None

    def finish(self, head: bytes | None = None) -> ChainBreak | None:
        """The end of what was fed; ``head`` is the digest the store records for the
        stream's last event (Redis's chain head), checked when given."""
        if self._broken:
            return None
        if self._pending is not None:
            return self._resolve(head is not None and head != self._pending.own, head)
        if head is not None and self.count and head != self.last:
            self._broken = True
            return ChainBreak(self.table_id, self.sequence, head, self.last or b"",
                              "the stream's recorded head does not match this event's bytes")
        return None

    def _resolve(self, own_is_wrong: bool, later: bytes | None) -> ChainBreak:
        """The pending break, knowing whether the event after it (or the head) disowns the
        event too: then the event itself changed; else its predecessor did (or is missing)."""
        pending = self._pending
        assert pending is not None
        self._pending = None
        self._broken = True
        at = pending.sequence
        if own_is_wrong:
            return ChainBreak(self.table_id, at, later or b"", pending.own,
                              f"event #{at}'s bytes are not what the chain recorded, and its "
                              "own link is wrong")
        if pending.first:
            return ChainBreak(self.table_id, at, pending.before, pending.link,
                              f"event #{at}'s link does not continue the chain before it")
        return ChainBreak(self.table_id, at - 1, pending.link, pending.before,
                          f"event #{at - 1}'s bytes are not what event #{at} links to "
                          "(changed, or an event between them is missing)")


def verify_chain(table_id: str, envelopes: Iterable[bytes], start: bytes | None = GENESIS,
                 *, since: int | None = None, head: bytes | None = None) -> ChainBreak | None:
    """The first broken link of ``envelopes`` (a stream's stored bytes, in order), or None.

    ``start``: the digest of the event before the first one (:data:`GENESIS` from the
    stream's start, the archive's last digest when continuing it, None: unknown). ``since``
    and ``head``: as :class:`ChainVerifier` and :meth:`ChainVerifier.finish`."""
    verifier = ChainVerifier(table_id, start, since=since)
    for raw in envelopes:
        broken = verifier.feed(raw)
        if broken is not None:
            return broken
    return verifier.finish(head)
