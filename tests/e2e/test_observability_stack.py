"""The rules and dashboards against a running stack (issue 33): ``make run``'s services
(``studtools.devrun --no-demo``, every service in its own process) are scraped, and the metric
names the rules and the dashboards read are compared with those really exported; then ``make
observe``'s Prometheus (Debian's, ``studtools.observe``) scrapes every one of them through the
``targets.json`` that ``make run`` writes and evaluates every rule without an error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from studtools import observe
from tools import observability as obs

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count",
                                                             "_created"),
            "summary": ("_sum", "_count", "_created"), "gauge": ("",), "info": ("_info",)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``make run --no-demo`` in a directory of its own; yields its run directory once its
    ``targets.json`` is written (every service serving)."""
    run = tmp_path_factory.mktemp("run")
    process = subprocess.Popen(
        [sys.executable, "-m", "studtools.devrun", "--no-demo",
         "--data-dir", str(run / "redis"), "--pg-dir", str(run / "pg"),
         "--keys-dir", str(run / "keys"), "--logs-dir", str(run / "logs"),
         "--env-file", str(run / "env")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (run / "targets.json").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                out = process.stdout.read() if process.stdout else ""
                pytest.fail(f"make run did not start (status {process.poll()}):\n{out}")
            time.sleep(0.5)
        yield run
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def targets(run: Path) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads((run / "targets.json").read_text())
    return listed


def exported_names(address: str) -> set[str]:
    """The sample names ``http://address/metrics`` exports, a labelled family that has no
    series yet included (its names from its type)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def test_every_service_is_listed_for_prometheus(stack: Path) -> None:
    jobs = {t["labels"]["job"] for t in targets(stack)}
    assert {"stud-dealer", "stud-wallet", "stud-table", "stud-tournament",
            "stud-archiver"} <= jobs
    for target in targets(stack):
        assert len(target["targets"]) == 1 and target["targets"][0].startswith("127.0.0.1:")


def test_the_rules_and_panels_read_only_exported_metrics(stack: Path) -> None:
    exported: set[str] = set()
    for target in targets(stack):
        exported |= exported_names(target["targets"][0])
    assert "stud_grpc_requests_total" in exported  # the scrape did read the families
    used = obs.used_metric_names()
    assert len(used) > 20
    missing = {name: sorted(where) for name, where in used.items() if name not in exported}
    assert missing == {}, "read by rules or panels, exported by no service"


def api(url: str, path: str) -> Any:
    with urllib.request.urlopen(f"{url}/api/v1/{path}", timeout=5) as reply:
        return json.loads(reply.read())["data"]


def test_make_observe_scrapes_every_service_and_evaluates_the_rules(
        stack: Path, tmp_path: Path) -> None:
    if observe.binary("prometheus") is None:
        message = "prometheus is not unpacked: run `make promtool` (Debian's package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    process, url = observe.start(tmp_path, observe.free_port(0),
                                 targets_file=stack / "targets.json", interval="1s")
    try:
        wanted = {t["targets"][0] for t in targets(stack)}
        deadline = time.monotonic() + 60
        while True:
            active = api(url, "targets")["activeTargets"]
            up = {t["labels"]["instance"] for t in active if t["health"] == "up"}
            groups = api(url, "rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            evaluated = all(r.get("lastEvaluation", "").startswith("20") for r in rules)
            if wanted <= up and rules and evaluated:
                break
            assert time.monotonic() < deadline, (sorted(wanted - up), active, groups)
            time.sleep(1)
        expected = {r.get("record") or r.get("alert")
                    for g in obs.rule_groups() for r in g["rules"]}
        assert {r["name"] for r in rules} == expected
        bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert bad == []
        down = [r for r in rules if r["name"] == "StudTargetDown" and r["alerts"]]
        assert down == []
        # the pages make observe prints (Debian's classic UI, from the unpacked assets)
        with urllib.request.urlopen(f"{url}/classic/alerts", timeout=5) as page:
            assert "StudTableStopped" in page.read().decode()
    finally:
        observe.stop(process)
