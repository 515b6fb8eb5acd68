"""``stud archive``: the archiver's work on demand, and exports of the archive.

- ``stud archive run [--table T] [--hot-hands N] [--dry-run]``: one step of the archiver
  (:mod:`studhistory.archiver`, the same code the archiver service runs continuously): every
  settled hand is copied to PostgreSQL, verified, and Redis is trimmed to the hot window.
- ``stud archive export --table T --out DIR``: a table's archive from PostgreSQL written as
  files, for a regulator or an offline auditor, checked on its own after writing; ``stud
  replay ... --archive DIR`` reads it. An export holds, under ``DIR/<table>/``:

==============================  =================================================================
``hands/h<N>.jsonl``            every public event of hand ``N``, one JSON object a line
``table-<from>-<to>.jsonl``     the events between hands (seats, chips; ``hand`` 0) of the range
``dealer/h<N>.json``            the dealer's record of hand ``N``, for auditors only (written
                                only with the auditor's role; the file is private)
``state-<to>.json``             the rules' state after event ``to``
``segments.jsonl``              one line per archived segment: the range, hands, files and their
                                SHA-256
==============================  =================================================================

A line holds ``sequence``, ``hand``, ``type``, ``command_id``, ``occurred_at``, ``event`` (the
rules event as JSON) and ``envelope`` (the stored bytes, base64: exactly what the stream had).
Replay tools read an export with :func:`read_archived` (one hand) or :func:`archived_events`
(the whole range, in order).
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

import grpc
import psycopg
from google.protobuf import json_format
from google.protobuf.json_format import MessageToDict

from rules import TableState, evolve, initial_state
from stud.v1 import dealer_pb2 as dpb
from stud.v1.envelope_pb2 import EventEnvelope
from studhistory.archiver import DEFAULT_HOT_HANDS, ArchiveError, archive_table
from studhistory.dealer_records import DealerAudits
from studhistory.pgarchive import PgHistory
from studkit import keys
from studkit.auth import Principal, Role, SigningKey, TokenIssuer
from studkit.mapping import event_from_envelope, is_room_event, room_event_from_envelope
from studkit.redis_client import connect
from studkit.repository import encode, state_to_json
from studkit.store import EventStore
from studtools.runenv import run_dir, run_env

REDIS_ENV: Final = "STUD_ARCHIVE_REDIS_URL"
DEALER_ENV: Final = "STUD_DEALER_TARGET"
AUDITOR_TOKEN_ENV: Final = "STUD_AUDITOR_TOKEN"
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
HISTORY_DSN_ENV: Final = "STUD_HISTORY_DSN"
SUPPORT_DSN_ENV: Final = "STUD_SUPPORT_DSN"
AUDITOR_DSN_ENV: Final = "STUD_AUDITOR_DSN"
SEGMENTS: Final = "segments.jsonl"

__all__ = [
    "ArchiveError",
    "archived_dealer_record",
    "archived_events",
    "archived_hands",
    "export_table",
    "read_archived",
    "segments",
    "verify_archive",
]


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


def _fold(state: TableState, envelopes: Iterable[EventEnvelope]) -> TableState:
    for env in envelopes:
        if not is_room_event(env):  # the room's own events: not the game's state
            state = evolve(state, event_from_envelope(env))
    return state


def _when(envelope: EventEnvelope) -> datetime:
    when: datetime = envelope.occurred_at.ToDatetime(tzinfo=UTC)
    return when


def _line(env: EventEnvelope, raw: bytes) -> str:
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


# --- an export for a regulator (from PostgreSQL) ----------------------------------------------

_SEGMENTS_SQL = ("SELECT first_sequence, last_sequence, state, archived_at FROM "
                 "history.segments WHERE table_id = %s ORDER BY first_sequence")


def export_table(dsn: str, table_id: str, out: Path) -> int:
    """Write a table's archive (PostgreSQL, as support or auditor) under ``out/<table>/`` in
    the files described above, one segment line per archived segment; the dealer's records
    too when the role may read them. Returns the number of events written. An export is
    complete and self-checking (:func:`verify_archive`); writing it again rewrites it."""
    base = table_dir(out, table_id)
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute(_SEGMENTS_SQL, (table_id,)).fetchall()
        if not rows:
            raise ArchiveError(f"{table_id}: nothing archived in PostgreSQL")
        try:
            with conn.transaction():
                dealer: dict[Any, Any] | None = dict(conn.execute(
                    "SELECT hand, record FROM auditor.dealer_hands WHERE table_id = %s",
                    (table_id,)).fetchall())
        except psycopg.errors.InsufficientPrivilege:
            dealer = None
        lines: list[str] = []
        total = 0
        for first, last, state, when in rows:
            events = conn.execute(
                "SELECT sequence, envelope FROM history.events WHERE table_id = %s AND "
                "sequence BETWEEN %s AND %s ORDER BY sequence", (table_id, first, last)
            ).fetchall()
            by_file: dict[str, list[str]] = {}
            hands: list[int] = []
            for _, raw in events:
                env = EventEnvelope.FromString(bytes(raw))
                name = (f"hands/h{env.hand_number}.jsonl" if env.hand_number
                        else f"table-{first}-{last}.jsonl")
                if env.hand_number and env.hand_number not in hands:
                    hands.append(env.hand_number)
                by_file.setdefault(name, []).append(_line(env, bytes(raw)))
            digests = {name: _write(base / name, "".join(x + "\n" for x in body))
                       for name, body in by_file.items()}
            state_name = f"state-{last}.json"
            digests[state_name] = _write(base / state_name, state)
            dealer_files = []
            if dealer is not None:
                for hand in hands:
                    record = dealer.get(hand)
                    if not record:  # none archived, or the dealer had none (no deck)
                        continue
                    name = f"dealer/h{hand}.json"
                    audit = dpb.HandAudit.FromString(bytes(record))
                    digests[name] = _write(base / name, json_format.MessageToJson(audit), 0o600)
                    dealer_files.append(name)
            lines.append(json.dumps({
                "table": table_id, "from": first, "to": last, "hands": hands,
                "files": sorted(by_file), "state": state_name, "dealer": dealer_files,
                "dealer_note": "" if dealer is not None else "no auditor role",
                "sha256": digests, "archived_at": when.isoformat(),
            }, separators=(",", ":"), sort_keys=True))
            total += len(events)
    _write(base / SEGMENTS, "".join(x + "\n" for x in lines))
    return total


def verify_archive(out: Path | str, table_id: str) -> int:
    """Check an export on its own: every file's SHA-256, every sequence ``1 .. to`` exactly
    once, and the rules' fold of it equal to each segment's recorded state. Returns the
    number of archived events; raises :class:`ArchiveError`."""
    base = table_dir(Path(out), table_id)
    state = initial_state()
    expected = 1
    for seg in segments(Path(out), table_id):
        for name, digest in seg["sha256"].items():
            if hashlib.sha256((base / name).read_bytes()).hexdigest() != digest:
                raise ArchiveError(f"{table_id}: {name} does not match its SHA-256")
        lines = sorted((line for name in seg["files"] for line in _lines(base / name)
                        if seg["from"] <= int(line["sequence"]) <= seg["to"]),
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

def _redis_url(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    url: str = args.redis_url or env.get(REDIS_ENV) or env.get("REDIS_URL", "")
    if not url:
        with contextlib.suppress(OSError):
            url = (run_dir(env) / "redis" / "admin.url").read_text("utf-8").strip()
    return url


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


def _dsn(args: argparse.Namespace, env: Mapping[str, str], names: Sequence[str]) -> str:
    for source in (env, run_env(env)):  # the environment first, then make run's file
        for name in names:
            if source.get(name):
                return source[name]
    return ""


async def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """``stud archive run``: one archiver step for every table (or ``--table``), one line
    each; 1 when any failed. The same code as the archiver service (studhistory.archiver)."""
    url = _redis_url(args, env)
    dsn = _dsn(args, env, (HISTORY_DSN_ENV,))
    if not url or not dsn:
        out.write(f"stud archive: need Redis ({REDIS_ENV} or REDIS_URL) and PostgreSQL "
                  f"({HISTORY_DSN_ENV}, the stud_archiver role); `make run` sets both\n")
        return 2
    client = connect(url, socket_timeout=30)
    store = EventStore(client)
    history = await PgHistory.connect(dsn)
    target = args.dealer or env.get(DEALER_ENV, "")
    token = _auditor_token(env)
    channel = grpc.aio.insecure_channel(target) if target and token else None
    dealer = DealerAudits(channel, lambda: token) if channel is not None else None
    if target and not token:
        out.write(f"note: no auditor credentials ({AUDITOR_TOKEN_ENV} or {ISSUER_KEY_ENV}): "
                  "the dealer's records are not copied\n")
    status = 0
    try:
        tables = [args.table] if args.table else await store.table_ids()
        for table_id in tables:
            try:
                outcome = await archive_table(store, history, table_id,
                                              keep_hands=args.hot_hands, dealer=dealer,
                                              dry_run=args.dry_run)
            except ArchiveError as exc:
                out.write(f"table {table_id}: NOT trimmed: {exc}\n")
                status = 1
                continue
            out.write(outcome.describe() + "\n")
    finally:
        if channel is not None:
            await channel.close()
        await history.aclose()
        await client.aclose()
    return status


def export(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    """``stud archive export``: a table's archive from PostgreSQL into files."""
    dsn = _dsn(args, env, (AUDITOR_DSN_ENV, SUPPORT_DSN_ENV, HISTORY_DSN_ENV))
    if not dsn:
        out.write(f"stud archive export: no PostgreSQL: set {SUPPORT_DSN_ENV} (or "
                  f"{AUDITOR_DSN_ENV} for the dealer's records)\n")
        return 2
    try:
        events = export_table(dsn, args.table, Path(args.out))
        checked = verify_archive(args.out, args.table)
    except (ArchiveError, psycopg.Error) as exc:
        out.write(f"table {args.table}: NOT exported: {exc}\n")
        return 1
    out.write(f"table {args.table}: exported events 1-{events} to "
              f"{table_dir(Path(args.out), args.table)}, verified {checked}\n")
    return 0


def register(commands: Any) -> None:
    """Add ``stud archive run`` and ``stud archive export`` to the ``stud`` command line."""
    parser = commands.add_parser(
        "archive", help="move settled hands to PostgreSQL now, or export a table's archive",
        description="The archiver's work on demand (the archiver service does it "
                    "continuously) and exports of the archive for regulators.")
    sub = parser.add_subparsers(dest="archive_command", required=True, metavar="SUBCOMMAND")
    p = sub.add_parser(
        "run", help="one archiver step for every table: copy settled hands to PostgreSQL, "
        "verify, trim Redis to the hot window",
        description="Copy every settled hand to PostgreSQL (STUD_HISTORY_DSN, the "
                    "stud_archiver role), verify the copy against the stream, and trim "
                    "Redis of the hands older than the hot window. Environment: "
                    "STUD_ARCHIVE_REDIS_URL or REDIS_URL, STUD_HISTORY_DSN (make run "
                    "sets both).")
    p.add_argument("--table", help="only this table (default: every table)")
    p.add_argument("--hot-hands", type=int, default=DEFAULT_HOT_HANDS, metavar="N",
                   help=f"hands each table keeps in Redis (default {DEFAULT_HOT_HANDS})")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be copied and trimmed; change nothing")
    p.add_argument("--redis-url", default="", help="Redis URL (default from the "
                   "environment)")
    p.add_argument("--dealer", default="", help="the dealer's host:port, to copy its hand "
                   f"records (default ${DEALER_ENV}; needs ${AUDITOR_TOKEN_ENV} or "
                   f"${ISSUER_KEY_ENV})")
    p.set_defaults(handler=lambda args, out, env: asyncio.run(run(args, out, env)))
    p = sub.add_parser(
        "export", help="write a table's archive from PostgreSQL into files",
        description="Write every archived event of a table (JSON lines per hand, the "
                    "stored bytes included), the rules' state at each segment's end and, "
                    "with the auditor role (STUD_AUDITOR_DSN), the dealer's records, under "
                    "DIR/<table>/, then check the export on its own. `stud replay "
                    "--archive DIR` reads it.")
    p.add_argument("--table", required=True)
    p.add_argument("--out", required=True, metavar="DIR")
    p.set_defaults(handler=export)
