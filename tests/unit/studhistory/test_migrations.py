"""The migrations as files: numbered 1..n without a gap, named as the runner expects, each
one's checksum its exact text; and the CLI's refusals that need no server."""

from __future__ import annotations

import dataclasses
import re
from importlib import resources

import pytest

from studhistory.migrate import NAME, Migration, main, migrations


def test_every_sql_file_is_a_numbered_migration() -> None:
    files = sorted(e.name for e in resources.files("studhistory").joinpath(
        "migrations").iterdir() if e.name.endswith(".sql"))
    assert files and all(NAME.match(f) for f in files), files
    found = migrations()
    assert [f"{m.version:04d}_{m.name}.sql" for m in found] == files
    assert [m.version for m in found] == list(range(1, len(found) + 1))


def test_a_checksum_is_the_files_exact_text() -> None:
    first = migrations()[0]
    assert re.fullmatch(r"[0-9a-f]{64}", first.sha256)
    assert dataclasses.replace(first, sql=first.sql + " ").sha256 != first.sha256
    assert Migration(1, "x", "SELECT 1").sha256 == Migration(9, "y", "SELECT 1").sha256


def test_the_cli_needs_a_dsn(monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("STUD_MIGRATE_DSN", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    assert "--dsn" in capsys.readouterr().err


def test_the_cli_reports_an_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 on loopback: nothing listens there; the connection is refused at once.
    assert main(["--dsn", "postgresql://admin:x@127.0.0.1:1/stud?connect_timeout=2"]) == 1
    assert capsys.readouterr().err.startswith("migrate: ")
