"""Versioned schema migrations of the archive of record (docs/history.md, "Migrations").

A migration is a file ``migrations/NNNN_name.sql`` of this package, applied once, in order,
each in its own transaction, and recorded in ``stud_meta.schema_migrations`` with its SHA-256.
A file already applied must never change: a changed checksum stops every later run (write a
new migration instead). Runners that start at once are serialised by an advisory lock, so
each migration applies once. ``python -m studhistory.migrate --dsn URL`` (or
``STUD_MIGRATE_DSN``) runs them as a role that may create schemas and roles (the database's
owner; ``make run`` and the tests use ``admin``; in Kubernetes, a Job).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final

import psycopg

LOCK_KEY: Final = 0x5354_5544_4D49_47  # "STUDMIG": the migrations' advisory lock
NAME: Final = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
DSN_ENV: Final = "STUD_MIGRATE_DSN"


class MigrationError(RuntimeError):
    """A migration could not be applied, or an applied one was changed."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def migrations() -> list[Migration]:
    """Every migration of the package, in order (versions 1, 2, ... with no gap)."""
    found = []
    for entry in resources.files("studhistory").joinpath("migrations").iterdir():
        match = NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise MigrationError(f"migrations are not numbered 1..n: {[m.version for m in found]}")
    return found


_META = """
CREATE SCHEMA IF NOT EXISTS stud_meta;
CREATE TABLE IF NOT EXISTS stud_meta.schema_migrations (
    version int PRIMARY KEY,
    name text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


def migrate(dsn: str, available: Sequence[Migration] | None = None) -> list[Migration]:
    """Apply the migrations not yet applied; returns those applied now ([] when up to date).
    :class:`MigrationError` when an applied migration's file changed."""
    todo = list(migrations() if available is None else available)
    applied_now: list[Migration] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            conn.execute(_META)
            done = {int(v): (str(n), str(h)) for v, n, h in conn.execute(
                "SELECT version, name, sha256 FROM stud_meta.schema_migrations").fetchall()}
            for migration in todo:
                if migration.version in done:
                    name, sha = done[migration.version]
                    if sha != migration.sha256:
                        raise MigrationError(
                            f"migration {migration.version:04d}_{name} was changed after it "
                            "was applied (its SHA-256 differs): add a new migration instead")
                    continue
                try:
                    with conn.transaction():
                        conn.execute(migration.sql)
                        conn.execute(
                            "INSERT INTO stud_meta.schema_migrations (version, name, sha256) "
                            "VALUES (%s, %s, %s)",
                            (migration.version, migration.name, migration.sha256))
                except psycopg.Error as exc:
                    raise MigrationError(f"migration {migration.version:04d}_"
                                         f"{migration.name} failed: {exc}") from exc
                applied_now.append(migration)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    return applied_now


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studhistory.migrate",
                                     description="Apply the archive's schema migrations.")
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV, ""),
                        help=f"PostgreSQL URL of the database's owner (default ${DSN_ENV})")
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error(f"give --dsn or set {DSN_ENV}")
    try:
        applied = migrate(args.dsn)
    except (MigrationError, psycopg.Error) as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        return 1
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "none"
    print(f"migrations applied: {names}; schema at version {len(migrations())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
