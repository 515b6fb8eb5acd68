"""The table service in ``deploy/k8s``: its Deployment is wired to what ``table.config``
reads (env names, ports, probes, Secrets), takes part in fenced ownership with its pod's name
and address, stops by handing its tables over within the termination grace, is kept available
by a PodDisruptionBudget, scaled by a HorizontalPodAutoscaler, and fenced by NetworkPolicies
(clients reach the table; only the table reaches the dealer and the wallet); its Redis ACL
user covers every table key."""

from __future__ import annotations

import fnmatch
import inspect
import re
from pathlib import Path
from typing import Any

import yaml

from studkit import keys
from studkit.repository import snapshot_key
from studtools.redis_server import SERVICE_ACL
from table import config as table_config

REPO = Path(__file__).resolve().parents[3]
ROOT = REPO / "deploy" / "k8s"
AUTH_CONFIG = REPO / "libs" / "studkit" / "auth" / "config.py"


def base_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((ROOT / "base" / "kustomization.yaml").read_text())
    return [d for resource in kustomization["resources"]
            for d in yaml.safe_load_all((ROOT / "base" / resource).read_text()) if d]


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == kind}


def table_pod() -> dict[str, Any]:
    spec: dict[str, Any] = by_kind("Deployment")["table"]["spec"]["template"]["spec"]
    return spec


def table_container() -> dict[str, Any]:
    container: dict[str, Any] = table_pod()["containers"][0]
    return container


def env() -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in table_container()["env"]}


def port_of(address: str) -> int:
    return int(address.rpartition(":")[2])


def ports() -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in table_container()["ports"]}


class TestTableDeployment:
    def test_replicas_and_rolling_update_lose_no_capacity(self) -> None:
        """Several replicas; a rollout stops one pod only once its replacement is up."""
        deployment = by_kind("Deployment")["table"]
        assert deployment["spec"]["replicas"] >= 3
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0

    def test_ports_match_the_settings(self) -> None:
        """The gRPC port is TABLE_ADDR's and the code's default; metrics is METRICS_PORT's and
        the code's default; the dealer and wallet targets name their Services' ports."""
        e = env()
        assert port_of(e["TABLE_ADDR"]["value"]) == ports()["grpc"]
        assert port_of(table_config.DEFAULT_ADDR) == ports()["grpc"]
        assert int(e["METRICS_PORT"]["value"]) == ports()["metrics"]
        assert ports()["metrics"] == table_config.DEFAULT_METRICS_PORT
        services = by_kind("Service")
        for name, var in (("dealer", "TABLE_DEALER_TARGET"), ("wallet", "TABLE_WALLET_TARGET")):
            host, _, port = e[var]["value"].rpartition(":")
            assert host == name
            assert int(port) in {p["port"] for p in services[name]["spec"]["ports"]}
        table_ports = services["table"]["spec"]["ports"]
        assert [(p["port"], p["targetPort"]) for p in table_ports] == [(ports()["grpc"], "grpc")]

    def test_native_grpc_probes_on_the_grpc_port(self) -> None:
        """Startup, readiness and liveness use the gRPC health protocol on the table's port
        (the services serve grpc.health.v1)."""
        container = table_container()
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == ports()["grpc"], probe
        source = (REPO / "libs" / "studkit" / "grpc_server.py").read_text()
        assert "grpc_health.v1" in source

    def test_every_env_name_is_read_by_the_table(self) -> None:
        """Every variable is one ``table.config.Settings`` (or the auth config) reads, except a
        helper that only feeds another variable's ``$(NAME)`` expansion."""
        text = inspect.getsource(table_config) + AUTH_CONFIG.read_text()
        values = " ".join(str(e.get("value", "")) for e in env().values())
        for name in env():
            if f'"{name}"' in text:
                continue
            assert f"$({name})" in values, f"{name} is neither read nor expanded"

    def test_ownership_identity_from_the_pod(self) -> None:
        """TABLE_REPLICA_ID is the pod's name and TABLE_ADVERTISE_ADDR the pod's IP with the
        gRPC port, so a not_owner redirect names a dialable pod."""
        e = env()
        assert e["TABLE_REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
        match = re.fullmatch(r"\$\((\w+)\):(\d+)", e["TABLE_ADVERTISE_ADDR"]["value"])
        assert match is not None
        helper, port = match.groups()
        assert e[helper]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert int(port) == ports()["grpc"]
        names = list(e)
        assert names.index(helper) < names.index("TABLE_ADVERTISE_ADDR"), "defined before use"

    def test_termination_grace_covers_the_drain_and_the_hand_over(self) -> None:
        """The kubelet waits longer than TABLE_SHUTDOWN_GRACE plus a lease before SIGKILL:
        SIGTERM drains calls for the grace, then the service releases its leases."""
        e = env()
        grace = float(e["TABLE_SHUTDOWN_GRACE"]["value"])
        lease_s = int(e["TABLE_LEASE_MS"]["value"]) / 1000
        assert table_pod()["terminationGracePeriodSeconds"] >= grace + lease_s + 5
        shell = (REPO / "libs" / "studkit" / "service.py").read_text()
        assert "run_until_signalled" in shell and "await deps.close()" in shell

    def test_secrets_mounted_read_only_with_the_right_keys(self) -> None:
        """The public key set from stud-auth-public-keys, the table's own private key from
        table-service-key (key.pem), REDIS_URL from table-redis (url); never the issuer's."""
        e = env()
        assert "STUD_ISSUER_KEY" not in e and "STUD_AUTH_SECRET" not in e
        assert e["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {"name": "table-redis",
                                                               "key": "url"}
        mounts = {m["name"]: m for m in table_container()["volumeMounts"]}
        volumes = {v["name"]: v["secret"] for v in table_pod()["volumes"]}
        for var, secret, key in (("STUD_AUTH_PUBLIC_KEYS", "stud-auth-public-keys",
                                  "public-keys.json"),
                                 ("STUD_SERVICE_KEY", "table-service-key", "key.pem")):
            path = Path(e[var]["value"])
            mount = next(m for m in mounts.values() if Path(m["mountPath"]) == path.parent)
            assert mount["readOnly"] is True
            assert volumes[mount["name"]]["secretName"] == secret
            assert {"key": key, "path": path.name} in volumes[mount["name"]]["items"]

    def test_disruption_budget_and_autoscaler(self) -> None:
        """Evictions take one replica at a time; the autoscaler scales the Deployment and never
        below the replicas that keep a takeover possible."""
        deployment = by_kind("Deployment")["table"]
        pdb = by_kind("PodDisruptionBudget")["table"]["spec"]
        assert pdb["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        assert pdb["maxUnavailable"] == 1
        hpa = by_kind("HorizontalPodAutoscaler")["table"]["spec"]
        assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                         "name": "table"}
        assert hpa["minReplicas"] >= 2 and hpa["maxReplicas"] > hpa["minReplicas"]
        assert hpa["behavior"]["scaleDown"]["policies"] == [
            {"type": "Pods", "value": 1, "periodSeconds": 120}]


class TestTableNetwork:
    @staticmethod
    def policies() -> dict[str, dict[str, Any]]:
        return by_kind("NetworkPolicy")

    def test_clients_reach_the_table_api(self) -> None:
        """The gateway reaches the table's gRPC port (every pod: redirects name a pod)."""
        spec = self.policies()["table-ingress"]["spec"]
        assert spec["podSelector"] == {"matchLabels": {"app": "table"}}
        (rule,) = spec["ingress"]
        assert rule["from"] == [{"podSelector": {"matchLabels": {"app": "gateway"}}}]
        assert [p["port"] for p in rule["ports"]] == [ports()["grpc"]]

    def test_only_the_table_and_clients_reach_dealer_and_wallet(self) -> None:
        """Of the namespace's pods, the dealer's and the wallet's clients' rules admit the table
        only (the tournament's and the archiver's have policies of their own, whose paths
        ``test_tournament_manifests`` and ``test_archiver_manifests`` check); which RPC a
        caller may make is the services' per-caller authorization (the table's own name)."""
        deployments = by_kind("Deployment")
        for name, port in (("dealer", 50052), ("wallet", 50053)):
            spec = self.policies()[f"{name}-ingress"]["spec"]
            (rule,) = spec["ingress"]
            pods = [p["podSelector"] for p in rule["from"] if "podSelector" in p]
            assert pods == [{"matchLabels": {"app": "table"}},
                            {"matchLabels": {"app": "gateway"}}]
            assert [p["port"] for p in rule["ports"]] == [port]
            container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
            env_ = {e["name"]: e.get("value") for e in container["env"]}
            assert env_[f"{name.upper()}_TABLE_SERVICES"] == "table"

    def test_table_egress_to_dealer_wallet_and_redis_only(self) -> None:
        """The table may call the dealer's and the wallet's gRPC ports, Redis and DNS."""
        egress = self.policies()["table-egress"]["spec"]["egress"]
        reached = {(r["to"][0]["podSelector"]["matchLabels"]["app"], r["ports"][0]["port"])
                   for r in egress}
        assert reached == {("dealer", 50052), ("wallet", 50053)}
        redis_rule = self.policies()["services-to-redis"]["spec"]
        assert "table" in redis_rule["podSelector"]["matchExpressions"][0]["values"]


class TestTableRedisUser:
    def test_the_table_user_covers_every_table_key(self) -> None:
        """The table ACL user's patterns (launcher and ACL file alike) cover every key the
        table service and the archive write: per-table keys in the table's hash tag and the
        global replica set and index."""
        patterns = [rule[1:] for rule in SERVICE_ACL["table"] if rule.startswith("~")]
        tag = f"{keys.TABLE_PREFIX}{{t1}}"
        written = [keys.table_stream("t1"), keys.table_commands("t1"), keys.table_version("t1"),
                   keys.table_owner("t1"), snapshot_key("t1"), keys.table_replicas(),
                   keys.table_index(),
                   *(f"{tag}:{suffix}" for suffix in ("summary", "settings", "intents",
                                                      "settled", "closed", "trimmed"))]
        for key in written:
            assert any(fnmatch.fnmatchcase(key, p) for p in patterns), key
        acl = (ROOT / "overlays" / "dev" / "users.acl").read_text().splitlines()
        (line,) = [x for x in acl if x.startswith("user table ")]
        assert all(f"~{p}" in line.split() for p in patterns)

    def test_dev_overlay_gives_the_table_its_redis_user(self) -> None:
        """The dev overlay's table-redis URL logs in as the table ACL user."""
        k = yaml.safe_load((ROOT / "overlays" / "dev" / "kustomization.yaml").read_text())
        generators = {g["name"]: g for g in k["secretGenerator"]}
        (url,) = generators["table-redis"]["literals"]
        assert url.startswith("url=redis://table:")
