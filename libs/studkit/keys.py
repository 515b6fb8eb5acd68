"""Redis key names. Every key of one table carries the table's Cluster hash tag ``{table-id}``
so that a single Lua script may touch all of them; each service owns one key prefix, which is
what the per-service Redis ACL users are scoped to."""

from __future__ import annotations

import functools
import re
from typing import Final

TABLE_PREFIX: Final = "stud:table:"
DEALER_PREFIX: Final = "stud:dealer:"
WALLET_PREFIX: Final = "stud:wallet:"
TOURNAMENT_PREFIX: Final = "stud:tournament:"

_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""Matched with ``fullmatch``: ``$`` (and ``match``) would accept a final newline."""


def check_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a safe identifier for a key, else raise ``ValueError``.

    The whole string must match: no leading or trailing whitespace, not even a newline.

    >>> check_id("alice")
    'alice'
    >>> check_id("alice\\n")
    Traceback (most recent call last):
    ...
    ValueError: id must be 1-64 characters of letters, digits, '_', '.', '-'
    """
    if _ID.fullmatch(value) is None:
        raise ValueError(f"{what} must be 1-64 characters of letters, digits, '_', '.', '-'")
    return value


TABLE_KEYS: Final = ("events", "commands", "version", "owner", "trimmed", "snapshot",
                      "summary", "chain")
"""Every key one table has (all in the table's Cluster slot): the stream, the store's
bookkeeping (command outcomes, version, trimmed count, the chain's head and start), the
lease, a snapshot and a lobby summary. Everything else of a table is an event in its
stream."""

LEGACY_TABLE_KEYS: Final = ("settings", "intents", "settled", "closed")
"""Keys beside the stream that tables written before the room events had; the table service
moves them into the stream when such a table loads, then deletes them."""


def legacy_table_key(table_id: str, name: str) -> str:
    """An old side key of a table (one of :data:`LEGACY_TABLE_KEYS`)."""
    if name not in LEGACY_TABLE_KEYS:
        raise ValueError(f"not a legacy table key: {name!r}")
    return f"{TABLE_PREFIX}{{{check_id(table_id, 'table id')}}}:{name}"


@functools.lru_cache(maxsize=8192)
def table_key(table_id: str, name: str) -> str:
    """The table's key ``name`` (one of :data:`TABLE_KEYS`): ``stud:table:{<id>}:<name>``.
    Kept for the tables in use (every append and read names several; a refusal is not kept).

    >>> table_key("t1", "summary")
    'stud:table:{t1}:summary'
    """
    if name not in TABLE_KEYS:
        raise ValueError(f"not a table key: {name!r}")
    return f"{TABLE_PREFIX}{{{check_id(table_id, 'table id')}}}:{name}"


def table_stream(table_id: str) -> str:
    """The stream of a table's public events."""
    return table_key(table_id, "events")


def table_commands(table_id: str) -> str:
    """Hash: command id -> recorded outcome of that command (idempotency)."""
    return table_key(table_id, "commands")


def table_version(table_id: str) -> str:
    """String: the table's version, i.e. the number of events in its stream."""
    return table_key(table_id, "version")


def table_owner(table_id: str) -> str:
    """Hash: the table's owner replica, its fencing epoch and when its lease expires."""
    return table_key(table_id, "owner")


def table_replicas() -> str:
    """Sorted set: live table-service replicas (member ``id|address``, score = heartbeat
    expiry in ms)."""
    return f"{TABLE_PREFIX}replicas"


def table_index() -> str:
    """Set of table ids that exist (so nothing ever scans keys)."""
    return f"{TABLE_PREFIX}index"


def dealer_key(table_id: str, suffix: str) -> str:
    """A dealer-only key of one table (deck, salt, position, ...)."""
    return f"{DEALER_PREFIX}{{{check_id(table_id, 'table id')}}}:{suffix}"


def tournament_key(tournament_id: str, name: str) -> str:
    """A key of one tournament, in its own Cluster hash tag like a table's:
    ``stud:tournament:{<id>}:<name>`` (its stream and the store's bookkeeping beside it).
    The tournament service's ACL user owns ``stud:tournament:*`` and nothing else.

    >>> tournament_key("mtt-1", "events")
    'stud:tournament:{mtt-1}:events'
    """
    return f"{TOURNAMENT_PREFIX}{{{check_id(tournament_id, 'tournament id')}}}:{name}"


def tournament_owner(tournament_id: str) -> str:
    """Hash: the tournament's owner replica, its fencing epoch and when its lease expires
    (the append script's fence, as a table's :func:`table_owner`).

    >>> tournament_owner("mtt-1")
    'stud:tournament:{mtt-1}:owner'
    """
    return tournament_key(tournament_id, "owner")


def tournament_replicas() -> str:
    """Sorted set: live tournament-service replicas (member ``id|address``, score =
    heartbeat expiry in ms), as :func:`table_replicas` for the tables.

    >>> tournament_replicas()
    'stud:tournament:replicas'
    """
    return f"{TOURNAMENT_PREFIX}replicas"


def tournament_index() -> str:
    """The set of tournament ids with events (the tournament store's index).

    >>> tournament_index()
    'stud:tournament:index'
    """
    return f"{TOURNAMENT_PREFIX}index"


WALLET_TAG: Final = "{wallet}"
"""The wallet's Cluster hash tag: every wallet key carries it, so the wallet's one script
(a transaction touches the ledger, the balances, the idempotency record, seats and each
posting account's statement) runs in one slot. The wallet is one ledger with one balance
projection, so its keys share one master by design (see ``docs/redis.md``)."""


def wallet_key(suffix: str) -> str:
    """A wallet key: ``stud:wallet:{wallet}:<suffix>``.

    >>> wallet_key("ledger")
    'stud:wallet:{wallet}:ledger'
    """
    return f"{WALLET_PREFIX}{WALLET_TAG}:{suffix}"


def legacy_wallet_key(suffix: str) -> str:
    """The name a wallet key had before the hash tag (``stud:wallet:<suffix>``); the wallet
    renames such keys at start (``WalletStore.adopt_legacy_keys``)."""
    return f"{WALLET_PREFIX}{suffix}"
