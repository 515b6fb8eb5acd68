"""The hostile-clients campaign's parts (``make fuzz``; the pytest entry and the room are in
``tests/fuzz/test_hostile_clients.py``): every RPC of every service, hypothesis strategies for
requests built from the protobuf descriptors with odd values, how a request is sent (raw
bytes, any token), and the verdict on each answer.

The verdict, per request:

- ``INTERNAL`` or ``UNKNOWN``: a failure (a service must answer with a deliberate status);
- a unary call that gets no answer before its deadline (``DEADLINE_EXCEEDED``): a failure, a
  hang, never a refusal;
- a server stream that sends nothing before the deadline and ends with no status is *quiet*:
  a watch of a table or of cards that has nothing to say yet is a live stream, not a hang
  (a hanging stream cannot be told from it from outside; it is counted apart);
- any other refusal, and a quiet stream, must change nothing: a digest of every key the
  services own (the self-changing ones aside: lobby summaries, heartbeats, leases) is the
  same before and after; a change is a failure.

A method that takes a stream of requests (``TableService.Play``) gets a few messages on one
stream (its first mostly the ``watch`` it must be, at a table of the room half the time, the
others any of its kinds, now and then undecodable), read until its deadline or its end. Its
replies count as answers: one that was applied makes the case ``OK``, one that carries
``INTERNAL`` or ``UNKNOWN`` makes it ``INTERNAL``; otherwise the stream's own end (or
:data:`QUIET`) is the case's code, and nothing may have changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import grpc
from google.protobuf import descriptor as gdesc
from google.protobuf import message_factory
from google.protobuf.message import Message
from hypothesis import strategies as st

from stud.v1 import dealer_pb2, table_pb2, tournament_pb2, wallet_pb2

IGNORED_KEYS: Final = (b":summary", b"stud:table:replicas", b"stud:tournament:replicas",
                       b":owner")
"""Keys that change by themselves (lobby summaries, heartbeats, lease renewals)."""
STRINGS: Final = ["", "t-open", "t-empty", "ann", "bob", "ops", "a", "a\n", "a b", "é", "../x",
                  "x" * 64, "x" * 65, "x" * 5000, "0-1", "h1", "*", "{t-open}", "\x00",
                  "ann\r\n",
                  # ids the services derive from their logs (issue 29, G1): the table's own
                  # commands' (stored under "s:"), the tournament manager's, a wallet key's
                  "h1:deal:3", "s:h1:deal:3", "due:StartHand:1", "reconciled:1", "settle.e1",
                  "tick.1", "seated.e1.t-open.1", "hs.t-open.1", "off.m1", "tk-" + "0" * 40,
                  "pm:settle.e1", "player:ann/r-1",
                  # the tournaments of the tournament fuzz (tests/fuzz/test_hostile_tournament)
                  "sng-open", "run", "run.1", "mtt", "gone", "turbo", "default"]
INTS: Final = [0, 1, 2, 3, 7, 8, 9, -1, 40, 50, 200, 400, 10_000, 2**31 - 1, 2**31, 2**53,
               2**63 - 1, -(2**63)]
TOURNAMENT_STRINGS: Final = [*STRINGS, *(["sng-open", "run", "mtt", "gone"] * 6),
                              *(f"c-{i}" for i in range(12))]
"""The tournament fuzz's strings: its tournaments' ids often, and fresh command ids (so
that a command reaches the rules past its ids often enough)."""
UNARY_TIMEOUT_S: Final = 10.0
STREAM_TIMEOUT_S: Final = 2.0


@dataclass(frozen=True)
class Target:
    service: str
    method: str
    request: type[Message]
    streaming: bool
    client_streaming: bool = False
    """The method takes a stream of requests: :attr:`Case.body` holds them (:func:`frame`)."""
    response: type[Message] | None = None

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.method}"


ROOM_SERVICES: Final = ((table_pb2, "TableService"), (dealer_pb2, "DealerService"),
                         (dealer_pb2, "DealerTestingService"), (wallet_pb2, "WalletService"))
"""The table, the dealer (and its testing service) and the wallet."""
TOURNAMENT_SERVICES: Final = ((tournament_pb2, "TournamentService"),)


def targets(services: tuple[tuple[Any, str], ...] = ROOM_SERVICES) -> list[Target]:
    """Every RPC of ``services`` (module, service name): by default the table, the dealer
    (and its testing service) and the wallet; :data:`TOURNAMENT_SERVICES` the tournament's
    (VerifyTournament and WatchTournament included)."""
    out = []
    for module, service in services:
        desc = module.DESCRIPTOR.services_by_name[service]
        for m in desc.methods:
            out.append(Target(desc.full_name, m.name,
                              message_factory.GetMessageClass(m.input_type),
                              m.server_streaming, m.client_streaming,
                              message_factory.GetMessageClass(m.output_type)))
    return out


def _range(kind: int) -> tuple[int, int]:
    f = gdesc.FieldDescriptor
    if kind in (f.TYPE_UINT32, f.TYPE_FIXED32):
        return 0, 2**32 - 1
    if kind in (f.TYPE_UINT64, f.TYPE_FIXED64):
        return 0, 2**64 - 1
    if kind in (f.TYPE_INT32, f.TYPE_SINT32, f.TYPE_SFIXED32):
        return -(2**31), 2**31 - 1
    return -(2**63), 2**63 - 1


def _mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]
            ) -> st.SearchStrategy[Any]:
    """``usual`` about three times in four, else ``other``."""
    return st.integers(0, 3).flatmap(lambda i: other if i == 0 else usual)


def scalars(field_: gdesc.FieldDescriptor, strings: Sequence[str] = STRINGS
            ) -> st.SearchStrategy[Any] | None:
    """Values for a scalar field, biased to the interesting ones (a string: mostly one of
    ``strings``); None for a kind not generated (floats: no request has one)."""
    f = gdesc.FieldDescriptor
    kind = field_.type
    if kind == f.TYPE_STRING:
        # Mostly ids the room has and the classic odd ones; now and then any text.
        return _mostly(st.sampled_from(strings), st.text(max_size=70))
    if kind == f.TYPE_BYTES:
        return st.binary(max_size=100)
    if kind == f.TYPE_BOOL:
        return st.booleans()
    if kind == f.TYPE_ENUM:
        return st.sampled_from([*(v.number for v in field_.enum_type.values), 99, -1])
    if kind in (f.TYPE_UINT32, f.TYPE_FIXED32, f.TYPE_UINT64, f.TYPE_FIXED64, f.TYPE_INT32,
                f.TYPE_SINT32, f.TYPE_SFIXED32, f.TYPE_INT64, f.TYPE_SINT64, f.TYPE_SFIXED64):
        low, high = _range(kind)
        return _mostly(st.sampled_from([i for i in INTS if low <= i <= high]),
                       st.integers(low, high))
    return None


@st.composite
def filled(draw: st.DrawFn, message_type: type[Message], depth: int = 0,
           strings: Sequence[str] = STRINGS) -> Message:
    """A message of ``message_type`` with some of its fields set to typed but odd values."""
    message = message_type()
    for field_ in message.DESCRIPTOR.fields:
        if draw(st.integers(0, 9)) < 3:  # most fields set
            continue
        count = draw(st.sampled_from((0, 1, 2, 5))) if field_.is_repeated else 1
        for _ in range(count):
            if field_.type == gdesc.FieldDescriptor.TYPE_MESSAGE:
                if depth > 2:
                    continue
                sub_type = message_factory.GetMessageClass(field_.message_type)
                sub = draw(filled(sub_type, depth + 1, strings))
                if field_.is_repeated:
                    getattr(message, field_.name).add().CopyFrom(sub)
                else:
                    getattr(message, field_.name).CopyFrom(sub)
                    getattr(message, field_.name).SetInParent()
                continue
            values = scalars(field_, strings)
            if values is None:
                continue
            value = draw(values)
            with contextlib.suppress(ValueError, TypeError):
                if field_.is_repeated:
                    getattr(message, field_.name).append(value)
                else:
                    setattr(message, field_.name, value)
    return message


@dataclass(frozen=True)
class Case:
    """One hostile request: what, as whom (an index into the campaign's principals, None
    for no token), with which kind of token, and the bytes sent."""

    target: Target
    who: int | None
    how: str
    body: bytes
    garbage: str = ""

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        return (f"Case({self.target.path}, who={self.who}, how={self.how}, "
                f"body={self.body[:200]!r}{'...' if len(self.body) > 200 else ''}, "
                f"garbage={self.garbage[:40]!r})")


STREAM_MESSAGES: Final = 5
"""Messages at most on one client stream of a case."""


def frame(messages: Sequence[bytes]) -> bytes:
    """A client stream's messages as one :attr:`Case.body`: each its 4-byte length, then it.

    >>> unframe(frame([b"a", b"", b"bc"]))
    [b'a', b'', b'bc']
    """
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


def unframe(body: bytes) -> list[bytes]:
    """The messages :func:`frame` put in ``body``."""
    out, at = [], 0
    while at < len(body):
        size = int.from_bytes(body[at:at + 4], "big")
        out.append(body[at + 4:at + 4 + size])
        at += 4 + size
    return out


@st.composite
def stream_messages(draw: st.DrawFn, target: Target, strings: Sequence[str]) -> bytes:
    """A client stream's messages (:func:`frame`): the first mostly the oneof field named
    ``watch`` set (half the time a watch of a table of the room from its start), then any
    of the request's kinds, now and then raw bytes."""
    messages: list[bytes] = []
    for index in range(draw(st.integers(1, STREAM_MESSAGES))):
        if draw(st.integers(0, 9)) == 0:
            messages.append(draw(st.binary(min_size=1, max_size=64)))
            continue
        message = draw(filled(target.request, strings=strings))
        watch = target.request.DESCRIPTOR.fields_by_name.get("watch")
        if index == 0 and watch is not None and draw(st.integers(0, 4)) > 0:
            first: Any = draw(filled(message_factory.GetMessageClass(watch.message_type),
                                     strings=strings))
            if draw(st.booleans()) and "table_id" in first.DESCRIPTOR.fields_by_name:
                # A watch that opens (from the start), so that the actions are reached.
                first.table_id = draw(st.sampled_from(("t-open", "t-empty")))
                for name in ("after_sequence", "after_event_id"):
                    first.ClearField(name)
            opening: Any = target.request()
            opening.watch.CopyFrom(first)
            message = opening
        messages.append(message.SerializeToString())
    return frame(messages)


GARBAGE_TOKENS: Final = ("Bearer", "Bearer x.y.z", "Basic abc", "Bearer " + "a" * 5000)


@st.composite
def cases(draw: st.DrawFn, all_targets: list[Target], principals: int,
          strings: Sequence[str] = STRINGS) -> Case:
    """A request to any RPC, as any of ``principals`` (or nobody), with our token, a forged
    one, an expired one or garbage, carrying a filled message (its strings mostly from
    ``strings``) or undecodable bytes."""
    target = draw(st.sampled_from(all_targets))
    who = draw(st.sampled_from([*range(principals), None]))
    how = draw(_mostly(st.just("ours"), st.sampled_from(("forged", "expired", "garbage"))))
    garbage = draw(st.sampled_from(GARBAGE_TOKENS)) if how == "garbage" else ""
    if target.client_streaming:
        body = draw(stream_messages(target, strings))
    elif draw(st.integers(0, 9)) == 0:
        body = draw(st.binary(min_size=1, max_size=64))
    else:
        body = draw(filled(target.request, strings=strings)).SerializeToString()
    return Case(target, who, how, body, garbage)


QUIET: Final = "QUIET"
"""A server stream that sent nothing before its deadline and is still open."""


def send(channel: grpc.Channel, target: Target, body: bytes,
         metadata: tuple[tuple[str, str], ...]) -> str:
    """Send ``body`` raw to ``target`` (a blocking channel); the status code's name, or
    :data:`QUIET` for a stream that is open but has said nothing yet (a client stream:
    :func:`send_stream`)."""
    if target.client_streaming:
        return send_stream(channel, target, body, metadata)
    try:
        if target.streaming:
            call = channel.unary_stream(target.path, request_serializer=None,
                                        response_deserializer=None)(
                body, metadata=metadata, timeout=STREAM_TIMEOUT_S)
            try:
                next(call)
            except StopIteration:
                pass  # ended with OK and no message
            except grpc.RpcError as exc:
                if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                    return QUIET
                raise
            finally:
                call.cancel()
            return "OK"
        channel.unary_unary(target.path, request_serializer=None,
                            response_deserializer=None)(
            body, metadata=metadata, timeout=UNARY_TIMEOUT_S)
        return "OK"
    except grpc.RpcError as exc:
        return str(exc.code().name)


def _answer(message: Any) -> tuple[bool, int] | None:
    """A client stream's reply in ``message`` (a field ``reply`` whose message has ``code``
    and ``reply``): (applied, status code number); None for anything else (a record).

    >>> _answer(table_pb2.PlayMessage(reply=table_pb2.PlayReply(code=13)))
    (False, 13)
    >>> _answer(table_pb2.PlayMessage(reply=table_pb2.PlayReply(reply=table_pb2.CommandReply())))
    (True, 0)
    >>> _answer(table_pb2.PlayMessage(record=table_pb2.TableEventRecord(sequence=1))) is None
    True
    """
    if "reply" not in message.DESCRIPTOR.fields_by_name or not message.HasField("reply"):
        return None
    reply = message.reply
    return reply.HasField("reply"), int(reply.code)


def send_stream(channel: grpc.Channel, target: Target, body: bytes,
                metadata: tuple[tuple[str, str], ...]) -> str:
    """Send the messages in ``body`` (:func:`frame`) on one stream to ``target``, raw, and
    read what comes back until the stream ends or its deadline: ``OK`` if an action was
    applied, ``INTERNAL`` if a reply carries INTERNAL or UNKNOWN, else the stream's end
    (:data:`QUIET` at its deadline)."""
    call = channel.stream_stream(target.path, request_serializer=None,
                                 response_deserializer=None)(
        iter(unframe(body)), metadata=metadata, timeout=STREAM_TIMEOUT_S)
    applied = internal = False
    ended = "OK"
    started = time.monotonic()
    try:
        for raw in call:
            answer = _answer(target.response.FromString(raw)) if target.response else None
            if answer is not None:
                applied = applied or answer[0]
                internal = internal or answer[1] in (grpc.StatusCode.INTERNAL.value[0],
                                                     grpc.StatusCode.UNKNOWN.value[0])
            if time.monotonic() - started > STREAM_TIMEOUT_S:
                ended = QUIET
                break
    except grpc.RpcError as exc:
        code = exc.code()
        ended = QUIET if code is grpc.StatusCode.DEADLINE_EXCEEDED else str(code.name)
    finally:
        call.cancel()
    if internal:
        return "INTERNAL"
    return "OK" if applied else ended


@dataclass(frozen=True)
class Verdict:
    failure: str | None
    """``internal``, ``hang`` or ``changed``; None: a deliberate answer."""


def judge(code: str, streaming: bool, changed: bool) -> Verdict:
    """The verdict on one answer (see the module docstring).

    >>> judge("DEADLINE_EXCEEDED", streaming=False, changed=False).failure
    'hang'
    >>> judge("PERMISSION_DENIED", streaming=False, changed=True).failure
    'changed'
    """
    if code in ("INTERNAL", "UNKNOWN"):
        return Verdict("internal")
    if code == "DEADLINE_EXCEEDED" and not streaming:
        return Verdict("hang")
    if code != "OK" and changed:
        return Verdict("changed")
    return Verdict(None)


@dataclass
class Tally:
    """The answers so far."""

    cases: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    crashes: int = 0

    def add(self, case: Case, code: str, verdict: Verdict) -> None:
        self.cases += 1
        self.codes[code] += 1
        if verdict.failure is not None:
            self.failures[verdict.failure] += 1
            print(f"{verdict.failure.upper()} {case!r} {code}", flush=True)

    def line(self) -> str:
        return (f"cases={self.cases} crashes={self.crashes} "
                f"internal={self.failures['internal']} changed={self.failures['changed']}")


def digest(admin: Any, skip: Callable[[bytes], bool] | None = None) -> str:
    """A hash of every key's content (a blocking Redis client), the self-changing keys
    aside, and those ``skip`` names (the tournament fuzz's: the keys of the tables its
    tournaments deal at, which their table service changes by itself)."""
    keys = sorted(k for k in admin.scan_iter(count=1000)
                  if not any(part in k for part in IGNORED_KEYS)
                  and (skip is None or not skip(k)))
    pipe = admin.pipeline(transaction=False)
    for k in keys:
        pipe.dump(k)
    dumps = pipe.execute()
    h = hashlib.sha256()
    for k, d in zip(keys, dumps, strict=True):
        h.update(k)
        h.update(d or b"")
    return h.hexdigest()
