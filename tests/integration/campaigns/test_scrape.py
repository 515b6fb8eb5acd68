"""The audit's ``/metrics`` scrape against a real endpoint: one that does not answer is a
failed capture (the audit fails), one that answers is searched."""

from __future__ import annotations

import grpc
import pytest

from campaigns.secrecy import Capture, scrape_metrics
from studkit.metrics import Metrics, metrics_endpoint
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration


def test_a_scrape_where_nothing_answers_fails_the_audit() -> None:
    scrape = scrape_metrics("table", free_port(), timeout=2)
    assert scrape.text is None and scrape.error
    capture = Capture()
    capture.search_metrics(scrape)
    assert not capture.ok and capture.failures


def test_a_scrape_that_answers_is_searched() -> None:
    metrics = Metrics()
    metrics.observe_rpc("/stud.v1.TableService/Bet", grpc.StatusCode.OK, 0.01)
    with metrics_endpoint(metrics.registry, free_port(), "127.0.0.1") as endpoint:
        assert endpoint is not None
        scrape = scrape_metrics("table", endpoint.port)
    assert scrape.text and "Bet" in scrape.text
    capture = Capture()
    capture.search_metrics(scrape)
    assert capture.ok, capture.failures
