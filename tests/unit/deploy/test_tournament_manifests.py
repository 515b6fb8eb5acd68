"""The tournament service in ``deploy/k8s``: its Deployment (two replicas fenced by leases,
a rollout that surges before it stops one, the replica id from the pod, gRPC probes on its
port, the Secrets it reads mounted read-only, its own private key), its Service, its Redis
ACL user (its tournaments' keys and nothing else, in the launcher and the ACL file alike),
its image (the module ``tournament`` as entry point, ports as deployed), and the
NetworkPolicies: clients reach it, it reaches only the table's and the wallet's gRPC ports,
and it is the one pod (besides clients through the gateway) that reaches them; the RPC-level
restriction is the callee's check of the ``service:tournament`` identity, which the wallet's
Deployment and the table's code both name."""

from __future__ import annotations

import fnmatch
import importlib
import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml

from studkit import keys
from studkit.auth import Role
from studkit.auth.signing import may_sign
from studtools.redis_server import SERVICE_ACL
from table.tournament import TOURNAMENT_SERVICE
from wallet.config import Settings as WalletSettings

REPO = Path(__file__).resolve().parents[3]
ROOT = REPO / "deploy" / "k8s"
AUTH_CONFIG = REPO / "libs" / "studkit" / "auth" / "config.py"
GRPC, METRICS = 50054, 9104


def base_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((ROOT / "base" / "kustomization.yaml").read_text())
    return [d for resource in kustomization["resources"]
            for d in yaml.safe_load_all((ROOT / "base" / resource).read_text()) if d]


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in base_docs() if d["kind"] == kind}


def pod() -> dict[str, Any]:
    spec: dict[str, Any] = by_kind("Deployment")["tournament"]["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    found: dict[str, Any] = pod()["containers"][0]
    return found


def env() -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container()["env"]}


def ports() -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container()["ports"]}


class TestTournamentDeployment:
    def test_replicas_fenced_by_leases_and_a_rollout_that_loses_no_capacity(self) -> None:
        """One writer per tournament at a time is the lease's and the fence's job, not the
        Deployment's: two replicas, a rollout that starts a pod before it stops one, each
        replica named by its pod (the owner records name it)."""
        spec = by_kind("Deployment")["tournament"]["spec"]
        assert spec["replicas"] >= 2
        assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
        e = env()
        assert e["TOURNAMENT_REPLICA_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.name"
        assert int(e["TOURNAMENT_LEASE_MS"]["value"]) > 0

    def test_ports_probes_and_service(self) -> None:
        """gRPC on TOURNAMENT_ADDR's port with startup, readiness and liveness gRPC probes;
        metrics on METRICS_PORT; the Service forwards the gRPC port by name; the targets name
        the table's and the wallet's Services and ports."""
        e = env()
        assert ports() == {"grpc": GRPC, "metrics": METRICS}
        assert e["TOURNAMENT_ADDR"]["value"].rpartition(":")[2] == str(GRPC)
        assert e["METRICS_PORT"]["value"] == str(METRICS)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container()[probe]["grpc"]["port"] == GRPC, probe
        services = by_kind("Service")
        assert [(p["port"], p["targetPort"]) for p in services["tournament"]["spec"]["ports"]] \
            == [(GRPC, "grpc")]
        for name, var in (("table", "TOURNAMENT_TABLE_TARGET"),
                          ("wallet", "TOURNAMENT_WALLET_TARGET")):
            host, _, port = e[var]["value"].rpartition(":")
            assert host == name
            assert int(port) in {p["port"] for p in services[name]["spec"]["ports"]}

    def test_termination_grace_covers_the_drain(self) -> None:
        """The kubelet waits past TOURNAMENT_SHUTDOWN_GRACE before SIGKILL."""
        grace = float(env()["TOURNAMENT_SHUTDOWN_GRACE"]["value"])
        assert pod()["terminationGracePeriodSeconds"] >= grace + 5

    def test_secrets_mounted_read_only_with_the_right_keys(self) -> None:
        """The public key set, the tournament's own private key (tournament-service-key),
        REDIS_URL from tournament-redis; never the issuer's key or the retired secret."""
        e = env()
        assert "STUD_ISSUER_KEY" not in e and "STUD_AUTH_SECRET" not in e
        assert e["REDIS_URL"]["valueFrom"]["secretKeyRef"] == {"name": "tournament-redis",
                                                               "key": "url"}
        mounts = {m["name"]: m for m in container()["volumeMounts"]}
        volumes = {v["name"]: v["secret"] for v in pod()["volumes"]}
        for var, secret, key in (("STUD_AUTH_PUBLIC_KEYS", "stud-auth-public-keys",
                                  "public-keys.json"),
                                 ("STUD_SERVICE_KEY", "tournament-service-key", "key.pem")):
            path = Path(e[var]["value"])
            mount = next(m for m in mounts.values() if Path(m["mountPath"]) == path.parent)
            assert mount["readOnly"] is True
            assert volumes[mount["name"]]["secretName"] == secret
            assert {"key": key, "path": path.name} in volumes[mount["name"]]["items"]

    def test_no_other_pod_holds_the_tournament_key(self) -> None:
        """Only the tournament's pod mounts tournament-service-key, so only it can sign a
        service:tournament token (a service key signs for its own name only)."""
        holders = {name for name, d in by_kind("Deployment").items()
                   for v in d["spec"]["template"]["spec"].get("volumes", [])
                   if v.get("secret", {}).get("secretName") == "tournament-service-key"}
        assert holders == {"tournament"}
        assert may_sign("service:tournament", Role.SERVICE, "tournament")
        assert not may_sign("service:table", Role.SERVICE, "tournament")

    def test_env_names_are_read_by_the_tournament_service(self) -> None:
        """Every variable is one ``tournament.config`` (or the auth config) reads, once the
        tournament service has its settings module (the tourney-service branch)."""
        if importlib.util.find_spec("tournament.config") is None:
            pytest.skip("tournament.config is not in this tree yet")
        source = inspect.getsource(importlib.import_module("tournament.config"))
        text = source + AUTH_CONFIG.read_text()
        for name in env():
            assert f'"{name}"' in text, name


class TestTournamentImage:
    def test_the_image_runs_the_tournament_module_on_the_deployed_ports(self) -> None:
        """The Dockerfile's entry point is ``python -m tournament``, it exposes the ports the
        Deployment uses, and runs as the pod's non-root uid."""
        text = (REPO / "services" / "tournament" / "Dockerfile").read_text()
        assert 'CMD ["python", "-m", "tournament"]' in text
        assert f"EXPOSE {GRPC} {METRICS}" in text
        assert f"ENV TOURNAMENT_ADDR=[::]:{GRPC}" in text
        assert f"USER {pod()['securityContext']['runAsUser']}" in text


class TestTournamentNetwork:
    @staticmethod
    def policies() -> dict[str, dict[str, Any]]:
        return by_kind("NetworkPolicy")

    def test_clients_reach_the_tournament_api(self) -> None:
        """The gateway reaches the tournament's gRPC port, nobody else."""
        spec = self.policies()["tournament-ingress"]["spec"]
        assert spec["podSelector"] == {"matchLabels": {"app": "tournament"}}
        (rule,) = spec["ingress"]
        assert rule["from"] == [{"podSelector": {"matchLabels": {"app": "gateway"}}}]
        assert [p["port"] for p in rule["ports"]] == [GRPC]

    def test_the_tournament_reaches_the_table_and_the_wallet_only(self) -> None:
        """Egress: the table's and the wallet's gRPC ports (plus Redis and DNS)."""
        egress = self.policies()["tournament-egress"]["spec"]["egress"]
        reached = {(r["to"][0]["podSelector"]["matchLabels"]["app"], r["ports"][0]["port"])
                   for r in egress}
        assert reached == {("table", 50051), ("wallet", 50053)}
        redis_rule = self.policies()["services-to-redis"]["spec"]
        assert "tournament" in redis_rule["podSelector"]["matchExpressions"][0]["values"]

    def test_only_the_tournament_pod_reaches_the_tournament_calls(
            self) -> None:
        """Every ingress rule of the table and the wallet admits the gateway, the table
        (wallet only) or the tournament pod: no other pod reaches their tournament calls
        (the gateway does not route them: studtools.gateway.PUBLIC_METHODS). Which RPC the
        tournament pod may make is checked per call: the wallet's
        WALLET_TOURNAMENT_SERVICES and the table's TOURNAMENT_SERVICE name ``tournament``,
        the wallet's default too."""
        allowed = {"table": {"tournament", "gateway"},
                   "wallet": {"table", "tournament", "gateway"}}
        for target, pods in allowed.items():
            peers: set[str] = set()
            for policy in self.policies().values():
                spec = policy["spec"]
                if spec["podSelector"] != {"matchLabels": {"app": target}}:
                    continue
                for rule in spec.get("ingress", []):
                    for peer in rule["from"]:
                        assert set(peer) == {"podSelector"}, peer
                        peers.add(peer["podSelector"]["matchLabels"]["app"])
            assert peers == pods, target
        wallet = by_kind("Deployment")["wallet"]["spec"]["template"]["spec"]["containers"][0]
        values = {e["name"]: e.get("value") for e in wallet["env"]}
        assert values["WALLET_TOURNAMENT_SERVICES"] == TOURNAMENT_SERVICE == "tournament"
        assert WalletSettings.__dataclass_fields__["tournament_services"].default == (
            "tournament",)


class TestTournamentRedisUser:
    def test_the_tournament_user_owns_its_keys_and_nothing_else(self) -> None:
        """The tournament ACL user's patterns cover every tournament key and no key of the
        tables, the dealer or the wallet; the ACL file grants it the launcher's rules."""
        patterns = [rule[1:] for rule in SERVICE_ACL["tournament"] if rule[:1] in "~%"]
        assert patterns == [f"{keys.TOURNAMENT_PREFIX}*"]
        covered = [keys.tournament_key("mtt-1", name) for name in ("events", "commands",
                                                                  "version", "owner")]
        for key in covered:
            assert any(fnmatch.fnmatchcase(key, p) for p in patterns), key
        others = [keys.table_stream("t1"), keys.dealer_key("t1", "deck"),
                  keys.wallet_key("ledger"), keys.table_index()]
        for key in others:
            assert not any(fnmatch.fnmatchcase(key, p) for p in patterns), key
        acl = (ROOT / "overlays" / "dev" / "users.acl").read_text().splitlines()
        (line,) = [x for x in acl if x.startswith("user tournament ")]
        assert line.split()[4:] == ["resetkeys", *SERVICE_ACL["tournament"]]

    def test_dev_overlay_gives_the_tournament_its_redis_user_and_key(self) -> None:
        """The dev overlay's tournament-redis URL logs in as the tournament user; its
        service key Secret comes from the generated key file."""
        k = yaml.safe_load((ROOT / "overlays" / "dev" / "kustomization.yaml").read_text())
        generators = {g["name"]: g for g in k["secretGenerator"]}
        (url,) = generators["tournament-redis"]["literals"]
        assert url.startswith("url=redis://tournament:")
        assert generators["tournament-service-key"]["files"] == [
            "key.pem=keys/service-tournament.pem"]
