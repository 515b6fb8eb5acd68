"""Each action of a ``Play`` stream is a server span of its own (``stud trace list --name
Bet`` finds it as it finds the unary call): the stream itself is never traced (studkit
telemetry's streaming methods), so without it a Play action had no span. Tracing on in this
process, to memory, over real gRPC and Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from studkit import telemetry
from studtest.table import Room, player

from .play_support import PlayStream
from .test_play_attacks import _table, holder

pytestmark = pytest.mark.integration


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process (the module's globals, as tests/unit/studkit's)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "ENABLED", True)
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("test"))
    monkeypatch.setattr(telemetry, "_pending", type(telemetry._pending)())
    yield exporter
    provider.shutdown()


async def test_each_play_action_is_a_server_span(room: Room,
                                                 spans: InMemorySpanExporter) -> None:
    table_id, view = await _table(room)
    seat = view.hand.to_act
    stream = await PlayStream.open(room, player(holder(view, seat)), table_id)
    try:
        applied = await stream.act("post_bring_in", table_id=table_id, seat=seat,
                                   expected_sequence=view.version)
        refused = await stream.act("fold", table_id=table_id, seat=seat,
                                   expected_sequence=view.version)
    finally:
        await stream.close()
    assert applied.HasField("reply") and refused.code
    served = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert [s.name for s in served] == ["/stud.v1.TableService/Play/PostBringIn",
                                        "/stud.v1.TableService/Play/Fold"]
    bring_in, fold = served
    assert bring_in.parent is None and fold.parent is None  # each a trace of its own
    assert bring_in.context.trace_id != fold.context.trace_id
    assert bring_in.attributes["rpc.grpc.status_code"] == 0
    assert fold.attributes["rpc.grpc.status_code"] == refused.code
    # The action's append is inside its trace (the table's next step links to it).
    appends = [s for s in spans.get_finished_spans() if s.name == "EventStore.append"
               and s.context.trace_id == bring_in.context.trace_id]
    assert appends and appends[0].parent.span_id == bring_in.context.span_id
