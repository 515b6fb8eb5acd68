"""The gateway's metrics (docs/operations.md "Gateway (Envoy)"): through the real Envoy in
front of the real services, its metrics listener serves Envoy's statistics at ``/metrics``
and nothing else of the admin interface; calls are counted by route and by the gRPC status
they ended with, an open stream is an active request, and every ``envoy_`` family the
dashboards and the alert read is one Envoy exports (the services' own names are compared
with a running stack in tests/e2e/test_observability_stack.py)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stud.v1 import table_pb2
from studtest.gateway import Stack, WebStream, gateway_stack, web_call
from studtest.redis import TestRedis
from studtools.devkeys import DevKeys
from tools import observability as obs

from .conftest import url_for

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

GATEWAY = {"envoy_http_conn_manager_prefix": "gateway"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
async def stack(module_redis: TestRedis, dev_keys: DevKeys,
                tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    work = tmp_path_factory.mktemp("gateway-metrics")
    async with gateway_stack(url_for(module_redis), dev_keys, work, gateway={
            "admin_port": free_port(), "metrics_port": free_port()}) as running:
        yield running


def metrics_url(stack: Stack, path: str = "/metrics") -> str:
    return f"http://127.0.0.1:{stack.gateway.settings.metrics_port}{path}"


def scrape(stack: Stack) -> list[Sample]:
    """Every sample, named as Prometheus stores it (Envoy's counters have no ``_total``,
    which prometheus_client's parser would add to the names: only the labels are its)."""
    with urllib.request.urlopen(metrics_url(stack), timeout=10) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = re.match(r"[A-Za-z_:][\w:]*", line)
        assert name, line
        (family,) = text_string_to_metric_families(line + "\n")
        (sample,) = family.samples
        out.append(Sample(name.group(0), dict(sample.labels), float(sample.value)))
    return out


@dataclass
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(s.value for s in samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def status_of(url: str, method: str = "GET") -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method),
                                    timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


async def test_only_the_statistics_are_served(stack: Stack) -> None:
    """The admin interface's other pages (stopping Envoy, its configuration with the
    certificates' paths, log levels) are 404 on the metrics port."""
    assert status_of(metrics_url(stack)) == 200
    assert status_of(metrics_url(stack, "/stats/prometheus")) == 200
    for path, method in (("/quitquitquit", "POST"), ("/config_dump", "GET"),
                         ("/logging", "POST"), ("/stats", "GET"), ("/clusters", "GET"),
                         ("/healthcheck/fail", "POST"), ("/metrics", "POST"),
                         ("/%2e%2e/quitquitquit", "POST")):
        assert status_of(metrics_url(stack, path), method) in (400, 404), (path, method)
    assert stack.gateway.process is not None and stack.gateway.process.poll() is None


async def test_calls_are_counted_by_route_and_grpc_status(stack: Stack) -> None:
    token = stack.token("mia")
    before = scrape(stack)
    stack.open_table("gw-metrics")
    for _ in range(3):
        ok = web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
                      table_pb2.GetTableRequest(table_id="gw-metrics"), token=token)
        assert ok.status == 0
    missing = web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
                       table_pb2.GetTableRequest(table_id="gw-no-such"), token=token)
    assert missing.status == 5
    after = scrape(stack)

    def grew(name: str, by: float, **labels: str) -> None:
        assert value(after, name, **labels) - value(before, name, **labels) >= by, (
            name, labels, value(before, name, **labels), value(after, name, **labels))

    grew("envoy_cluster_grpc", 3, envoy_cluster_name="table", envoy_grpc_status="0")
    grew("envoy_cluster_grpc", 1, envoy_cluster_name="table", envoy_grpc_status="5")
    grew("envoy_vhost_route_upstream_rq_total", 4, envoy_route="table_unary")
    grew("envoy_http_downstream_rq_total", 4, **GATEWAY)
    grew("envoy_http_downstream_rq_xx", 4, envoy_response_code_class="2", **GATEWAY)
    # A refusal is no server error: the gateway's error ratio reads 2|4|13|14|15 only.
    assert value(after, "envoy_cluster_grpc", envoy_grpc_status="13") == 0


async def test_an_open_stream_is_an_active_request(stack: Stack) -> None:
    stack.open_table("gw-metrics-watch")
    stream = await asyncio.to_thread(
        WebStream, stack.gateway.url, "/stud.v1.TableService/WatchTable",
        table_pb2.WatchTableRequest(table_id="gw-metrics-watch"), token=stack.token("noa"))
    try:
        assert await asyncio.to_thread(stream.next) is not None  # TableOpened
        families = scrape(stack)
        assert value(families, "envoy_http_downstream_rq_active", **GATEWAY) >= 1
        assert value(families, "envoy_cluster_upstream_rq_active",
                     envoy_cluster_name="table") >= 1
    finally:
        stream.conn.close()


async def test_every_gateway_family_the_dashboards_and_rules_read_is_exported(
        stack: Stack) -> None:
    used = obs.used_metric_names("envoy_")
    assert {"envoy_cluster_grpc", "envoy_http_downstream_rq_xx",
            "envoy_vhost_route_upstream_rq_time_bucket"} <= set(used)
    stack.open_table("gw-metrics-names")
    web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
             table_pb2.GetTableRequest(table_id="gw-metrics-names"), token=stack.token("ida"))
    deadline = time.monotonic() + 20  # histograms appear at Envoy's next flush (5 s)
    while True:
        names = {s.name for s in scrape(stack)}
        missing = {n: sorted(w) for n, w in used.items() if n not in names}
        if not missing or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert missing == {}, "read by rules or panels, exported by no gateway"
