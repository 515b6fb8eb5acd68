"""``python -m wallet.rebuild_sessions``: an operator writes the players' sessions hash
(``stud:wallet:{wallet}:sessions``) again from the ledger: the archive's transactions in
PostgreSQL older than the ledger still in Redis, then Redis's (``WalletStore.
rebuild_sessions``), in one script that refuses if a transaction lands meanwhile (read again).

Addresses as the wallet's own (run it in the wallet's pod as it is): ``REDIS_URL`` and
``WALLET_HISTORY_DSN`` (PostgreSQL as ``stud_support``), or ``--redis-url`` and
``--history-dsn``. Without a DSN it refuses (exit 1, ``history_dsn_required``) unless told
``--redis-only``: the ledger in Redis alone is the whole ledger only while the archiver never
trimmed it (``WALLET_HOT_TRANSACTIONS`` 0), and Redis 6.2 cannot tell that it did (Redis 7
can: ``--redis-only`` is then refused ``ledger_trimmed``). Prints one line, exits 0 when
written; a refusal writes nothing.

    python -m wallet.rebuild_sessions --redis-url redis://wallet:...@127.0.0.1:6379/0 \\
        --history-dsn postgresql://support:...@127.0.0.1:5432/stud
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import psycopg

from studkit.errors import ServiceError
from wallet.codec import MalformedLedgerEntry
from wallet.config import DEFAULT_REDIS_URL
from wallet.history import archived_sessions_seen
from wallet.protection.sessions import Seen
from wallet.store import WalletStore


async def rebuild(redis_url: str, dsn: str) -> str:
    """Rebuild the sessions hash; the line that says what was folded."""
    store = WalletStore.from_url(redis_url)
    conn: psycopg.AsyncConnection[Any] | None = None
    archived: list[int] = []
    try:
        if dsn:
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True,
                                                         connect_timeout=10)

        async def older(before: str | None) -> Sequence[Seen]:
            assert conn is not None
            rows = await archived_sessions_seen(conn, before)
            archived.append(len(rows))
            return rows

        sessions = await store.rebuild_sessions(older if conn is not None else None)
    finally:
        if conn is not None:
            await conn.close()
        await store.close()
    source = (f"{archived[-1]} archived transactions that saw players, then the ledger in "
              "Redis" if archived else "the ledger in Redis alone")
    return f"sessions rebuilt: {len(sessions)} players, from {source}"


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Run the command; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m wallet.rebuild_sessions",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", DEFAULT_REDIS_URL),
                        help="the wallet's Redis (default $REDIS_URL)")
    parser.add_argument("--history-dsn", default=os.environ.get("WALLET_HISTORY_DSN", ""),
                        help="PostgreSQL as stud_support (default $WALLET_HISTORY_DSN); "
                             "required unless --redis-only")
    parser.add_argument("--redis-only", action="store_true",
                        help="read the ledger in Redis alone, without the archive: only for "
                             "a wallet whose ledger was never trimmed (WALLET_HOT_"
                             "TRANSACTIONS 0); refused ledger_trimmed where Redis (7) tells "
                             "it was, silently short where it cannot (6.2)")
    args = parser.parse_args(argv)
    if args.redis_only:
        args.history_dsn = ""
    elif not args.history_dsn:
        print("sessions NOT rebuilt (history_dsn_required): no --history-dsn (nor "
              "WALLET_HISTORY_DSN): once the archiver trimmed the ledger, Redis alone misses "
              "the archived sessions (Redis 6.2 cannot tell it did); give the archive "
              "(PostgreSQL as stud_support), or --redis-only for a ledger never trimmed",
              file=out)
        return 1
    try:
        line = asyncio.run(rebuild(args.redis_url, args.history_dsn))
    except ServiceError as exc:
        print(f"sessions NOT rebuilt ({exc.reason}): {exc}", file=out)
        return 1
    except psycopg.Error as exc:
        print(f"sessions NOT rebuilt (PostgreSQL): {exc}", file=out)
        return 1
    except MalformedLedgerEntry as exc:
        print(f"sessions NOT rebuilt (malformed_ledger): {exc}", file=out)
        return 1
    print(line, file=out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
