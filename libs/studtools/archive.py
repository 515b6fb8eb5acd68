"""Archival: completed hands leave Redis for files, verified first, never lost
(``stud archive --older-than DAYS [--table T] --out DIR [--dry-run]``).

For each table, the archive takes the oldest events up to a **trim point** ``P``: the end of
the last hand that ended (``HandEnded``) before the cutoff and was settled with the wallet,
never past the table's snapshot (the table loads from its snapshot once its head is gone), nor
into the next hand. Events ``T+1 .. P`` (``T``: what earlier runs trimmed) are written under
``DIR/<table>/``:

==============================  =================================================================
``hands/h<N>.jsonl``            every public event of hand ``N``, one JSON object a line
``table-<from>-<to>.jsonl``     the events between hands (seats, chips; ``hand`` 0) of the range
``dealer/h<N>.json``            the dealer's record of hand ``N`` (``GetAudit``, as an auditor):
                                every card and the deck's commitment, for auditors only (the
                                directory is private); skipped, with a note, without auditor
                                credentials. The dealer's own keys are not trimmed.
``state-<to>.json``             the rules' state after event ``to`` (the next run's base)
``segments.jsonl``              one line per run: the range, hands, files and their SHA-256
==============================  =================================================================

A line holds ``sequence``, ``hand``, ``type``, ``command_id``, ``occurred_at``, ``event`` (the
rules event as JSON) and ``envelope`` (the stored bytes, base64: exactly what the stream had).

Then it **verifies**: the files are re-read and compared byte for byte with a fresh read of the
stream (every sequence ``T+1 .. P`` exactly once), and the range is re-folded with the rules
from the previous run's state, continued over the stream to the snapshot and compared with the
snapshot's state. Only then does it **trim** (:meth:`studkit.store.EventStore.trim_head`, one
script: compare-and-set on the trimmed count, refused unless the snapshot is at ``P`` or later),
after which ``XLEN + trimmed == version`` still holds for every append.

Replay tools read archived hands with :func:`read_archived` (one hand) or
:func:`archived_events` (the whole archived range, in order).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.json_format import MessageToDict

from rules import TableState, evolve, initial_state
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1.envelope_pb2 import EventEnvelope
from studkit import keys
from studkit.auth import Principal, Role, SigningKey, TokenIssuer, bearer_metadata
from studkit.mapping import event_from_envelope, is_room_event, room_event_from_envelope
from studkit.redis_client import connect
from studkit.repository import FORMAT, encode, snapshot_key, state_from_json, state_to_json
from studkit.store import EventStore, StoredEvent, TrimRefused
from studtools.runenv import run_dir

REDIS_ENV: Final = "STUD_ARCHIVE_REDIS_URL"
DEALER_ENV: Final = "STUD_DEALER_TARGET"
AUDITOR_TOKEN_ENV: Final = "STUD_AUDITOR_TOKEN"
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
SEGMENTS: Final = "segments.jsonl"
AUDIT_TIMEOUT_S: Final = 10.0


class ArchiveError(RuntimeError):
    """The archive of a table could not be written or verified: nothing was trimmed."""


# --- reading an archive ----------------------------------------------------------------------

def table_dir(out: Path, table_id: str) -> Path:
    """Where a table's archive lives under ``out``."""
    return out / keys.check_id(table_id, "table id")


def segments(out: Path, table_id: str) -> list[dict[str, Any]]:
    """The table's archived ranges, oldest first ([] when nothing is archived)."""
    path = table_dir(out, table_id) / SEGMENTS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]


def _envelope(line: Mapping[str, Any]) -> EventEnvelope:
    envelope = EventEnvelope()
    envelope.ParseFromString(base64.b64decode(line["envelope"]))
    return envelope


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x]


def read_archived(out: Path | str, table_id: str, hand: int) -> list[EventEnvelope]:
    """The public events of archived hand ``hand`` of ``table_id``, in order, exactly as the
    stream held them; ``LookupError`` when that hand is not in the archive."""
    path = table_dir(Path(out), table_id) / "hands" / f"h{hand}.jsonl"
    if not path.exists():
        raise LookupError(f"hand {hand} of table {table_id} is not archived in {out}")
    return [_envelope(line) for line in _lines(path)]


def archived_hands(out: Path | str, table_id: str) -> list[int]:
    """The numbers of the table's archived hands, in order."""
    return [h for seg in segments(Path(out), table_id) for h in seg["hands"]]


def archived_events(out: Path | str, table_id: str) -> list[EventEnvelope]:
    """Every archived event of the table (hands and between hands), in sequence order:
    events ``1 .. trimmed``, to be followed by the stream's."""
    base = table_dir(Path(out), table_id)
    lines: list[dict[str, Any]] = []
    for seg in segments(Path(out), table_id):
        for name in seg["files"]:
            lines.extend(_lines(base / name))
    lines.sort(key=lambda line: int(line["sequence"]))
    return [_envelope(line) for line in lines]


def archived_dealer_record(out: Path | str, table_id: str, hand: int) -> dpb.HandAudit | None:
    """The dealer's record of an archived hand, or None when it was not exported."""
    path = table_dir(Path(out), table_id) / "dealer" / f"h{hand}.json"
    if not path.exists():
        return None
    record = dpb.HandAudit()
    json_format.Parse(path.read_text("utf-8"), record)
    return record


# --- planning --------------------------------------------------------------------------------

@dataclass
class Plan:
    """What one run would archive of a table."""

    table_id: str
    trimmed: int
    """Events already archived and trimmed (the range starts after it)."""
    version: int
    snapshot_version: int
    upto: int = 0
    """The trim point: events ``trimmed+1 .. upto`` are archived (``upto <= trimmed``:
    nothing to do)."""
    hands: list[int] = field(default_factory=list)
    events: list[StoredEvent] = field(default_factory=list)
    note: str = ""

    @property
    def empty(self) -> bool:
        return self.upto <= self.trimmed


def _when(envelope: EventEnvelope) -> datetime:
    when: datetime = envelope.occurred_at.ToDatetime(tzinfo=UTC)
    return when


async def _snapshot(store: EventStore, table_id: str) -> tuple[int, TableState | None]:
    """The snapshot's version and state (-1, None when absent or unusable)."""
    raw = await store.client.hgetall(snapshot_key(table_id))
    fields = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
    try:
        if int(fields["format"]) != FORMAT:
            return -1, None
        return int(fields["version"]), state_from_json(fields["state"])
    except (KeyError, ValueError, TypeError):
        return -1, None


async def plan(store: EventStore, table_id: str, cutoff: datetime) -> Plan:
    """The range of ``table_id`` that hands ended before ``cutoff`` allow archiving."""
    trimmed = await store.trimmed(table_id)
    version = await store.version(table_id)
    snapshot_version, _ = await _snapshot(store, table_id)
    result = Plan(table_id, trimmed, version, snapshot_version)
    if snapshot_version <= trimmed:
        result.note = "no snapshot past the archived range (the table snapshots every " \
                      "TABLE_SNAPSHOT_EVERY hands)"
        return result
    events = [e for e in await store.read(table_id, from_version=trimmed)
              if e.envelope.sequence <= snapshot_version]
    # A hand may go once the wallet settled it: its HandSettled room event (or, for a table
    # not yet loaded since the room events, the old `settled` side key).
    legacy = await store.client.get(keys.legacy_table_key(table_id, "settled"))
    settled = max([int(legacy) if legacy else 0, *(
        room_event_from_envelope(e.envelope).hand_number for e in events
        if e.envelope.event_type == "HandSettled")])
    ended: dict[int, int] = {}  # hand -> sequence of its HandEnded
    started: dict[int, int] = {}
    for stored in events:
        env = stored.envelope
        if env.event_type == "HandStarted":
            started[env.hand_number] = env.sequence
        elif env.event_type == "HandEnded" and _when(env) < cutoff \
                and env.hand_number <= settled:
            ended[env.hand_number] = env.sequence
    # The last hand that may go: every hand before it went too (hands end in order).
    last = max((h for h in ended if all(g in ended for g in started if g <= h)), default=0)
    if not last:
        result.note = "no completed, settled hand older than the cutoff before the snapshot"
        return result
    upto = snapshot_version
    if last + 1 in started:
        upto = min(upto, started[last + 1] - 1)
    result.upto = upto
    result.events = [e for e in events if e.envelope.sequence <= upto]
    result.hands = sorted({e.envelope.hand_number for e in result.events
                           if e.envelope.hand_number})
    return result


# --- writing and verifying ----------------------------------------------------------------------

def _line(stored: StoredEvent, raw: bytes) -> str:
    env = stored.envelope
    return json.dumps({
        "table": env.table_id, "sequence": env.sequence, "hand": env.hand_number,
        "type": env.event_type, "command_id": env.command_id,
        "occurred_at": _when(env).isoformat() if env.HasField("occurred_at") else None,
        "event": (MessageToDict(room_event_from_envelope(env)) if is_room_event(env)
                  else encode(event_from_envelope(env))),
        "envelope": base64.b64encode(raw).decode("ascii"),
    }, separators=(",", ":"), sort_keys=True)


def _write(path: Path, text: str, mode: int = 0o644) -> str:
    """Write ``text`` durably (temporary file, fsync, rename); its SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    data = text.encode("utf-8")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


async def _raw_range(store: EventStore, table_id: str, after: int, upto: int
                     ) -> dict[int, bytes]:
    """Sequence -> the exact bytes the stream holds, for ``after+1 .. upto`` (a fresh read)."""
    found: dict[int, bytes] = {}
    entries = await store.client.xrange(keys.table_stream(table_id), min=f"0-{after + 1}",
                                        max=f"0-{upto}")
    for entry in entries or []:
        entry_id, fields = entry
        payload = fields.get(b"envelope") if isinstance(fields, dict) else None
        if not isinstance(entry_id, bytes) or not isinstance(payload, bytes):
            raise ArchiveError(f"{table_id}: unreadable stream entry {entry!r}")
        found[int(entry_id.decode().split("-")[1])] = payload
    return found


def _base_state(base: Path, trimmed: int) -> TableState:
    if trimmed == 0:
        return initial_state()
    path = base / f"state-{trimmed}.json"
    if not path.exists():
        raise ArchiveError(f"events 1..{trimmed} were archived elsewhere: {path} is missing "
                           "(archive into the same directory every time)")
    return state_from_json(path.read_text("utf-8"))


def _fold(state: TableState, envelopes: Iterable[EventEnvelope]) -> TableState:
    for env in envelopes:
        if not is_room_event(env):  # the room's own events: not the game's state
            state = evolve(state, event_from_envelope(env))
    return state


@dataclass
class Outcome:
    """What :func:`archive_table` did."""

    plan: Plan
    written: list[str] = field(default_factory=list)
    dealer_note: str = ""
    trimmed_to: int | None = None

    def describe(self) -> str:
        p = self.plan
        if p.empty:
            return f"table {p.table_id}: nothing to archive ({p.note or 'up to date'})"
        hands = f"hands {p.hands[0]}-{p.hands[-1]}" if p.hands else "no hand"
        head = (f"table {p.table_id}: {hands}, events {p.trimmed + 1}-{p.upto} "
                f"of {p.version}")
        if self.trimmed_to is None:
            return f"{head}: would archive (dry run)"
        return (f"{head}: archived ({len(self.written)} files), verified, trimmed; the stream "
                f"now holds {self.trimmed_to + 1}-{p.version}{self.dealer_note}")


class DealerRecords:
    """The dealer's ``GetAudit`` as an auditor."""

    def __init__(self, target: str, token: str) -> None:
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = dpb_grpc.DealerServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._token = token

    async def audit(self, table_id: str, hand: int) -> dpb.HandAudit:
        reply: dpb.HandAudit = await self._stub.GetAudit(
            dpb.GetAuditRequest(table_id=table_id, hand_number=hand),
            metadata=bearer_metadata(self._token), timeout=AUDIT_TIMEOUT_S)
        return reply

    async def aclose(self) -> None:
        await self._channel.close()


async def _dealer_files(dealer: DealerRecords | None, base: Path, table_id: str,
                        hands: Sequence[int]) -> tuple[list[str], dict[str, str], str]:
    if dealer is None:
        return [], {}, " (dealer's record skipped: no auditor credentials)"
    written: list[str] = []
    digests: dict[str, str] = {}
    failed: list[str] = []
    (base / "dealer").mkdir(mode=0o700, parents=True, exist_ok=True)
    for hand in hands:
        try:
            audit = await dealer.audit(table_id, hand)
        except grpc.aio.AioRpcError as exc:
            failed.append(f"h{hand}: {exc.code().name}")
            continue
        name = f"dealer/h{hand}.json"
        digests[name] = _write(base / name, json_format.MessageToJson(audit), 0o600)
        written.append(name)
    note = f" (dealer's record not exported for {', '.join(failed)})" if failed else ""
    return written, digests, note


async def archive_table(store: EventStore, table_id: str, out: Path, *, cutoff: datetime,
                        dealer: DealerRecords | None = None, dry_run: bool = False,
                        now: datetime | None = None) -> Outcome:
    """Archive, verify and trim one table (see the module docstring); with ``dry_run`` only
    plan. Raises :class:`ArchiveError` (nothing trimmed) when verification fails."""
    the_plan = await plan(store, table_id, cutoff)
    outcome = Outcome(the_plan)
    if the_plan.empty or dry_run:
        return outcome
    base = table_dir(out, table_id)
    start, upto = the_plan.trimmed, the_plan.upto
    state = _base_state(base, start)

    # 1. Export the stream's own bytes: one file per hand, one for the events between hands.
    exported = await _raw_range(store, table_id, start, upto)
    by_file: dict[str, list[StoredEvent]] = {}
    for stored in the_plan.events:
        hand = stored.envelope.hand_number
        name = f"hands/h{hand}.jsonl" if hand else f"table-{start + 1}-{upto}.jsonl"
        by_file.setdefault(name, []).append(stored)
    digests = {name: _write(base / name, "".join(
        _line(e, exported[e.envelope.sequence]) + "\n" for e in events))
        for name, events in by_file.items()}

    # 2. Verify against a fresh read of the stream: every sequence once, the same bytes.
    archived: dict[int, bytes] = {}
    for name in digests:
        for line in _lines(base / name):
            sequence = int(line["sequence"])
            if sequence in archived:
                raise ArchiveError(f"{table_id}: event {sequence} archived twice")
            archived[sequence] = base64.b64decode(line["envelope"])
    stream = await _raw_range(store, table_id, start, upto)
    if set(archived) != set(range(start + 1, upto + 1)) or archived.keys() != stream.keys():
        raise ArchiveError(f"{table_id}: the archive does not hold events {start + 1}-{upto} "
                           "exactly once")
    for sequence, raw in stream.items():
        if raw != archived[sequence]:
            raise ArchiveError(f"{table_id}: event {sequence} differs from the stream")

    # 3. Re-fold with the rules: the archive from the previous state, then the stream up to
    #    the snapshot, must give the snapshot's state (the table will load from it).
    envelopes = [EventEnvelope.FromString(archived[s]) for s in sorted(archived)]
    state = _fold(state, envelopes)
    snapshot_version, snapshot_state = await _snapshot(store, table_id)
    if snapshot_state is None or snapshot_version < upto:
        raise ArchiveError(f"{table_id}: the snapshot moved below the trim point")
    tail = [e.envelope for e in await store.read(table_id, from_version=upto)
            if e.envelope.sequence <= snapshot_version]
    if state_to_json(_fold(state, tail)) != state_to_json(snapshot_state):
        raise ArchiveError(f"{table_id}: the rules' fold of the archive and the stream does "
                           f"not give the snapshot's state at {snapshot_version}")
    state_name = f"state-{upto}.json"
    digests[state_name] = _write(base / state_name, state_to_json(state))

    # 4. The dealer's record, for auditors (its keys stay with the dealer).
    dealer_files, dealer_digests, outcome.dealer_note = await _dealer_files(
        dealer, base, table_id, the_plan.hands)
    segment = {
        "table": table_id, "from": start + 1, "to": upto, "hands": the_plan.hands,
        "files": sorted(n for n in by_file), "state": state_name,
        "dealer": dealer_files, "dealer_note": outcome.dealer_note.strip(" ()"),
        "sha256": {**digests, **dealer_digests},
        "archived_at": (now or datetime.now(UTC)).isoformat(),
    }
    outcome.written = [*sorted(digests), *dealer_files]
    previous = (base / SEGMENTS).read_text("utf-8") if (base / SEGMENTS).exists() else ""
    kept = [line for line in previous.splitlines()
            if line and json.loads(line)["from"] != start + 1]  # a re-run of a failed trim
    _write(base / SEGMENTS, "".join(x + "\n" for x in [*kept, json.dumps(
        segment, separators=(",", ":"), sort_keys=True)]))

    # 5. Trim: atomically, only if nobody trimmed meanwhile and the snapshot still covers it.
    try:
        outcome.trimmed_to = await store.trim_head(table_id, upto, start)
    except TrimRefused as exc:
        raise ArchiveError(str(exc)) from exc
    return outcome


def verify_archive(out: Path | str, table_id: str) -> int:
    """Check a table's archive on its own: every file's SHA-256, every sequence ``1 ..
    to`` exactly once, and the rules' fold of it equal to each segment's recorded state.
    Returns the number of archived events; raises :class:`ArchiveError`."""
    base = table_dir(Path(out), table_id)
    state = initial_state()
    expected = 1
    for seg in segments(Path(out), table_id):
        for name, digest in seg["sha256"].items():
            if hashlib.sha256((base / name).read_bytes()).hexdigest() != digest:
                raise ArchiveError(f"{table_id}: {name} does not match its SHA-256")
        lines = sorted((line for name in seg["files"] for line in _lines(base / name)),
                       key=lambda line: int(line["sequence"]))
        sequences = [int(line["sequence"]) for line in lines]
        if seg["from"] != expected or sequences != list(range(seg["from"], seg["to"] + 1)):
            raise ArchiveError(f"{table_id}: segment {seg['from']}-{seg['to']} is not whole")
        state = _fold(state, (_envelope(line) for line in lines))
        recorded = (base / seg["state"]).read_text("utf-8")
        if state_to_json(state) != recorded:
            raise ArchiveError(f"{table_id}: the fold of {seg['from']}-{seg['to']} differs")
        expected = seg["to"] + 1
    return expected - 1


# --- the command ---------------------------------------------------------------------------------

def _auditor_token(env: Mapping[str, str]) -> str:
    token = env.get(AUDITOR_TOKEN_ENV, "")
    if token:
        return token
    key_path = env.get(ISSUER_KEY_ENV, "")
    if not key_path:
        return ""
    try:
        pem = Path(key_path).read_text("utf-8")
    except OSError:
        return ""
    return TokenIssuer(SigningKey.from_pem(pem)).issue(
        Principal(role=Role.AUDITOR, name="archive"), ttl_seconds=600)


def _redis_url(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    url: str = args.redis_url or env.get(REDIS_ENV) or env.get("REDIS_URL", "")
    if not url:
        with contextlib.suppress(OSError):
            url = (run_dir(env) / "redis" / "admin.url").read_text("utf-8").strip()
    return url


async def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """``stud archive``: every table (or ``--table``), one line each; 1 when any failed.
    ``env``: the ``stud`` environment (:func:`studtools.runenv.stud_environment`)."""
    url = _redis_url(args, env)
    if not url:
        out.write(f"stud archive: no Redis: pass --redis-url or set {REDIS_ENV}\n")
        return 2
    cutoff = datetime.now(UTC) - timedelta(days=args.older_than)
    client = connect(url, socket_timeout=30)
    store = EventStore(client)
    target = args.dealer or env.get(DEALER_ENV, "")
    token = _auditor_token(env)
    dealer = DealerRecords(target, token) if target and token and not args.dry_run else None
    status = 0
    try:
        tables = [args.table] if args.table else await store.table_ids()
        for table_id in tables:
            try:
                outcome = await archive_table(store, table_id, Path(args.out), cutoff=cutoff,
                                              dealer=dealer, dry_run=args.dry_run)
            except ArchiveError as exc:
                out.write(f"table {table_id}: NOT trimmed: {exc}\n")
                status = 1
                continue
            out.write(outcome.describe() + "\n")
    finally:
        if dealer is not None:
            await dealer.aclose()
        await client.aclose()
    return status


def register(commands: Any) -> None:
    """Add ``stud archive`` to the ``stud`` command line."""
    parser = commands.add_parser(
        "archive", help="export completed hands older than an age, verify, trim from Redis",
        description="Export every public event of completed hands older than --older-than "
                    "days (JSON lines per hand, the dealer's record separately for auditors), "
                    "verify the export against the stream and the rules, then trim it from "
                    "Redis. Environment: STUD_ARCHIVE_REDIS_URL or REDIS_URL (the table's "
                    "Redis user), STUD_DEALER_TARGET with STUD_AUDITOR_TOKEN or "
                    "STUD_ISSUER_KEY for the dealer's record.")
    parser.add_argument("--older-than", type=float, required=True, metavar="DAYS",
                        help="archive hands that ended at least this many days ago")
    parser.add_argument("--table", help="only this table (default: every table)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the archive directory (the same one every time)")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would be archived; write and trim nothing")
    parser.add_argument("--redis-url", default="", help="Redis URL (default from the "
                        "environment)")
    parser.add_argument("--dealer", default="", help="the dealer's host:port")
    parser.set_defaults(handler=lambda args, out, env: asyncio.run(run(args, out, env)))
