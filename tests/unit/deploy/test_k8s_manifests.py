"""The Kubernetes manifests: parse, wire each service to its Secrets, probe over gRPC, and
let each service reach only what it needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3] / "deploy" / "k8s"


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def base_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((ROOT / "base" / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        docs.extend(load(ROOT / "base" / resource))
    return docs


class TestManifests:
    def test_every_file_parses(self) -> None:
        """Every YAML file under deploy/k8s is valid YAML."""
        files = list(ROOT.rglob("*.yaml"))
        assert files
        for f in files:
            load(f)

    @pytest.mark.parametrize(("name", "port"), [("dealer", 50052), ("wallet", 50053)])
    def test_service_deployment(self, name: str, port: int) -> None:
        """Each service runs as a Deployment with gRPC probes and Secrets for keys."""
        deployments = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "Deployment"}
        container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
        assert container["readinessProbe"]["grpc"]["port"] == port
        assert container["livenessProbe"]["grpc"]["port"] == port
        env = {e["name"]: e for e in container["env"]}
        assert env["STUD_AUTH_SECRET"]["valueFrom"]["secretKeyRef"]["name"] == "stud-auth"
        assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == f"{name}-redis"

    def test_redis_is_durable(self) -> None:
        """Redis runs with AOF, fsync always, noeviction and a persistent volume."""
        redis = next(d for d in base_docs() if d["kind"] == "StatefulSet")
        args = redis["spec"]["template"]["spec"]["containers"][0]["args"]
        pairs = dict(zip(args[::2], args[1::2], strict=True))
        assert pairs["--appendonly"] == "yes" and pairs["--appendfsync"] == "always"
        assert pairs["--maxmemory-policy"] == "noeviction"
        assert redis["spec"]["volumeClaimTemplates"]

    def test_default_deny_and_redis_only_from_services(self) -> None:
        """Traffic is denied by default; Redis admits only the services."""
        policies = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "NetworkPolicy"}
        assert policies["default-deny"]["spec"]["podSelector"] == {}
        rule = policies["redis-from-services"]["spec"]["ingress"][0]["from"][0]
        allowed = rule["podSelector"]["matchExpressions"][0]["values"]
        assert set(allowed) == {"table", "dealer", "wallet"}

    @pytest.mark.parametrize(("name", "port"), [("dealer", 9102), ("wallet", 9103)])
    def test_service_exposes_metrics(self, name: str, port: int) -> None:
        """Each service serves /metrics on a container port named ``metrics`` (the port its
        METRICS_PORT names), its pods ask Prometheus to scrape that port, and a NetworkPolicy
        admits the monitoring namespace to it."""
        deployments = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "Deployment"}
        template = deployments[name]["spec"]["template"]
        container = template["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == port
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["METRICS_PORT"] == str(port)
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/metrics"
        policies = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "NetworkPolicy"}
        spec = policies["metrics-from-monitoring"]["spec"]
        assert name in spec["podSelector"]["matchExpressions"][0]["values"]
        rule = spec["ingress"][0]
        assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {
            "stud-hilo/monitoring": "true"}
        assert [p["port"] for p in rule["ports"]] == ["metrics"]

    @pytest.mark.parametrize("overlay", ["dev", "prod"])
    def test_overlays_reference_base(self, overlay: str) -> None:
        """Both overlays build on the base."""
        k = yaml.safe_load((ROOT / "overlays" / overlay / "kustomization.yaml").read_text())
        assert "../../base" in k["resources"]
