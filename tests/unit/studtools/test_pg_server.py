"""studtools.pg_server without a server: which binaries it picks, and the system user it
runs PostgreSQL as when started as root (the server itself: tests/integration/history)."""

from __future__ import annotations

import pwd
import subprocess
from pathlib import Path
from typing import Any

import pytest

from studtools import pg_server


def fake_bindir(root: Path) -> Path:
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    for name in ("initdb", "postgres", "pg_ctl"):
        (bindir / name).write_text("")
    return bindir


def test_an_explicit_bindir_wins(tmp_path: Path) -> None:
    assert pg_server.find_bindir({"STUD_PG_BINDIR": str(tmp_path)}) == tmp_path


def test_the_embedded_wheel_when_asked_for(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    wheel = fake_bindir(tmp_path / "wheel")
    monkeypatch.setattr(pg_server, "_embedded_bindir", lambda: wheel)
    assert pg_server.find_bindir({"STUD_PG_EMBEDDED": "1"}) == wheel


def test_the_system_user_created_by_another_worker_meanwhile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two test workers start as root where no ``postgres`` user exists: both run useradd,
    the second's fails (the user exists, or /etc/passwd is locked); it must take the user the
    first made rather than fail its whole session."""
    created: list[str] = []

    def getpwnam(name: str) -> Any:
        if name in created:
            return pwd.struct_passwd((name, "x", 998, 998, "", "/nonexistent", "/bin/false"))
        raise KeyError(name)

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert args[0] == "useradd" and args[-1] == pg_server.SYSTEM_USER
        created.append(pg_server.SYSTEM_USER)  # the other worker won the race
        done = subprocess.CompletedProcess(args, 9, "", "useradd: user 'stud-postgres' "
                                                        "already exists")
        if kwargs.get("check"):
            done.check_returncode()
        return done

    monkeypatch.setattr(pg_server.os, "geteuid", lambda: 0)
    monkeypatch.setattr(pg_server.pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(pg_server.subprocess, "run", run)
    assert pg_server.server_user() == pg_server.SYSTEM_USER


def test_not_root_runs_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_server.os, "geteuid", lambda: 1000)
    assert pg_server.server_user() is None
