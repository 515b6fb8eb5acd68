"""The invariants, each a comparison that can come out false (STYLE §11), checked after every
step of a run and at its end. Each returns the violations it found (empty: none); the tests
in ``tests/sim/test_invariants.py`` break each one on purpose and see it reported."""

from __future__ import annotations

import json
import operator
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from rules.events import DownCardDealt, Folded, HandEnded, HandExposed, HandMucked, HandShown
from sim.archive import whole
from sim.world import World
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.chain import GENESIS, digest
from studkit.mapping import is_room_event
from table.actor import TableActor, decode
from table.room import Room
from wallet.protection import check as check_move
from wallet.store import BALANCES, LEDGER


def envelopes(world: World, table_id: str) -> list[EventEnvelope]:
    """The table's stored envelopes, in order (the archive's head first, once trimmed)."""
    return [EventEnvelope.FromString(raw) for raw in whole(world, table_id)]


def chips(world: World, deposited: int) -> list[str]:
    """No chip created or lost: every account but the outside one holds what was deposited,
    and the balances with the outside account sum to zero."""
    raw = world.data.hashes.get(BALANCES.encode(), {})
    balances = {k.decode(): int(v) for k, v in raw.items()}
    inside = sum(v for k, v in balances.items() if k != "external")
    out = []
    if inside != deposited:
        out.append(f"chips: the accounts hold {inside}, {deposited} were deposited")
    if sum(balances.values()) != 0:
        out.append(f"chips: the balances sum to {sum(balances.values())}, not 0")
    negative = [k for k, v in balances.items() if v < 0 and k != "external"]
    if negative:
        out.append(f"chips: negative balances {negative}")
    return out


def ledger(world: World, start: int = 0, settled: Counter[tuple[str, str]] | None = None
           ) -> tuple[list[str], Counter[tuple[str, str]]]:
    """The ledger sums to zero, transaction by transaction; each hand settled at most once
    (the settlements counted per table and hand; from entry ``start`` on, added to
    ``settled``)."""
    out = []
    settled = Counter() if settled is None else settled
    twice = [key for key, n in settled.items() if n > 1] if start == 0 else []
    for entry_id, fields in stored_ledger(world, start):
        record = json.loads(fields[b"tx"])
        total = sum(int(amount) for _account, amount in record["postings"])
        if total != 0:
            out.append(f"ledger: transaction {entry_id.decode()} sums to {total}")
        if record["kind"] == "settlement":
            key = (record["table_id"], record["hand_id"])
            settled[key] += 1
            if settled[key] == 2:
                twice.append(key)
    out += [f"ledger: hand {hand} of {table} settled {settled[(table, hand)]} times"
            for table, hand in twice]
    return out, settled


def stored_ledger(world: World, start: int = 0) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The ledger from its ``start``-th transaction on, as stored: the head the archiver
    trimmed from Redis (``sim.ledger_archive`` holds the archive to it, as appended), then
    the stream."""
    data, key = world.data, LEDGER.encode()
    trimmed = data.trimmed.get(key, 0)
    head = [(tx, fields) for tx, fields, _lines in data.ledger_log[start:trimmed]]
    return head + data.streams.get(key, [])[max(start - trimmed, 0):]


def ledger_length(world: World) -> int:
    key = LEDGER.encode()
    return world.data.trimmed.get(key, 0) + len(world.data.streams.get(key, []))


def fold_equals_live(table_id: str, actor: TableActor, stored: list[EventEnvelope]) -> list[str]:
    """A fold of the log up to the live table's version equals the live state."""
    if actor.lock.locked():
        return []  # a commit is between its append and its adoption
    fresh = TableActor(table_id, actor.deps)
    fresh.fold([envelope for envelope in stored if envelope.sequence <= actor.version])
    if fresh.room != actor.room:
        return [f"fold: table {table_id} at version {actor.version}: the fold of its log "
                f"differs from the live state ({_diff(fresh.room, actor.room)})"]
    return []


def _diff(a: Room, b: Room) -> str:
    names = [f for f in Room.__dataclass_fields__ if getattr(a, f) != getattr(b, f)]
    return "; ".join(f"{n}: log {str(getattr(a, n))[:200]} live {str(getattr(b, n))[:200]}"
                     for n in names)


def secrecy(table_id: str, stored: list[EventEnvelope],
            folded: dict[int, set[int]] | None = None) -> list[str]:
    """No down card in the table's stream: a down card is dealt as "a down card", and no
    folded hand is ever shown, exposed or mucked with its cards (``folded``: the seats
    folded in each hand so far)."""
    out = []
    folded = defaultdict(set) if folded is None else folded
    for envelope in stored:
        if envelope.event_type not in _SECRET_TYPES or not envelope.hand_number:
            continue  # no other event can carry or follow a down card
        event: Any = decode(envelope)
        hand = envelope.hand_number
        if isinstance(event, DownCardDealt) and event.card is not None:
            out.append(f"secrecy: table {table_id} hand {hand}: a down card of seat "
                       f"{event.seat} is in the stream (sequence {envelope.sequence})")
        elif isinstance(event, Folded):
            folded[hand].add(event.seat)
        elif isinstance(event, HandShown | HandExposed | HandMucked) and \
                event.seat in folded[hand] and bool(getattr(event, "down", ())):
            out.append(f"secrecy: table {table_id} hand {hand}: the folded seat "
                       f"{event.seat}'s down cards are in the stream")
    return out


_SECRET_TYPES = frozenset({"DownCardDealt", "Folded", "HandShown", "HandExposed",
                           "HandMucked"})
"""The events the secrecy check reads (by the envelope's ``event_type``, which names the
message its payload is decoded as): every other one is skipped undecoded."""


def command_ids(world: World, table_id: str, stored: list[EventEnvelope]) -> list[str]:
    """Every command id's events appear once: the entries carrying a command id are exactly
    those its recorded outcome names, one append's worth."""
    by_command: dict[str, list[int]] = defaultdict(list)
    for envelope in stored:
        by_command[envelope.command_id].append(envelope.sequence)
    recorded = world.data.hashes.get(keys.table_commands(table_id).encode(), {})
    if world.archive is not None:  # the records of the trimmed events: in the archive
        recorded = {**world.archive.commands.get(table_id, {}), **recorded}
    out = []
    for command, sequences in by_command.items():
        outcome = recorded.get(command.encode())
        if outcome is None:
            out.append(f"commands: table {table_id}: {command} has events but no record")
            continue
        ids = [int(i.split(b"-")[1]) for i in outcome.split(b" ")[1:]]
        if ids != sequences:
            out.append(f"commands: table {table_id}: {command}'s events are at {sequences}, "
                       f"its record says {ids}")
    sequences = [e.sequence for e in stored]
    if sequences != list(range(1, len(stored) + 1)):
        out.append(f"commands: table {table_id}: the stream's sequences have a gap or repeat")
    return out


def fenced(world: World, start: int = 0) -> list[str]:
    """A paused former owner changed nothing: after a takeover no append of an older epoch
    of that table was applied (the appends from ``start`` on)."""
    out = []
    for t in world.takeovers:
        stream = keys.table_stream(t.table_id)
        for s, epoch, n in world.data.appends[max(t.at, start):]:
            if s == stream and epoch and int(epoch) < t.epoch and n:
                out.append(f"fence: table {t.table_id}: epoch {epoch} appended {n} events "
                           f"after epoch {t.epoch} took over")
    return out


def settled_once(world: World, table_id: str, stored: list[EventEnvelope],
                 settled: Counter[tuple[str, str]]) -> list[str]:
    """At the end: every hand that ended was settled exactly once at the wallet."""
    ended = {e.hand_number for e in stored if e.event_type == "HandEnded"
             and not is_room_event(e) and isinstance(decode(e), HandEnded)}
    missing = sorted(h for h in ended if settled[(table_id, f"h{h}")] != 1)
    return [f"settle: table {table_id}: hands {missing[:5]} not settled once"] if missing else []


def escrows(world: World, table_id: str, room: Room) -> list[str]:
    """At the end, the table settled: each seat's escrow at the wallet equals its stack."""
    holders = world.data.hashes.get(keys.wallet_key(f"seats:{table_id}").encode(), {})
    raw = world.data.hashes.get(BALANCES.encode(), {})
    out = []
    for number in range(1, len(room.table.seats) + 1):
        seat = room.table.seat(number)
        holder = holders.get(str(number).encode())
        escrow = int(raw.get(f"seat:{table_id}:{number}".encode(), b"0"))
        want = (None, 0) if seat is None else (seat.player_id, seat.stack)
        have = (None if holder is None else holder.decode(), escrow)
        if want != have and not (seat is not None and seat.stack == 0 and holder is None):
            out.append(f"escrow: table {table_id} seat {number}: wallet {have}, table {want}")
    return out


class Audit:
    """The cheap invariants after every append the simulated store applies, as it applies
    it (``Data.audit``; O(1) per event): a table append leaves no gap (the stream holds
    every entry due, each envelope at its sequence, carrying its command's id), appends a
    command id's events once (never a second time), and comes from the table's current
    epoch (a paused former owner appends nothing); a wallet transaction creates and loses
    no chip (its balances move by a sum of zero) and leaves no account but the outside one
    negative. What it finds goes to ``report`` at once, with the simulated time."""

    def __init__(self, world: World, report: Callable[[list[str]], None]) -> None:
        self.world = world
        self.report = report
        self.commands: dict[str, set[bytes]] = defaultdict(set)
        self.appends = self.transactions = 0
        self.parsed: dict[bytes, EventEnvelope] = {}
        """The envelopes parsed here, by their stored bytes, until a :class:`Follower`
        reads them (it parses each once, not twice)."""

    def _at(self) -> str:
        return f"at its append, t={self.world.loop.time():.3f}"

    def appended(self, table_id: str, stream: bytes, epoch: bytes, command_id: bytes,
                 payloads: list[bytes], length: int, version: int) -> None:
        """``payloads`` appended to ``stream`` (``length`` entries and ``version`` before)
        by ``epoch``."""
        self.appends += 1
        if not payloads:
            return
        out = []
        held = len(self.world.data.streams.get(stream, ()))
        if held != length + len(payloads):
            out.append(f"commands: table {table_id}: the stream holds {held} entries, "
                       f"{length + len(payloads)} were due (a gap; {self._at()})")
        envelopes = [EventEnvelope.FromString(payload) for payload in payloads]
        self.parsed.update(zip(payloads, envelopes, strict=True))
        first = version + 1
        name = command_id.decode()
        out += self._links(table_id, stream, length, version, payloads, envelopes)
        for offset, envelope in enumerate(envelopes):
            if envelope.sequence != first + offset:
                out.append(f"commands: table {table_id}: sequence {envelope.sequence} "
                           f"appended after {first + offset - 1} (a gap or a repeat; "
                           f"{self._at()})")
            if envelope.command_id != name:
                out.append(f"commands: table {table_id}: event {envelope.sequence} of "
                           f"{name} carries the id {envelope.command_id!r} ({self._at()})")
        seen = self.commands[table_id]
        if command_id in seen:
            out.append(f"commands: table {table_id}: {name}'s events "
                       f"appended a second time (sequence {first}; {self._at()})")
        seen.add(command_id)
        current = self.world.epoch.get(table_id, 0)
        if epoch and int(epoch) < current:
            out.append(f"fence: table {table_id}: epoch {epoch.decode()} appended "
                       f"{len(payloads)} events after epoch {current} took over "
                       f"({self._at()})")
        if out:
            self.report(out)

    def _links(self, table_id: str, stream: bytes, length: int, version: int,
               payloads: list[bytes], envelopes: list[EventEnvelope]) -> list[str]:
        """The chain (``studkit.chain``): each appended envelope links to the digest of the
        stored bytes of the event before it (the stream's last one before the append, or
        GENESIS for a stream's first event)."""
        if length:
            link: bytes | None = digest(
                self.world.data.streams[stream][length - 1][1][b"envelope"])
        else:
            link = GENESIS if version == 0 else None  # the head left for the archive
        out = []
        for payload, envelope in zip(payloads, envelopes, strict=True):
            if link is not None and envelope.prev_digest != link:
                out.append(f"chain: table {table_id}: event {envelope.sequence} links to "
                           f"{envelope.prev_digest.hex()[:16]}, the stored event before it "
                           f"hashes to {link.hex()[:16]} ({self._at()})")
                break
            link = digest(payload)
        return out

    def applied(self, scope: str, before: dict[str, int], after: dict[str, int]) -> None:
        """A wallet transaction moved the balances ``before`` to ``after``."""
        self.transactions += 1
        moved = sum(after.values()) - sum(before.values())
        out = []
        if moved:
            out.append(f"chips: wallet transaction {scope} created {moved} chips "
                       f"(at its apply, t={self.world.loop.time():.3f})")
        negative = [a for a, v in after.items() if v < 0 and a != "external"]
        if negative:
            out.append(f"chips: wallet transaction {scope} leaves {negative} negative")
        if out:
            self.report(out)


FULL_EVERY = 20
"""A follower compares the whole of the rooms every this many comparisons."""
_room_fields = operator.attrgetter(*Room.__dataclass_fields__)
"""A room's fields, as a tuple."""


class Follower:
    """The per-step checks of one table, on the events appended since the last step: a
    fold of its own (which must equal the live table's state), the folded seats of each
    hand, the command ids seen."""

    def __init__(self, world: World, table_id: str, deps: Any) -> None:
        self.world = world
        self.table_id = table_id
        self.shadow = TableActor(table_id, deps)
        self.read = 0
        self.folded: dict[int, set[int]] = defaultdict(set)
        self.commands: set[str] = set()
        self.previous = ""
        self.log: list[EventEnvelope] = []
        """Every envelope read so far, parsed once (the watcher's check reads it)."""
        self.raw: list[bytes] = []
        """The stored bytes of :attr:`log` as they were read."""
        self.folded_to = 0
        self._verified: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None
        """The shadow's and the live room's fields when last found equal."""
        self.compared = 0
        """How many of :attr:`log` the shadow folded; the rest are read, not yet folded (the
        live table is not there yet: an append that timed out after it was applied is
        adopted at the table's next commit)."""
        self.unfoldable: int | None = None
        """The sequence up to which the log would not fold (a lost or changed event the
        other checks name), once found: the shadow stops there."""

    def step(self, actor: TableActor | None) -> list[str]:
        raw = stream_after(self.world, self.table_id, self.read)
        audit = self.world.data.audit
        parsed: dict[bytes, EventEnvelope] = audit.parsed if audit is not None else {}
        stored = []
        for entry in raw:  # as the audit parsed it at its append (the same bytes), or now
            envelope = parsed.pop(entry, None)
            stored.append(EventEnvelope.FromString(entry) if envelope is None else envelope)
        out = self._secrecy(stored) + self._commands(stored)
        self.read += len(stored)
        self.log += stored
        self.raw += raw
        if actor is None or actor.lock.locked():
            return out
        log, version, start = self.log, actor.version, self.folded_to
        while self.folded_to < len(log) and log[self.folded_to].sequence <= version:
            self.folded_to += 1
        if self.unfoldable is not None:
            return out
        if self.folded_to > start:
            try:
                self.shadow.fold(log[start:self.folded_to])
            except Exception as exc:  # any log the rules cannot fold
                self.unfoldable = log[self.folded_to - 1].sequence
                out.append(f"fold: table {self.table_id}: its log does not fold up to "
                           f"sequence {self.unfoldable} ({type(exc).__name__}: {exc}); "
                           f"not folded further")
                return out
        if self.shadow.version == actor.version and not self._same(self.shadow.room,
                                                                   actor.room):
            out.append(f"fold: table {self.table_id} at version {actor.version}: the fold "
                       f"of its log differs from the live state "
                       f"({_diff(self.shadow.room, actor.room)})")
        return out

    def _same(self, shadow: Room, live: Room) -> bool:
        """``shadow == live``, cheaper: a field that holds the very objects it held, on both
        sides, when they were last found equal is equal still (the rooms are immutable
        values that share what a fold leaves alone), so only the fields that changed are
        compared. Every :data:`FULL_EVERY`-th comparison compares it all, which catches a
        field changed in place behind the immutability."""
        self.compared += 1
        shadow_fields, live_fields = _room_fields(shadow), _room_fields(live)
        verified = self._verified
        if verified is None or self.compared % FULL_EVERY == 0:
            equal = shadow == live
        else:
            equal = True
            for a, b, was_a, was_b in zip(shadow_fields, live_fields, *verified, strict=True):
                if (a is not was_a or b is not was_b) and a != b:
                    equal = False
                    break
        self._verified = (shadow_fields, live_fields) if equal else None
        return equal

    def final(self, actor: TableActor) -> list[str] | None:
        """At the end, the whole log against the live state, without folding it again: when
        every stored entry is byte for byte one the follower read (and checked, and its
        shadow folded, in order from an empty table), a fresh fold of the log is the
        shadow's fold, so the rest is read and checked as a step, and the shadow, folded to
        the live version, must equal the live state. None when an entry changed after it
        was read (itself a violation, reported by the caller with the full checks)."""
        stored = whole(self.world, self.table_id)
        if stored[:len(self.raw)] != self.raw:
            return None
        out = self.step(actor)
        if actor.lock.locked():
            return out
        if self.shadow.version != actor.version:
            out.append(f"fold: table {self.table_id}: the log folds to version "
                       f"{self.shadow.version}, the live table is at {actor.version}")
        elif self.shadow.room != actor.room and not any(o.startswith("fold:") for o in out):
            out.append(f"fold: table {self.table_id} at version {actor.version}: the fold "
                       f"of its log differs from the live state "
                       f"({_diff(self.shadow.room, actor.room)})")
        return out

    def _secrecy(self, stored: list[EventEnvelope]) -> list[str]:
        return secrecy(self.table_id, stored, self.folded)

    def _commands(self, stored: list[EventEnvelope]) -> list[str]:
        recorded = self.world.data.hashes.get(keys.table_commands(self.table_id).encode(), {})
        out = []
        for at, envelope in enumerate(stored, start=self.read + 1):
            if envelope.sequence != at:
                out.append(f"commands: table {self.table_id}: entry {at} holds sequence "
                           f"{envelope.sequence} (a gap or a repeat)")
            command = envelope.command_id
            if command != self.previous and command in self.commands:
                out.append(f"commands: table {self.table_id}: {command}'s events appear "
                           f"twice (again at {envelope.sequence})")
            self.commands.add(command)
            self.previous = command
            outcome = recorded.get(command.encode(), b"")
            if b"0-%d" % envelope.sequence not in outcome.split(b" ")[1:]:
                out.append(f"commands: table {self.table_id}: event {envelope.sequence} of "
                           f"{command} is not in its recorded outcome")
        return out


def stream_after(world: World, table_id: str, version: int) -> list[bytes]:
    """The table's stored envelopes after ``version``, as stored (from the archive too, when
    the stream's head was trimmed past it)."""
    if world.archive is not None:
        return whole(world, table_id)[version:]
    raw = world.data.streams.get(keys.table_stream(table_id).encode(), [])
    return [fields[b"envelope"] for _id, fields in raw[version:]]


def protection(world: World) -> list[str]:
    """Player protection (issue 34): replaying every protection write in the order the
    scripts made it, no deposit, buy-in or entry was applied past a limit in force at its
    time (the lowest), nor while its player was excluded (``wallet.protection``'s pure rule
    against the store's script)."""
    from wallet.protection import (
        LimitKind,
        Protection,
        ProtectRule,
        event_from_json,
        evolve,
        usage_from_text,
    )
    states: dict[str, Protection] = {}
    usage: dict[str, list[Any]] = {}
    found: list[str] = []
    for kind, player, text, checks_, blocked in world.data.protection_log:
        if kind == "event":
            states[player] = evolve(states.get(player, Protection()), event_from_json(text))
            continue
        move = usage_from_text(text)
        rule = ProtectRule(player, tuple(LimitKind(k) for k in checks_), blocked, move)
        try:
            check_move(states.get(player, Protection()), usage.get(player, []), rule,
                       move.at_ms)
        except Exception as exc:
            found.append(f"protection: {player}'s move {text} applied: {exc}")
        usage.setdefault(player, []).append(move)
    return found


CLOCK_SLACK_MS = 2_000
"""The simulator's largest backward clock jump (``sim.run``: -2 .. +40 s): the wallet's clock
at a settlement may read up to this much before the hand's end as the table wrote it."""


_EXCLUSION_TYPES = frozenset({"PlayerSeated", "PlayerLeft", "HandEnded", "HandSettled",
                              "HandStarted"})
"""The events :func:`exclusions` reads (by the envelope's ``event_type``)."""


def exclusions(world: World, table_id: str, stored: list[EventEnvelope]) -> list[str]:
    """Exclusion at a cash table (issue 34): no hand is dealt to an excluded player after
    their current hand. Precisely: a player's exclusion takes effect at its event's time T
    (``SelfExcluded``/``PlayerExcluded``, replayed from the wallet's protection events with
    ``wallet.protection``'s own fold, over while not ``Exclusion.active``). The first hand at
    the table whose ``HandEnded`` was written at T + ``CLOCK_SLACK_MS`` or later (its
    settlement, after it, reads the wallet's clock at T or later, so the wallet names the
    player) is the last they may be in: once that hand's ``HandSettled`` is in the stream, no
    ``HandStarted`` may deal them in while they are still excluded at its time, until they
    have left the seat (``PlayerLeft``; a new seat is the buy-in's check,
    :func:`protection`). The hand in progress at T, and one ending within the slack, may
    finish with them in it; the next may not."""
    from rules.events import HandStarted, PlayerLeft, PlayerSeated
    from table.room_events import HandSettled
    from wallet.protection import Exclusion, Protection, event_from_json, evolve

    states: dict[str, Protection] = {}
    held: dict[str, dict[int, Exclusion]] = defaultdict(dict)  # by when each started
    for kind, player, text, _checks, _blocked in world.data.protection_log:
        if kind == "event":
            states[player] = evolve(states.get(player, Protection()), event_from_json(text))
            exclusion = states[player].exclusion
            if exclusion is not None:  # a new one, or a lift of the one in force
                held[player][exclusion.started_ms] = exclusion

    def excluded(player: str, at_ms: int) -> bool:
        return any(e.started_ms <= at_ms and e.active(at_ms)
                   for e in held.get(player, {}).values())

    seated: dict[int, str] = {}
    ended: dict[int, int] = {}
    barred: dict[str, int] = {}  # player -> the hand after whose settlement they may not play
    found: list[str] = []
    for envelope in stored:
        if envelope.event_type not in _EXCLUSION_TYPES:
            continue  # no other event is read below: skipped undecoded
        event: Any = decode(envelope)
        at_ms = envelope.occurred_at.ToMilliseconds()
        if isinstance(event, PlayerSeated):
            seated[event.seat] = event.player_id
        elif isinstance(event, PlayerLeft):
            seated.pop(event.seat, None)
            barred.pop(event.player_id, None)
        elif isinstance(event, HandEnded):
            ended[event.hand_number] = at_ms
        elif isinstance(event, HandSettled) and event.hand_number in ended:
            end = ended[event.hand_number] - CLOCK_SLACK_MS
            for player in seated.values():
                if player not in barred and excluded(player, end):
                    barred[player] = event.hand_number
        elif isinstance(event, HandStarted):
            for seat in event.seats:
                player = seated.get(seat, "")
                if player in barred and excluded(player, at_ms):
                    found.append(f"exclusion: table {table_id}: hand {event.hand_number} "
                                 f"dealt {player} (seat {seat}) in, excluded and past hand "
                                 f"{barred[player]}, settled after their exclusion "
                                 f"(sequence {envelope.sequence})")
    return found
