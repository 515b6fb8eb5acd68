"""The archiver and PostgreSQL in ``deploy/k8s`` (issue 31): the archiver's Deployment (one
replica, fenced per table by an advisory lock; the migrations in its init container, as the
database's owner, before it starts; gRPC probes, metrics, hardened containers; the Secrets
it reads, each where it belongs), the history readers' DSNs (the table's and the wallet's
optional, the tournament's required: whatever the archiver removes from Redis has its reader
configured, in the base and both overlays), the NetworkPolicies (the archiver reaches Redis,
PostgreSQL and the dealer only; PostgreSQL admits the archiver and the history readers
only), and PostgreSQL itself: a StatefulSet in the dev overlay whose login users and
DSNs agree with each other and with ``studtools.pg_server.ROLE_USERS``, none in prod (a
managed database at an address the operator names). The dev logins file runs on a real
PostgreSQL, before and after the migrations, and each dev DSN then logs in with its role's
rights."""

from __future__ import annotations

import importlib
import inspect
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import yaml

from archiver import config as archiver_config
from studhistory import migrate as migrate_module
from studhistory.ledger_archive import DEFAULT_HOT_TRANSACTIONS
from studtools.pg_server import ROLE_USERS, PostgresServer

REPO = Path(__file__).resolve().parents[3]
ROOT = REPO / "deploy" / "k8s"
DEV = ROOT / "overlays" / "dev"
AUTH_CONFIG = REPO / "libs" / "studkit" / "auth" / "config.py"
GRPC, METRICS, PG = 50055, 9105, 5432
Docs = list[dict[str, Any]]


def base_docs() -> Docs:
    kustomization = yaml.safe_load((ROOT / "base" / "kustomization.yaml").read_text())
    return [d for resource in kustomization["resources"]
            for d in yaml.safe_load_all((ROOT / "base" / resource).read_text()) if d]


def by_kind(kind: str, docs: Docs | None = None) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in (base_docs() if docs is None else docs)
            if d["kind"] == kind}


def pod(docs: Docs | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = by_kind("Deployment", docs)["archiver"]["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    (found,) = pod()["containers"]
    result: dict[str, Any] = found
    return result


def init_container() -> dict[str, Any]:
    (found,) = pod()["initContainers"]
    result: dict[str, Any] = found
    return result


def env(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c.get("env", [])}


def secret_key(entry: dict[str, Any]) -> tuple[str, str]:
    ref = entry["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


class TestArchiverDeployment:
    def test_one_replica_fenced_per_table_and_a_rollout_that_surges(self) -> None:
        """One replica is enough, and two at once (a rollout's surge, a pod not yet gone) are
        safe because each table's step takes a PostgreSQL advisory lock, which this checks
        is still in the archiver's code."""
        spec = by_kind("Deployment")["archiver"]["spec"]
        assert spec["replicas"] == 1
        assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
        lock = (REPO / "libs" / "studhistory" / "pgarchive.py").read_text()
        assert "pg_try_advisory_lock" in lock and "stud-archiver:" in lock

    def test_ports_probes_and_no_service(self) -> None:
        """gRPC (health only) on ARCHIVER_ADDR's port, the code's default, probed by startup,
        readiness and liveness gRPC probes; metrics on METRICS_PORT, the code's default, with
        the scrape annotations; nobody calls it, so no Service selects it."""
        e = env(container())
        ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
        assert ports == {"grpc": GRPC, "metrics": METRICS}
        assert e["ARCHIVER_ADDR"]["value"].rpartition(":")[2] == str(GRPC)
        assert archiver_config.DEFAULT_ADDR.rpartition(":")[2] == str(GRPC)
        assert e["METRICS_PORT"]["value"] == str(METRICS) == str(
            archiver_config.DEFAULT_METRICS_PORT)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container()[probe]["grpc"]["port"] == GRPC, probe
        annotations = by_kind("Deployment")["archiver"]["spec"]["template"]["metadata"][
            "annotations"]
        assert annotations["prometheus.io/port"] == str(METRICS)
        assert annotations["prometheus.io/scrape"] == "true"
        assert not [s for s in by_kind("Service").values()
                    if s["spec"]["selector"].get("app") == "archiver"]

    def test_every_container_is_hardened(self) -> None:
        """Non-root (the image's uid), and each container, the migrations' included: no
        privilege escalation, a read-only root filesystem, no capability, a memory limit."""
        assert pod()["securityContext"]["runAsNonRoot"] is True
        dockerfile = (REPO / "services" / "archiver" / "Dockerfile").read_text()
        assert f"USER {pod()['securityContext']['runAsUser']}" in dockerfile
        for c in (init_container(), container()):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc["capabilities"] == {"drop": ["ALL"]}, c["name"]
            assert c["resources"]["limits"]["memory"], c["name"]
            assert c["resources"]["requests"]["cpu"], c["name"]

    def test_termination_grace_covers_the_drain(self) -> None:
        grace = float(env(container())["ARCHIVER_SHUTDOWN_GRACE"]["value"])
        assert pod()["terminationGracePeriodSeconds"] >= grace + 5

    def test_the_migrations_run_first_as_the_owner_and_only_there(self) -> None:
        """The init container (which ends before the archiver starts) runs ``python -m
        studhistory.migrate`` from the archiver's own image, the owner's DSN in the variable
        that module reads; the archiver itself never gets the owner's DSN."""
        init = init_container()
        assert init["image"] == container()["image"]
        assert init["command"] == ["python", "-m", "studhistory.migrate"]
        assert callable(migrate_module.main)
        assert "COPY libs/studhistory " in (
            REPO / "services" / "archiver" / "Dockerfile").read_text()
        assert {n: secret_key(e) for n, e in env(init).items()} == {
            migrate_module.DSN_ENV: ("history-admin", "dsn")}
        refs = {secret_key(e)[0] for e in container()["env"] if "valueFrom" in e
                and "secretKeyRef" in e["valueFrom"]}
        assert "history-admin" not in refs

    def test_secrets_each_where_it_belongs(self) -> None:
        """REDIS_URL from archiver-redis, STUD_HISTORY_DSN from archiver-history, its own
        private key (archiver-service-key) and the public key set mounted read-only; never
        the issuer's key."""
        e = env(container())
        assert "STUD_ISSUER_KEY" not in e and "STUD_AUTH_SECRET" not in e
        assert secret_key(e["REDIS_URL"]) == ("archiver-redis", "url")
        assert secret_key(e["STUD_HISTORY_DSN"]) == ("archiver-history", "dsn")
        mounts = {m["name"]: m for m in container()["volumeMounts"]}
        volumes = {v["name"]: v["secret"] for v in pod()["volumes"]}
        for var, secret, key in (("STUD_AUTH_PUBLIC_KEYS", "stud-auth-public-keys",
                                  "public-keys.json"),
                                 ("STUD_SERVICE_KEY", "archiver-service-key", "key.pem")):
            path = Path(e[var]["value"])
            mount = next(m for m in mounts.values() if Path(m["mountPath"]) == path.parent)
            assert mount["readOnly"] is True
            assert volumes[mount["name"]]["secretName"] == secret
            assert {"key": key, "path": path.name} in volumes[mount["name"]]["items"]

    def test_each_secret_is_read_by_its_own_pod_only(self) -> None:
        """The archiver's key, Redis URL and DSNs are read by the archiver's pod alone, the
        support DSN by the table's alone."""
        readers: dict[str, set[str]] = {}
        for kind in ("Deployment", "StatefulSet"):
            for name, d in by_kind(kind).items():
                spec = d["spec"]["template"]["spec"]
                for c in [*spec.get("initContainers", []), *spec["containers"]]:
                    for entry in c.get("env", []):
                        if "secretKeyRef" in entry.get("valueFrom", {}):
                            readers.setdefault(secret_key(entry)[0], set()).add(name)
                for v in spec.get("volumes", []):
                    if "secret" in v:
                        readers.setdefault(v["secret"]["secretName"], set()).add(name)
        for secret in ("archiver-service-key", "archiver-redis", "archiver-history",
                       "history-admin"):
            assert readers[secret] == {"archiver"}, secret
        assert readers["table-history"] == {"table"}
        assert readers["wallet-history"] == {"wallet"}
        assert readers["tournament-history"] == {"tournament"}

    def test_env_names_are_read_by_the_archiver(self) -> None:
        """Every variable is one ``archiver.config`` (or the auth config) reads; the dealer
        target names the dealer's Service and port."""
        text = inspect.getsource(archiver_config) + AUTH_CONFIG.read_text()
        for name in env(container()):
            assert f'"{name}"' in text, name
        host, _, port = env(container())["ARCHIVER_DEALER_TARGET"]["value"].rpartition(":")
        assert host == "dealer"
        assert int(port) in {p["port"] for p in by_kind("Service")["dealer"]["spec"]["ports"]}
        assert int(env(container())["STUD_HOT_HANDS"]["value"]) >= 1

    def test_the_image_runs_the_archiver_on_the_deployed_ports(self) -> None:
        text = (REPO / "services" / "archiver" / "Dockerfile").read_text()
        assert 'CMD ["python", "-m", "archiver"]' in text
        assert f"EXPOSE {GRPC} {METRICS}" in text
        assert f"ENV ARCHIVER_ADDR=[::]:{GRPC}" in text


    def test_prod_pins_the_image_of_both_containers(self, rendered: dict[str, Docs]) -> None:
        """The prod overlay's image tag reaches the migrations' container too (the migrations
        ship with the code that reads the schema), and never ``latest``."""
        spec = pod(rendered["prod"])
        images = {c["image"] for c in [*spec["initContainers"], *spec["containers"]]}
        assert len(images) == 1
        (image,) = images
        assert image.startswith("stud-hilo/archiver:") and not image.endswith(":latest")


@dataclass(frozen=True)
class Trim:
    """Something the archiver removes from Redis once it is in PostgreSQL, and the service
    that must then read it there."""

    setting: str
    """The archiver's variable that turns the removal on."""
    trims: Callable[[str | None], bool]
    """Whether the archiver removes it with that value (None: unset), as ``archiver.config``
    reads it."""
    reader: str
    """The Deployment that reads it back from PostgreSQL."""
    variable: str
    """The reader's DSN variable (its config module reads it)."""
    module: str
    secret: str
    required: bool
    """Whether the reader must hold it (a pod without it must not start): True where a
    replica without it would answer wrongly, not just less (a tournament NOT_FOUND whose id
    a CreateTournament could then reuse; a statement missing its archived lines)."""
    role: str
    """The database role its login holds (the tournament service's own, the others
    support's)."""


TRIMS = [
    Trim("ARCHIVER_TRIM_TOURNAMENTS", lambda v: v == "1", "tournament",
         "TOURNAMENT_HISTORY_DSN", "tournament.config", "tournament-history", True,
         "stud_tournament_reader"),
    Trim("WALLET_HOT_TRANSACTIONS",
         lambda v: int(v if v is not None else DEFAULT_HOT_TRANSACTIONS) > 0, "wallet",
         "WALLET_HISTORY_DSN", "wallet.config", "wallet-history", True, "stud_support"),
    # The tables' hands always leave Redis past STUD_HOT_HANDS; without table-history the
    # table still deals (its state is the snapshot and the hot window), only a hand that
    # left answers NOT_FOUND archived: configured, optional.
    Trim("STUD_HOT_HANDS", lambda v: True, "table", "TABLE_HISTORY_DSN", "table.config",
         "table-history", False, "stud_support"),
]


def container_of(docs: Docs, name: str) -> dict[str, Any]:
    found: dict[str, Any] = by_kind("Deployment", docs)[name]["spec"]["template"]["spec"][
        "containers"][0]
    return found


class TestEveryTrimHasItsReader:
    """Whatever the archiver removes from Redis, the service that answers for it reads it
    from PostgreSQL: its DSN from the support login's Secret, required where a pod without
    it would answer wrongly, and a path to PostgreSQL; in the base and as each overlay
    renders it."""

    @pytest.mark.parametrize("trim", TRIMS, ids=[t.setting for t in TRIMS])
    @pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
    def test_a_trim_has_its_reader_configured(self, overlay: str, trim: Trim,
                                              rendered: dict[str, Docs]) -> None:
        docs = base_docs() if overlay == "base" else rendered[overlay]
        archiver = env(container_of(docs, "archiver"))
        assert f'"{trim.setting}"' in inspect.getsource(archiver_config)
        if not trim.trims(archiver.get(trim.setting, {}).get("value")):
            return  # copied only: Redis keeps it, so nothing needs the archive
        reader = env(container_of(docs, trim.reader))
        assert trim.variable in reader, f"{trim.reader} has no {trim.variable}"
        ref = reader[trim.variable]["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) == (trim.secret, "dsn")
        if trim.required:
            assert not ref.get("optional", False), (
                f"{trim.setting} trims, so {trim.reader} must not start without "
                f"{trim.secret}")
        assert f'"{trim.variable}"' in inspect.getsource(importlib.import_module(
            trim.module))
        pg = {p for p, port in paths(docs, trim.reader, "Egress") if port == PG}
        assert pg and pg == {p for p, port in paths(docs, "archiver", "Egress")
                             if port == PG}, f"{trim.reader} cannot reach PostgreSQL"
        if overlay == "dev":
            assert urlsplit(dev_literal(trim.secret, "dsn")).username == dict(
                (role, user) for user, role in ROLE_USERS.items())[trim.role]
            assert trim.secret in by_kind("Secret", docs)
        if overlay == "prod":
            text = (ROOT / "overlays" / "prod" / "kustomization.yaml").read_text()
            assert f"create secret generic {trim.secret} " in text
            assert f"{trim.secret} is required" in text or not trim.required

    def test_the_archiver_trims_tournaments_everywhere(self, rendered: dict[str, Docs]
                                                       ) -> None:
        """Issue 31: a finished tournament leaves Redis in every overlay (its reader is
        configured: the test above)."""
        for docs in (base_docs(), rendered["dev"], rendered["prod"]):
            assert env(container_of(docs, "archiver"))["ARCHIVER_TRIM_TOURNAMENTS"][
                "value"] == "1"


class TestWalletHistory:
    def test_the_wallet_reads_archived_statements_as_support_optionally(self) -> None:
        """WALLET_HISTORY_DSN from wallet-history, optional (the wallet runs without it), the
        variable ``wallet.config`` reads."""
        wallet = by_kind("Deployment")["wallet"]["spec"]["template"]["spec"]["containers"][0]
        ref = env(wallet)["WALLET_HISTORY_DSN"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "wallet-history", "key": "dsn", "optional": True}
        assert '"WALLET_HISTORY_DSN"' in inspect.getsource(importlib.import_module(
            "wallet.config"))


class TestTableHistory:
    def test_the_table_reads_archived_hands_as_support_optionally(self) -> None:
        """TABLE_HISTORY_DSN from table-history, optional (the table runs without it), the
        variable ``table.config`` reads."""
        table = by_kind("Deployment")["table"]["spec"]["template"]["spec"]["containers"][0]
        ref = env(table)["TABLE_HISTORY_DSN"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "table-history", "key": "dsn", "optional": True}
        assert '"TABLE_HISTORY_DSN"' in inspect.getsource(importlib.import_module(
            "table.config"))


def apps(selector: dict[str, Any]) -> set[str] | None:
    """The ``app`` labels a pod selector picks (None: every pod)."""
    if selector == {}:
        return None
    if "matchLabels" in selector:
        assert set(selector) == {"matchLabels"} and set(selector["matchLabels"]) == {"app"}
        return {selector["matchLabels"]["app"]}
    (expr,) = selector["matchExpressions"]
    assert set(selector) == {"matchExpressions"}
    assert expr["key"] == "app" and expr["operator"] == "In"
    return set(expr["values"])


def peers(rule_peers: list[dict[str, Any]] | None) -> set[str]:
    """A rule's peers as names: an app, ``ns:<label>=<value>``, ``ip:<cidr>``, or ``any``."""
    if not rule_peers:
        return {"any"}
    out: set[str] = set()
    for peer in rule_peers:
        if "ipBlock" in peer:
            assert set(peer) == {"ipBlock"}
            out.add(f"ip:{peer['ipBlock']['cidr']}")
        elif "namespaceSelector" in peer:
            assert set(peer) == {"namespaceSelector"}
            ((k, v),) = peer["namespaceSelector"]["matchLabels"].items()
            out.add(f"ns:{k}={v}")
        else:
            assert set(peer) == {"podSelector"}
            picked = apps(peer["podSelector"])
            assert picked is not None, "a rule admitting every pod"
            out |= picked
    return out


def paths(docs: Docs, app: str, direction: str) -> set[tuple[str, object]]:
    """Every (peer, port) the NetworkPolicies allow pods labelled ``app`` to reach
    (``Egress``) or to be reached by (``Ingress``)."""
    found: set[tuple[str, object]] = set()
    key, side = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    for policy in by_kind("NetworkPolicy", docs).values():
        spec = policy["spec"]
        picked = apps(spec["podSelector"])
        if direction not in spec["policyTypes"] or (picked is not None and app not in picked):
            continue
        for rule in spec.get(key, []):
            for peer in peers(rule.get(side)):
                for port in rule["ports"]:
                    found.add((peer, port["port"]))
    return found


DNS = {("any", 53)}
MONITORING = ("ns:stud-hilo/monitoring=true", "metrics")
CLIENTS = "gateway"  # clients reach the services through the gateway only (gateway.yaml)


class TestArchiverNetwork:
    def test_the_archiver_reaches_redis_postgres_and_the_dealer_only(self) -> None:
        assert paths(base_docs(), "archiver", "Egress") == DNS | {
            ("redis", 6379), ("postgres", PG), ("dealer", 50052)}

    def test_nothing_reaches_the_archiver_but_prometheus(self) -> None:
        assert paths(base_docs(), "archiver", "Ingress") == {MONITORING}

    def test_postgres_admits_the_archiver_and_the_history_readers_only(self) -> None:
        """Ingress to PostgreSQL's pods (dev) is the archiver (its init container's
        migrations included: the same pod), the table, the wallet and the tournament; and no
        pod but those four may send to it."""
        assert paths(base_docs(), "postgres", "Ingress") == {
            ("archiver", PG), ("table", PG), ("wallet", PG), ("tournament", PG)}
        senders = {name for kind in ("Deployment", "StatefulSet")
                   for name in by_kind(kind)
                   if ("postgres", PG) in paths(base_docs(), name, "Egress")}
        assert senders == {"archiver", "table", "wallet", "tournament"}

    def test_the_table_may_also_reach_postgres(self) -> None:
        assert paths(base_docs(), "table", "Egress") == DNS | {
            ("redis", 6379), ("postgres", PG), ("dealer", 50052), ("wallet", 50053)}

    def test_the_dealer_admits_the_archiver_on_its_grpc_port(self) -> None:
        """The dealer's callers: the table, the archiver (GetAudit; what else it may call is
        the dealer's per-caller check) and clients; Prometheus on metrics."""
        assert paths(base_docs(), "dealer", "Ingress") == {
            ("table", 50052), ("archiver", 50052), (CLIENTS, 50052), MONITORING}
        dealer = (REPO / "services" / "dealer" / "app.py").read_text()
        assert 'ARCHIVER_SERVICE = "archiver"' in dealer

    def test_redis_admits_the_archiver(self) -> None:
        assert ("archiver", 6379) in paths(base_docs(), "redis", "Ingress")

    @pytest.mark.parametrize("overlay", ["dev", "prod"])
    def test_rendered_overlays_keep_the_paths(self, overlay: str,
                                              rendered: dict[str, Docs]) -> None:
        """As rendered: dev reaches its in-cluster PostgreSQL by pod; prod reaches the managed
        one by address only, a single host per entry, never a range (the placeholder reaches
        nothing until the operator names the database)."""
        docs = rendered[overlay]
        egress = paths(docs, "archiver", "Egress")
        pg = {p for p in egress if p[1] == PG}
        assert egress - pg == DNS | {("redis", 6379), ("dealer", 50052)}
        assert pg == {(p, PG) for p, port in paths(docs, "table", "Egress") if port == PG}
        if overlay == "dev":
            assert pg == {("postgres", PG)}
        else:
            assert pg and all(p.startswith("ip:") for p, _ in pg)
            for p, _ in pg:
                net = ipaddress.ip_network(p.removeprefix("ip:"))
                assert net.num_addresses == 1, net
        assert paths(docs, "archiver", "Ingress") == {MONITORING}


def dev_kustomization() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEV / "kustomization.yaml").read_text())
    return loaded


def dev_literal(secret: str, key: str) -> str:
    generators = {g["name"]: g for g in dev_kustomization()["secretGenerator"]}
    values: dict[str, str] = dict(x.split("=", 1) for x in generators[secret]["literals"])
    return values[key]


def dev_logins() -> dict[str, tuple[str, str]]:
    """Login user -> (role, password), from the dev logins file."""
    text = (DEV / "postgres-logins.sql").read_text()
    found = re.findall(r"\('(\w+)', '(\w+)', '([^']+)'\)", text)
    return {name: (role, password) for role, name, password in found}


class TestPostgres:
    def test_dev_runs_postgres_prod_does_not(self, rendered: dict[str, Docs]) -> None:
        """Dev: a StatefulSet with a persistent volume and a Service on 5432; prod: no
        PostgreSQL object at all (a managed database), nor anything labelled as one."""
        dev = rendered["dev"]
        sts = by_kind("StatefulSet", dev)["postgres"]
        assert sts["spec"]["volumeClaimTemplates"]
        assert sts["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
            "postgres:")
        service = by_kind("Service", dev)["postgres"]
        assert [p["port"] for p in service["spec"]["ports"]] == [PG]
        prod = rendered["prod"]
        assert "postgres" not in by_kind("StatefulSet", prod)
        assert "postgres" not in by_kind("Service", prod)
        assert not [d for d in prod if d["kind"] != "NetworkPolicy" and "postgres" in str(
            d.get("spec", {}).get("selector", ""))]

    def test_dev_postgres_is_hardened_and_writes_only_volumes(
            self, rendered: dict[str, Docs]) -> None:
        spec = by_kind("StatefulSet", rendered["dev"])["postgres"]["spec"]
        pod_spec = spec["template"]["spec"]
        assert pod_spec["securityContext"]["runAsNonRoot"] is True
        (c,) = pod_spec["containers"]
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"]
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert c["readinessProbe"] and c["livenessProbe"]
        writable = {m["name"] for m in c["volumeMounts"] if not m.get("readOnly")}
        volumes = {v["name"]: v for v in pod_spec["volumes"]}
        claims = {t["metadata"]["name"] for t in spec["volumeClaimTemplates"]}
        for name in writable:
            assert name in claims or "emptyDir" in volumes[name], name
        data = next(m for m in c["volumeMounts"] if m["name"] in claims)
        pgdata = env(c)["PGDATA"]["value"]
        assert pgdata.startswith(data["mountPath"] + "/"), "a directory inside the volume"
        init = next(m for m in c["volumeMounts"] if m["mountPath"] ==
                    "/docker-entrypoint-initdb.d")
        assert volumes[init["name"]]["secret"]["secretName"] == "postgres-init"

    def test_dev_logins_match_the_roles_and_the_dsns(self, rendered: dict[str, Docs]) -> None:
        """The logins file makes exactly ``ROLE_USERS`` (user -> role); the archiver's DSN
        logs in as the stud_archiver user, the table's as stud_support's, the migrations' as
        the server's superuser, each with its password, at the Service's host and port and
        the server's database."""
        logins = dev_logins()
        assert {name: role for name, (role, _) in logins.items()} == dict(ROLE_USERS)
        sts = by_kind("StatefulSet", rendered["dev"])["postgres"]
        e = env(sts["spec"]["template"]["spec"]["containers"][0])
        user_of_role = {role: user for user, role in ROLE_USERS.items()}
        expected = {"archiver-history": (user_of_role["stud_archiver"], None),
                    "table-history": (user_of_role["stud_support"], None),
                    "wallet-history": (user_of_role["stud_support"], None),
                    "tournament-history": (user_of_role["stud_tournament_reader"], None),
                    "history-admin": (e["POSTGRES_USER"]["value"],
                                      dev_literal("history-admin", "password"))}
        assert secret_key(e["POSTGRES_PASSWORD"]) == ("history-admin", "password")
        for secret, (user, password) in expected.items():
            url = urlsplit(dev_literal(secret, "dsn"))
            assert url.scheme == "postgresql"
            assert (url.hostname, url.port) == ("postgres", PG), secret
            assert url.path == "/" + e["POSTGRES_DB"]["value"], secret
            assert url.username == user, secret
            assert url.password == (password or logins[user][1]), secret

    def test_dev_archiver_redis_user_matches_the_acl_file(self) -> None:
        url = urlsplit(dev_literal("archiver-redis", "url"))
        assert (url.hostname, url.port, url.username) == ("redis", 6379, "archiver")
        acl = (DEV / "users.acl").read_text().splitlines()
        (line,) = [x for x in acl if x.startswith("user archiver ")]
        assert f">{url.password}" in line.split()

    def test_dev_overlay_builds_the_archiver_key_from_the_generated_file(self) -> None:
        generators = {g["name"]: g for g in dev_kustomization()["secretGenerator"]}
        assert generators["archiver-service-key"]["files"] == [
            "key.pem=keys/service-archiver.pem"]


def dev_dsn(secret: str, server: PostgresServer) -> str:
    url = urlsplit(dev_literal(secret, "dsn"))
    return url._replace(netloc=f"{url.username}:{url.password}@127.0.0.1:{server.port}",
                        path="/stud").geturl()


PRIVILEGES = [("archiver-history", "history.events", "INSERT", True),
              ("archiver-history", "history.events", "UPDATE", False),
              ("archiver-history", "auditor.dealer_hands", "INSERT", True),
              ("table-history", "history.events", "SELECT", True),
              ("table-history", "history.events", "INSERT", False),
              ("table-history", "auditor.dealer_hands", "SELECT", False)]


@pytest.mark.parametrize("logins_first", [True, False], ids=["dev-order", "prod-order"])
def test_dev_logins_on_a_real_postgres(logins_first: bool) -> None:
    """On a real server: the dev logins file before the migrations (the dev StatefulSet's
    first start) or after them (an operator on a managed database); either way each dev DSN
    logs in, with its role's rights and no more, and the file reruns cleanly."""
    logins = (DEV / "postgres-logins.sql").read_text()
    with PostgresServer(fsync=False) as server:
        server.create_database("stud")
        admin = server.dsn("admin", "stud")
        if logins_first:
            _run(admin, logins)
        migrate_module.migrate(admin)
        if not logins_first:
            _run(admin, logins)
        _run(admin, logins)
        with psycopg.connect(admin, autocommit=True) as conn:
            for secret, table, privilege, allowed in PRIVILEGES:
                user = urlsplit(dev_literal(secret, "dsn")).username
                row = conn.execute("SELECT has_table_privilege(%s, %s, %s)",
                                   (user, table, privilege)).fetchone()
                assert row == (allowed,), (user, table, privilege)
        with psycopg.connect(dev_dsn("table-history", server), autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM history.hands").fetchone() == (0,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT count(*) FROM auditor.dealer_hands")
        with psycopg.connect(dev_dsn("archiver-history", server), autocommit=True) as conn:
            assert conn.execute("SELECT pg_has_role('stud_archiver', 'MEMBER')").fetchone() \
                == (True,)
        auditor = dev_logins()["auditor"][1]
        with psycopg.connect(f"postgresql://auditor:{auditor}@127.0.0.1:{server.port}/stud",
                             autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM auditor.dealer_hands").fetchone() == (0,)


def _run(dsn: str, sql_text: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql_text.encode())
