"""Traces seen locally (issue 33; docs/operations.md "Traces"): an OTLP/gRPC receiver that keeps
the spans the services export (in memory, and as JSON lines in a file), and ``stud trace show
TRACE_ID``, which prints one trace as a tree, with the steps of the table linked to it.

- :class:`Receiver` is ``opentelemetry.proto``'s ``TraceService`` (``Export``) on a gRPC
  server of its own threads (so it answers while its owner's event loop is blocked, e.g. in a
  test waiting for a service to exit, whose last spans are being flushed): point
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` at it. ``stud trace receive --port P --file F``
  runs one until interrupted; ``make observe`` runs one (:func:`serve`) on
  :data:`OTLP_PORT`, where ``make run OBSERVE=1`` points the services.
- A span is kept as a :class:`SpanRecord`; the file holds one JSON object per span. A
  long-running receiver's file is rotated past :data:`ROTATE_BYTES`: it becomes ``F.1``
  (replacing the previous one), which the readers read before ``F``.
- :func:`render` draws a trace: each span under its parent, with its service, its duration
  and the attributes worth reading; then, under "linked from", each span of another trace
  that links to a span of this one (the driver's deal after a Bet, the settlement after the
  hand's last action), with its own tree.
- :func:`summaries` lists the traces of a file, latest first (``stud trace list``): each
  one's root span, service, start, duration and span count, to find a trace's id.

Environment: ``STUD_TRACES_FILE`` (the file ``stud trace show``, ``list`` and ``receive`` use
when ``--file`` is not given; else ``.run/traces.jsonl``, ``make observe``'s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from concurrent import futures
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

TRACES_FILE_ENV: Final = "STUD_TRACES_FILE"
DEFAULT_FILE: Final = ".run/traces.jsonl"
OTLP_PORT: Final = 4317
"""The receiver's port that ``make observe`` listens on and ``make run OBSERVE=1`` exports to
(OTLP/gRPC's usual port)."""
ROTATE_BYTES: Final = 64 << 20
"""``make observe``'s and ``stud trace receive``'s file size before it is rotated: the demo
room traced writes about 75 KB/s, so the two files hold the last half hour or so."""
SHOWN_ATTRIBUTES: Final = ("stud.stream", "stud.events", "stud.expected_version",
                           "hand_number", "seat", "rpc.grpc.status_code")
KINDS: Final = {Span.SPAN_KIND_SERVER: "server", Span.SPAN_KIND_CLIENT: "client",
                Span.SPAN_KIND_INTERNAL: "internal", Span.SPAN_KIND_PRODUCER: "producer",
                Span.SPAN_KIND_CONSUMER: "consumer"}


@dataclass(frozen=True)
class SpanRecord:
    """One span as exported (ids in lower-case hex)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    service: str
    kind: str
    start_ns: int
    end_ns: int
    status: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    links: tuple[tuple[str, str], ...] = ()
    """(trace id, span id) of each span this one links to."""

    @property
    def millis(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> SpanRecord:
        raw = json.loads(line)
        raw["links"] = tuple(tuple(link) for link in raw.get("links", ()))
        return cls(**raw)


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which in (None, "kvlist_value", "bytes_value"):
        return None
    return getattr(value, which)


def records(request: trace_service_pb2.ExportTraceServiceRequest) -> list[SpanRecord]:
    """The spans of one OTLP export."""
    out = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        service = str(resource.get("service.name", "?"))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(SpanRecord(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(), name=span.name, service=service,
                    kind=KINDS.get(span.kind, "unspecified"),
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    status={0: "", 1: "ok", 2: "error"}.get(span.status.code, ""),
                    attributes={a.key: _value(a.value) for a in span.attributes},
                    links=tuple((link.trace_id.hex(), link.span_id.hex())
                                for link in span.links)))
    return out


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver: keeps every span in memory (unless ``keep`` is False: a
    long-running one, ``make observe``'s) and appends it to ``file``, if given."""

    def __init__(self, file: Path | None = None, keep: bool = True,
                 rotate_bytes: int | None = None) -> None:
        self.spans: list[SpanRecord] = []
        self.file = file
        self.keep = keep
        self.rotate_bytes = rotate_bytes
        self.received = 0
        self._lock = threading.Lock()

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,
               context: grpc.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:
        spans = records(request)
        with self._lock:
            self.received += len(spans)
            if self.keep:
                self.spans.extend(spans)
            if self.file is not None:
                with self.file.open("a") as out:
                    out.writelines(span.to_json() + "\n" for span in spans)
                    size = out.tell()
                if self.rotate_bytes is not None and size > self.rotate_bytes:
                    self.file.replace(rotated(self.file))
        return trace_service_pb2.ExportTraceServiceResponse()

    def trace(self, trace_id: str) -> list[SpanRecord]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    async def wait_for(self, predicate: Any, timeout: float = 20.0) -> list[SpanRecord]:
        """Wait until some span satisfies ``predicate``; all such spans."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [s for s in self.spans if predicate(s)]
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no span as asked in {timeout} s ({len(self.spans)} seen)")
            await asyncio.sleep(0.05)


def serve(port: int = 0, file: Path | None = None, host: str = "127.0.0.1", keep: bool = True,
          rotate_bytes: int | None = None) -> tuple[grpc.Server, Receiver, int]:
    """A :class:`Receiver` served on ``host:port`` (0: a free port) by threads of its own;
    the server (``stop`` it), the receiver and the port. The port has one owner: taken, it
    raises :class:`OSError` (rather than sharing it with ``SO_REUSEPORT``)."""
    receiver = Receiver(file, keep=keep, rotate_bytes=rotate_bytes)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.so_reuseport", 0)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        receiver, server)
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # grpcio: "Failed to bind"
        raise OSError(f"cannot listen on {host}:{port}: {exc}") from exc
    if not bound:
        raise OSError(f"cannot listen on {host}:{port}")
    server.start()
    return server, receiver, bound


@contextlib.asynccontextmanager
async def receiving(port: int = 0, file: Path | None = None, host: str = "127.0.0.1",
                    keep: bool = True, rotate_bytes: int | None = None
                    ) -> AsyncIterator[tuple[Receiver, int]]:
    """A :class:`Receiver` served on ``host:port`` (0: a free port) until the block ends;
    yields it and its port."""
    server, receiver, bound = serve(port, file, host, keep, rotate_bytes)
    try:
        yield receiver, bound
    finally:
        server.stop(None)


def rotated(path: Path) -> Path:
    """Where ``path`` goes when it is rotated (``traces.jsonl.1``)."""
    return path.with_name(path.name + ".1")


def load(path: Path, mentioning: Iterable[str] = ()) -> list[SpanRecord]:
    """The spans a receiver's file holds, its rotated part's first (only the lines that
    contain one of ``mentioning``, when given: a trace's spans and those linking to it,
    without parsing the others)."""
    wanted = tuple(mentioning)
    found = []
    for part in (rotated(path), path):
        with contextlib.suppress(FileNotFoundError), part.open() as lines:
            found += [SpanRecord.from_json(line) for line in lines
                      if line.strip() and (not wanted or any(w in line for w in wanted))]
    return found


def trace_spans(path: Path, trace_id: str) -> list[SpanRecord]:
    """What :func:`render` needs of the file for ``trace_id``: its spans, and every span of
    each trace linked to it."""
    near = load(path, (trace_id,))
    others = {s.trace_id for s in near if s.trace_id != trace_id}
    if not others:
        return near
    # the linked traces whole (their linking spans, already in near, once)
    return [s for s in near if s.trace_id == trace_id] + load(path, others)


@dataclass(frozen=True)
class TraceSummary:
    """One trace of a file, for ``stud trace list``."""

    trace_id: str
    root: SpanRecord
    spans: int
    start_ns: int
    end_ns: int

    @property
    def millis(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def summaries(spans: Iterable[SpanRecord]) -> list[TraceSummary]:
    """Each trace, latest first: its root span (the earliest span without a parent among its
    spans), its span count and its extent."""
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    out = []
    for trace_id, mine in by_trace.items():
        ids = {s.span_id for s in mine}
        roots = [s for s in mine if not s.parent_id or s.parent_id not in ids]
        root = min(roots or mine, key=lambda s: (bool(s.parent_id), s.start_ns))
        out.append(TraceSummary(trace_id, root, len(mine), min(s.start_ns for s in mine),
                                max(s.end_ns for s in mine)))
    return sorted(out, key=lambda t: t.start_ns, reverse=True)


def _label(span: SpanRecord) -> str:
    shown = ", ".join(f"{k}={span.attributes[k]}" for k in SHOWN_ATTRIBUTES
                      if k in span.attributes)
    status = " ERROR" if span.status == "error" else ""
    extra = f"  [{shown}]" if shown else ""
    return f"{span.name}  ({span.service}, {span.kind}, {span.millis:.2f} ms){status}{extra}"


def _tree(spans: Sequence[SpanRecord], out: list[str], indent: str = "") -> None:
    ids = {s.span_id for s in spans}
    children: dict[str, list[SpanRecord]] = defaultdict(list)
    roots = []
    for span in sorted(spans, key=lambda s: s.start_ns):
        if span.parent_id and span.parent_id in ids:
            children[span.parent_id].append(span)
        else:
            roots.append(span)

    def draw(span: SpanRecord, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        out.append(f"{indent}{prefix}{branch}{_label(span)}")
        below = prefix if top else prefix + ("   " if last else "│  ")
        kids = children.get(span.span_id, [])
        for i, kid in enumerate(kids):
            draw(kid, below, i == len(kids) - 1, False)

    for root in roots:
        draw(root, "", True, True)


def render(trace_id: str, spans: Iterable[SpanRecord]) -> str:
    """One trace as a tree, then the spans of other traces linked to it (each with its own
    tree); "" when no span of the trace is known."""
    every = list(spans)
    mine = [s for s in every if s.trace_id == trace_id]
    if not mine:
        return ""
    ids = {s.span_id for s in mine}
    lines = [f"trace {trace_id}: {len(mine)} spans"]
    _tree(mine, lines)
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in every:
        by_trace[span.trace_id].append(span)
    linkers = [s for s in every if s.trace_id != trace_id
               and any(t == trace_id and sid in ids for t, sid in s.links)]
    for linker in sorted(linkers, key=lambda s: s.start_ns):
        target = next(sid for t, sid in linker.links if t == trace_id and sid in ids)
        name = next(s.name for s in mine if s.span_id == target)
        lines.append("")
        lines.append(f"linked from trace {linker.trace_id} (its {linker.name} follows "
                     f"{name} {target}):")
        _tree(by_trace[linker.trace_id], lines, indent="  ")
    return "\n".join(lines)


# --- the command line -------------------------------------------------------------------------


def _path(args: argparse.Namespace, env: Mapping[str, str]) -> Path:
    return Path(args.file or env.get(TRACES_FILE_ENV, "") or DEFAULT_FILE)


def _show(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    path = _path(args, env)
    trace_id = args.trace_id.lower()
    text = render(trace_id, trace_spans(path, trace_id))
    if not text:
        out.write(f"no span of trace {args.trace_id} in {path}\n")
        return 1
    out.write(text + "\n")
    return 0


def _list(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    path = _path(args, env)
    found = [t for t in summaries(load(path))
             if args.name.lower() in t.root.name.lower()][:args.limit]
    if not found:
        out.write(f"no trace{' named ' + repr(args.name) if args.name else ''} in {path}\n")
        return 1
    for summary in found:
        started = time.strftime("%H:%M:%S", time.localtime(summary.start_ns / 1e9))
        out.write(f"{summary.trace_id}  {started}.{summary.start_ns // 1_000_000 % 1000:03d}"
                  f"  {summary.millis:9.2f} ms  {summary.spans:3d} spans  "
                  f"{summary.root.name} ({summary.root.service})\n")
    return 0


def _receive(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    path = _path(args, env)
    path.parent.mkdir(parents=True, exist_ok=True)

    async def run() -> None:
        async with receiving(args.port, path, args.host, keep=False,
                             rotate_bytes=ROTATE_BYTES) as (_receiver, port):
            out.write(f"receiving OTLP traces on {args.host}:{port}, into {path}\n")
            out.flush()
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


def register(commands: Any) -> None:
    """Add ``stud trace show``, ``list`` and ``receive`` to the ``stud`` command line."""
    parser = commands.add_parser(
        "trace", help="traces recorded locally: receive them, list them, show one as a tree",
        description="Traces the services export over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT), "
                    "recorded by 'make observe' or 'stud trace receive' into a file "
                    f"({TRACES_FILE_ENV}, default {DEFAULT_FILE}).")
    sub = parser.add_subparsers(dest="trace_command", required=True, metavar="SUBCOMMAND")
    p = sub.add_parser("show", help="print one trace as a tree, with the traces linked to it")
    p.add_argument("trace_id", metavar="TRACE_ID", help="32 hex digits (a log line's trace_id)")
    p.add_argument("--file", help=f"the spans' file (default ${TRACES_FILE_ENV})")
    p.set_defaults(handler=_show)
    p = sub.add_parser("list", help="the latest traces: id, start, duration, root span")
    p.add_argument("--name", default="",
                   help="only traces whose root span's name contains this (e.g. Bet)")
    p.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    p.add_argument("--file", help=f"the spans' file (default ${TRACES_FILE_ENV})")
    p.set_defaults(handler=_list)
    p = sub.add_parser("receive", help="an OTLP/gRPC receiver writing spans to the file")
    p.add_argument("--port", type=int, default=OTLP_PORT)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--file", help=f"the spans' file (default ${TRACES_FILE_ENV})")
    p.set_defaults(handler=_receive)
