"""studkit.telemetry (issue 33): off unless an OTLP endpoint is set, and then nothing is
added anywhere; which calls are traced (never a stream); the driver's linked steps link to
every append since the stream's last step. The wiring across processes is
tests/e2e/test_traces.py."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from studkit import telemetry


def test_off_without_an_endpoint() -> None:
    assert not telemetry.wanted({})
    assert not telemetry.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": " "})
    assert telemetry.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"})
    assert telemetry.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317"})
    assert not telemetry.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
                                 "OTEL_SDK_DISABLED": "true"})
    assert not telemetry.setup("table", {})
    assert not telemetry.ENABLED


def test_off_adds_nothing() -> None:
    assert not telemetry.ENABLED
    assert telemetry.traceparent() == ""
    assert telemetry.exemplar() is None
    assert telemetry.add_trace_context(None, "info", {"event": "x"}) == {"event": "x"}
    with telemetry.appending("t1", 1, 0) as parent:
        assert parent == ""
    with telemetry.linked("t1", "table.deal"):
        pass
    assert telemetry.pending_appends("t1") == ()


def test_streams_health_and_reflection_are_never_traced() -> None:
    traced = telemetry.traced_filter()

    def call(method: str) -> bool:
        return traced(SimpleNamespace(method=method))

    assert call("/stud.v1.TableService/Bet")
    assert call("/stud.v1.WalletService/SettleHand")
    assert not call("/stud.v1.TableService/WatchTable")
    assert "/stud.v1.TableService/WatchTable" in telemetry.streaming_methods()
    assert not call("/grpc.health.v1.Health/Check")
    assert not call("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process, to memory (the module's globals, not the global
    provider: nothing is instrumented)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "ENABLED", True)
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("test"))
    monkeypatch.setattr(telemetry, "_pending", type(telemetry._pending)())
    yield exporter
    provider.shutdown()


def test_a_step_links_to_every_append_since_the_last(spans: InMemorySpanExporter) -> None:
    with telemetry.appending("t1", 1, 0) as bet:
        assert telemetry.traceparent() == bet
    with telemetry.appending("t1", 1, 1) as call:
        pass
    with telemetry.appending("t1", 0, 2):  # a command that appended nothing: no cause
        pass
    with telemetry.appending("t2", 1, 0):  # another table's
        pass
    def ids(traceparent: str) -> tuple[int, int]:
        ctx = telemetry.parse_traceparent(traceparent)
        assert ctx is not None
        return ctx.trace_id, ctx.span_id

    assert [(c.trace_id, c.span_id) for c in telemetry.pending_appends("t1")] == [
        ids(bet), ids(call)]
    with telemetry.linked("t1", "table.deal", hand_number=1):
        inside = telemetry.traceparent()
        line = telemetry.add_trace_context(None, "info", {})
    deal = next(s for s in spans.get_finished_spans() if s.name == "table.deal")
    assert [(link.context.trace_id, link.context.span_id) for link in deal.links] == [
        ids(bet), ids(call)]
    assert deal.parent is None and ids(inside)[0] != ids(bet)[0]
    assert inside.split("-")[1:3] == [line["trace_id"], line["span_id"]]
    assert telemetry.pending_appends("t1") == ()  # consumed by the step
    assert len(telemetry.pending_appends("t2")) == 1
    with telemetry.appending("t1", 1, 2):
        assert set(telemetry.exemplar() or {}) == {"trace_id"}
