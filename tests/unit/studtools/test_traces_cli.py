"""``stud trace show`` and ``stud trace list`` on a receiver's file, ``make observe``'s
receiver (:func:`studtools.traces.serve`) and what ``make run --observe`` gives each service
(issue 33)."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from studtools import cli, devrun
from studtools.traces import SpanRecord, load, serve

BET_TRACE, DEAL_TRACE, OTHER_TRACE = "a" * 32, "b" * 32, "c" * 32


def span(trace_id: str, span_id: str, name: str, parent: str = "", start: int = 0,
         end: int = 1_000_000, links: tuple[tuple[str, str], ...] = ()) -> SpanRecord:
    return SpanRecord(trace_id=trace_id, span_id=span_id, parent_id=parent, name=name,
                      service="table", kind="internal", start_ns=start, end_ns=end,
                      links=links)


@pytest.fixture
def spans_file(tmp_path: Path) -> Path:
    """A Bet's trace (its append under it), the deal's trace linked to the append, and an
    unrelated trace, later."""
    spans = [
        span(BET_TRACE, "1" * 16, "/stud.v1.TableService/Bet", start=1_000, end=3_000_000),
        span(BET_TRACE, "2" * 16, "EventStore.append", parent="1" * 16, start=2_000),
        span(DEAL_TRACE, "3" * 16, "table.deal", start=5_000_000, end=9_000_000,
             links=((BET_TRACE, "2" * 16),)),
        span(DEAL_TRACE, "4" * 16, "EventStore.append", parent="3" * 16, start=6_000_000,
             end=7_000_000),
        span(OTHER_TRACE, "5" * 16, "table.settle", start=10_000_000, end=12_500_000),
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(s.to_json() + "\n" for s in spans))
    return path


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli.main(list(argv), out=out, env={})
    return status, out.getvalue()


def test_show_prints_the_trace_then_each_linked_trace_once(spans_file: Path) -> None:
    status, text = run("trace", "show", BET_TRACE, "--file", str(spans_file))
    assert status == 0
    lines = text.splitlines()
    assert lines[0] == f"trace {BET_TRACE}: 2 spans"
    assert lines[1].startswith("/stud.v1.TableService/Bet  (table, internal, 3.00 ms)")
    assert lines[2].startswith("└─ EventStore.append  (table, internal, ")
    assert text.count("linked from trace") == 1
    assert text.count("table.deal  (") == 1 and text.count("EventStore.append  (") == 2
    assert "table.settle" not in text


def test_show_reads_the_variables_file_and_says_when_the_trace_is_unknown(
        spans_file: Path) -> None:
    out = io.StringIO()
    status = cli.main(["trace", "show", OTHER_TRACE.upper()], out=out,
                      env={"STUD_TRACES_FILE": str(spans_file)})
    assert status == 0 and out.getvalue().startswith(f"trace {OTHER_TRACE}: 1 spans")
    status, text = run("trace", "show", "d" * 32, "--file", str(spans_file))
    assert status == 1 and text == f"no span of trace {'d' * 32} in {spans_file}\n"


def test_list_gives_the_latest_traces_first_with_their_root_span(spans_file: Path) -> None:
    status, text = run("trace", "list", "--file", str(spans_file))
    assert status == 0
    lines = text.splitlines()
    assert [ln.split()[0] for ln in lines] == [OTHER_TRACE, DEAL_TRACE, BET_TRACE]
    assert lines[0].endswith("2.50 ms    1 spans  table.settle (table)")
    assert lines[2].endswith("3.00 ms    2 spans  /stud.v1.TableService/Bet (table)")
    status, text = run("trace", "list", "--name", "bet", "--file", str(spans_file))
    assert status == 0 and [ln.split()[0] for ln in text.splitlines()] == [BET_TRACE]
    status, text = run("trace", "list", "--limit", "1", "--file", str(spans_file))
    assert [ln.split()[0] for ln in text.splitlines()] == [OTHER_TRACE]
    status, text = run("trace", "list", "--name", "Raise", "--file", str(spans_file))
    assert status == 1 and text == f"no trace named 'Raise' in {spans_file}\n"


def export(port: int) -> None:
    one = Span(trace_id=bytes.fromhex(BET_TRACE), span_id=bytes.fromhex("1" * 16), name="x",
               start_time_unix_nano=1, end_time_unix_nano=2)
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name",
                                               value=AnyValue(string_value="dealer"))]),
        scope_spans=[ScopeSpans(spans=[one])])])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
        stub.Export(request, timeout=10)


def test_make_observes_receiver_writes_the_file_and_keeps_nothing_in_memory(
        tmp_path: Path) -> None:
    server, receiver, port = serve(0, tmp_path / "traces.jsonl", keep=False)
    try:
        export(port)
        export(port)
    finally:
        server.stop(None)
    assert receiver.received == 2 and receiver.spans == []
    lines = (tmp_path / "traces.jsonl").read_text().splitlines()
    assert [SpanRecord.from_json(ln).service for ln in lines] == ["dealer", "dealer"]


def test_the_receivers_port_has_one_owner() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            serve(taken.getsockname()[1])


def test_make_run_traces_only_when_asked() -> None:
    env = devrun.observe_env("wallet", 4999)
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4999"
    assert env["OTEL_SERVICE_NAME"] == "wallet"
    assert float(env["OTEL_EXPORTER_OTLP_TIMEOUT"]) < devrun.SERVICES_STOP_SECONDS
    assert devrun.observe_env("table")["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(":4317")
    for name in devrun.SERVICES:
        assert not any(k.startswith("OTEL_") for k in devrun.service_env(name, {}))


def test_a_long_running_receivers_file_is_rotated_and_still_read(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    server, receiver, port = serve(0, path, keep=False, rotate_bytes=1)
    try:
        export(port)  # over the size: rotated to traces.jsonl.1
        export(port)  # over it again: replaces traces.jsonl.1
        export(port)
    finally:
        server.stop(None)
    assert receiver.received == 3
    assert not path.exists() and (tmp_path / "traces.jsonl.1").exists()
    assert len(load(path)) == 1
    path.write_text(span(OTHER_TRACE, "5" * 16, "table.settle").to_json() + "\n")
    assert [s.trace_id for s in load(path)] == [BET_TRACE, OTHER_TRACE]
    status, text = run("trace", "list", "--file", str(path))
    assert status == 0 and {ln.split()[0] for ln in text.splitlines()} == {BET_TRACE,
                                                                            OTHER_TRACE}
