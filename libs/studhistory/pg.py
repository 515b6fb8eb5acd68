"""Connecting to the archive of record (PostgreSQL; docs/history.md).

One driver, psycopg 3, for both the synchronous tools (``stud replay``, ``stud report``,
``stud archive``) and the asyncio services (the archiver, the table's reads of archived
hands). Each role reaches the archive with its own URL, read from the environment (``make
run`` writes them to ``.run/env``; in Kubernetes they come from Secrets):

- :data:`HISTORY_DSN_ENV` (``STUD_HISTORY_DSN``): the archiver's (role ``stud_archiver``:
  inserts and reads, never updates or deletes);
- :data:`SUPPORT_DSN_ENV` (``STUD_SUPPORT_DSN``): support's (``stud_support``: reads the
  history, the ledger and the tournaments);
- :data:`AUDITOR_DSN_ENV` (``STUD_AUDITOR_DSN``): the auditor's (``stud_auditor``: what
  support reads and the dealer's records);
- :data:`TOURNAMENT_DSN_ENV` (``TOURNAMENT_HISTORY_DSN``): the tournament service's
  (``stud_tournament_reader``: the archived tournaments' events and the lobby's view only);
- :data:`MIGRATE_DSN_ENV` (``STUD_MIGRATE_DSN``): the database owner's, for
  ``python -m studhistory.migrate`` only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import psycopg

HISTORY_DSN_ENV: Final = "STUD_HISTORY_DSN"
SUPPORT_DSN_ENV: Final = "STUD_SUPPORT_DSN"
AUDITOR_DSN_ENV: Final = "STUD_AUDITOR_DSN"
MIGRATE_DSN_ENV: Final = "STUD_MIGRATE_DSN"
TOURNAMENT_DSN_ENV: Final = "TOURNAMENT_HISTORY_DSN"
"""The tournament service's (``stud_tournament_reader``: archived tournaments only)."""

ROLE_DSN_ENV: Final[Mapping[str, str]] = {
    "archiver": HISTORY_DSN_ENV,
    "support": SUPPORT_DSN_ENV,
    "auditor": AUDITOR_DSN_ENV,
    "tournament": TOURNAMENT_DSN_ENV,
}
"""Role (as ``studtools.pg_server.ROLE_USERS`` names its login user) -> its variable."""

CONNECT_TIMEOUT_S: Final = 5
APPLICATION: Final = "stud"

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def dsn_from_env(role: str, env: Mapping[str, str] | None = None) -> str:
    """The URL for ``role`` (``archiver``, ``support`` or ``auditor``) from the environment,
    or "" when it is not set."""
    env = os.environ if env is None else env
    return env.get(ROLE_DSN_ENV[role], "")


def _options(dsn: str, autocommit: bool) -> dict[str, Any]:
    if not dsn:
        raise ValueError("no PostgreSQL URL (set STUD_HISTORY_DSN, STUD_SUPPORT_DSN or "
                         "STUD_AUDITOR_DSN; docs/history.md)")
    # Defaults the URL may override; every time in UTC, as the archive stores it.
    return {"autocommit": autocommit, "connect_timeout": CONNECT_TIMEOUT_S,
            "application_name": APPLICATION, "options": "-c TimeZone=UTC"}


def connect(dsn: str, *, autocommit: bool = False,
            **kwargs: Any) -> psycopg.Connection[Any]:
    """A synchronous connection (the CLI tools). ``kwargs`` go to ``psycopg.connect``."""
    return psycopg.connect(dsn, **{**_options(dsn, autocommit), **kwargs})


async def async_connect(dsn: str, *, autocommit: bool = False,
                        **kwargs: Any) -> psycopg.AsyncConnection[Any]:
    """An asyncio connection (the services). ``kwargs`` go to ``AsyncConnection.connect``."""
    return await psycopg.AsyncConnection.connect(dsn, **{**_options(dsn, autocommit), **kwargs})


def ledger_time(transaction_id: str) -> datetime:
    """A wallet ledger transaction's time, ``ledger.postings.occurred_at``: the milliseconds of
    its Redis stream id (``<ms>-<n>``), exactly, as the table's CHECK computes it."""
    millis, _, seq = transaction_id.partition("-")
    if not (millis.isdigit() and seq.isdigit()):
        raise ValueError(f"not a stream id: {transaction_id!r}")
    return _EPOCH + timedelta(milliseconds=int(millis))
