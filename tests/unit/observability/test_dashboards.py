"""The Grafana dashboards of ``deploy/observability/dashboards`` (issue 33): the five expected,
each one round-trips through the Grafana Foundation SDK's model unchanged, and every panel's
query is valid PromQL (each wrapped as a recording rule for ``promtool check rules``) that
reads only metrics the services' list names or the rules record. The metric names themselves
are compared with a running stack's ``/metrics`` in
``tests/e2e/test_observability_stack.py``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.models.dashboard import Dashboard

from tools import observability as obs

BOARDS = obs.OUT / "dashboards"
EXPECTED = {"stud-room", "stud-table-replica", "stud-money", "stud-tournaments", "stud-redis",
            "stud-gateway"}
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h",
                     "$instance": ".*"}
"""Grafana's variables a panel may use, and what promtool reads in their place."""


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(BOARDS.glob("*.json"))}


def test_the_five_dashboards_are_there() -> None:
    boards = dashboards()
    assert set(boards) == EXPECTED
    for uid, board in boards.items():
        assert board["uid"] == uid
        assert board["schemaVersion"] >= 41  # Grafana 11.6's, the pinned SDK's


@pytest.mark.parametrize("uid", sorted(EXPECTED))
def test_a_dashboard_round_trips_through_the_sdk_model(uid: str) -> None:
    """JSON -> ``Dashboard.from_json`` -> JSON gives the committed file back: nothing in it is
    outside the SDK's model (a hand edit or a field the schema does not know would be lost)."""
    data = json.loads((BOARDS / f"{uid}.json").read_text())
    again = obs.to_json(Dashboard.from_json(data))
    assert again == data
    panels = [p for p in data["panels"] if p["type"] != "row"]
    assert panels and all(p.get("targets") for p in panels)
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"


def substituted(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a Grafana variable promtool cannot read: {expr}"
    return expr


def test_every_panel_query_passes_promtool(promtool: Path, tmp_path: Path) -> None:
    rules = []
    for uid, board in dashboards().items():
        for n, (title, expr) in enumerate(obs.panel_queries(board)):
            rules.append({"record": f"panel:{re.sub(r'[^a-z0-9]', '_', uid)}:{n}",
                          "expr": substituted(expr), "labels": {"title": title[:60]}})
        for name, selector in obs.variable_queries(board):
            rules.append({"record": f"variable:{name}", "expr": substituted(selector)})
    assert len(rules) > 40
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    result = subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_promtool_refuses_a_broken_panel_query(promtool: Path, tmp_path: Path) -> None:
    """The wrapping can fail: an unbalanced query is refused."""
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "panel:x", "expr": "sum(rate(stud_grpc_requests_total[5m])"}]}]}))
    result = subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode != 0


def listed_metrics() -> set[str]:
    """The sample names docs/operations.md's "Metrics" tables list (a histogram's
    ``_bucket``, ``_sum`` and ``_count``)."""
    text = (obs.ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        kind = cells[2].strip()
        for name in re.findall(r"`(stud_\w+)`", cells[1]):
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            else:
                names.add(name)
    return names


def test_every_metric_read_is_in_the_services_list() -> None:
    """Each metric a rule or a panel reads is one docs/operations.md lists as exported (the
    running stack's own names are compared in the e2e test)."""
    listed = listed_metrics()
    assert "stud_grpc_requests_total" in listed and "stud_grpc_request_seconds_bucket" in listed
    unknown = {name: sorted(where) for name, where in obs.used_metric_names().items()
               if name not in listed}
    assert unknown == {}


def test_every_recorded_series_read_is_recorded() -> None:
    recorded = obs.recorded_names()
    for board in dashboards().values():
        for _, expr in obs.panel_queries(board):
            for name in obs.metric_names(expr):
                if ":" in name:
                    assert name in recorded, f"{name} is recorded by no rule"


def test_latency_panels_show_exemplars() -> None:
    """A latency quantile's query asks for the buckets' exemplars (the trace ids of slow
    calls), so "why was that action slow" goes from the graph to one trace."""
    latency = 0
    for board in dashboards().values():
        for panel in board["panels"]:
            for target in panel.get("targets") or []:
                expr = target["expr"]
                if "histogram_quantile(" in expr and "_seconds_bucket" in expr:
                    latency += 1
                    assert target.get("exemplar") is True, (panel["title"], expr)
    assert latency >= 8
