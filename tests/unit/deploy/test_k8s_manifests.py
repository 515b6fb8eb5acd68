"""The Kubernetes manifests: parse, wire each service to its Secrets, probe over gRPC, and
let each service reach only what it needs."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3] / "deploy" / "k8s"
AUTH_CONFIG = Path(__file__).resolve().parents[3] / "libs" / "studkit" / "auth" / "config.py"


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

    @pytest.mark.parametrize(("name", "port"),
                             [("table", 50051), ("dealer", 50052), ("wallet", 50053),
                              ("tournament", 50054), ("archiver", 50055)])
    def test_service_deployment(self, name: str, port: int) -> None:
        """Each service runs as a Deployment with gRPC probes and Secrets for keys."""
        deployments = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "Deployment"}
        container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
        assert container["readinessProbe"]["grpc"]["port"] == port
        assert container["livenessProbe"]["grpc"]["port"] == port
        env = {e["name"]: e for e in container["env"]}
        assert env["REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == f"{name}-redis"

    @pytest.mark.parametrize("name", ["dealer", "wallet"])
    def test_services_verify_with_the_public_key_set_only(self, name: str) -> None:
        """STUD_AUTH_PUBLIC_KEYS names a file mounted from the stud-auth-public-keys Secret;
        the dealer and the wallet call no one, so they get no private key (no
        STUD_SERVICE_KEY, never STUD_ISSUER_KEY) and no retired shared secret."""
        deployments = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "Deployment"}
        pod = deployments[name]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        assert not {"STUD_SERVICE_KEY", "STUD_ISSUER_KEY", "STUD_AUTH_SECRET"} & set(env)
        path = Path(env["STUD_AUTH_PUBLIC_KEYS"]["value"])
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        mount = next(m for m in mounts.values() if Path(m["mountPath"]) == path.parent)
        assert mount["readOnly"] is True
        secret = volumes[mount["name"]]["secret"]
        assert secret["secretName"] == "stud-auth-public-keys"
        assert {"key": "public-keys.json", "path": path.name} in secret["items"]
        assert all("secret" not in v or v["secret"]["secretName"] == "stud-auth-public-keys"
                   for v in volumes.values())

    def test_env_names_are_read_by_the_services(self) -> None:
        """Every env var a Deployment sets is one its service's Settings reads."""
        from dealer.config import Settings as DealerSettings
        from wallet.config import Settings as WalletSettings

        sources = {"dealer": DealerSettings, "wallet": WalletSettings}
        deployments = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "Deployment"}
        for name, settings in sources.items():
            text = inspect.getsource(settings) + AUTH_CONFIG.read_text()
            for entry in deployments[name]["spec"]["template"]["spec"]["containers"][0]["env"]:
                assert f'"{entry["name"]}"' in text, (name, entry["name"])

    def test_dev_overlay_commits_no_key(self) -> None:
        """The dev overlay's key Secrets come from generated files, never literals."""
        k = yaml.safe_load((ROOT / "overlays" / "dev" / "kustomization.yaml").read_text())
        generators = {g["name"]: g for g in k["secretGenerator"]}
        for name in ("stud-auth-public-keys", "table-service-key", "tournament-service-key",
                     "archiver-service-key"):
            assert "literals" not in generators[name]
            assert all(f.split("=", 1)[1].startswith("keys/") for f in generators[name]["files"])
        assert "stud-auth" not in generators
        assert "keys/" in (ROOT / "overlays" / "dev" / ".gitignore").read_text().split()

    def test_redis_is_durable(self) -> None:
        """Redis runs with AOF, fsync always, noeviction and a persistent volume."""
        redis = next(d for d in base_docs() if d["kind"] == "StatefulSet")
        args = redis["spec"]["template"]["spec"]["containers"][0]["args"]
        pairs = dict(zip(args[::2], args[1::2], strict=True))
        assert pairs["--appendonly"] == "yes" and pairs["--appendfsync"] == "always"
        assert pairs["--maxmemory-policy"] == "noeviction"
        assert redis["spec"]["volumeClaimTemplates"]

    def test_default_deny_and_redis_only_from_services(self) -> None:
        """Traffic is denied by default; Redis admits only the services (the tournament's
        and the archiver's included)."""
        policies = {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == "NetworkPolicy"}
        assert policies["default-deny"]["spec"]["podSelector"] == {}
        rule = policies["redis-from-services"]["spec"]["ingress"][0]["from"][0]
        allowed = rule["podSelector"]["matchExpressions"][0]["values"]
        assert set(allowed) == {"table", "dealer", "wallet", "tournament", "archiver"}

    @pytest.mark.parametrize(("name", "port"),
                             [("table", 9101), ("dealer", 9102), ("wallet", 9103),
                              ("tournament", 9104), ("archiver", 9105)])
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
