"""The wallet's Redis key layout (all under ``stud:wallet:{wallet}:``, the wallet user's ACL
prefix and the wallet's one Cluster hash tag, so ``apply.lua`` runs in one slot).

The ledger stream ``ledger`` (one entry per transaction, the truth); ``balances`` (a
projection: account -> balance); ``idempotency`` (scope -> fingerprint and outcome);
``accounts`` (player id -> created ms); ``seats:<table>`` (seat -> player it is held for);
``last_hand`` (table -> last settled hand); ``pool:<tournament>`` (a tournament pool's entries
and prizes, see ``apply.lua``); ``postings:<account>`` (one stream per account: its
statement); player protection's ``protection`` (the projection of each player's stream
``protection:<player>``), ``usage:<player>`` and ``sessions``. Every projection can be rebuilt
from the ledger (``ledger.replay``, ``pools.replay_pool``, ``protection.replay_sessions``).
"""

from __future__ import annotations

from typing import Final

from studkit.keys import wallet_key
from wallet.model import AccountId

LEDGER: Final = wallet_key("ledger")
BALANCES: Final = wallet_key("balances")
IDEMPOTENCY: Final = wallet_key("idempotency")
ACCOUNTS: Final = wallet_key("accounts")
LAST_HAND: Final = wallet_key("last_hand")
NO_TABLE_SEATS: Final = wallet_key("seats")
"""Stands in for KEYS[5] when a transaction touches no table (never written)."""
NO_POOL: Final = wallet_key("pool")
"""Stands in for KEYS[7] when a transaction touches no tournament pool (never written)."""
PROTECTION: Final = wallet_key("protection")
"""Player id -> the JSON ``apply.lua`` checks money moves against (``protection.projection``)."""
NO_USAGE: Final = wallet_key("usage")
"""Stands in for KEYS[9] when a transaction has no protection rule (never written)."""
SESSIONS: Final = wallet_key("sessions")
"""Player id -> their session, ``<started_ms>:<last_ms>`` (protection.Session): KEYS[10], a
projection of the ledger written only by ``apply.lua``, with the buy-in or the settlement that
sees the player (the ledger entry's ``seen`` at its ``at_ms``); rebuilt by
:meth:`WalletStore.rebuild_sessions` (``protection.replay_sessions``)."""


def usage_key(player_id: str) -> str:
    """List of one player's recent money moves as the limits count them, newest first."""
    return wallet_key(f"usage:{player_id}")


def seats_key(table_id: str) -> str:
    """Hash of one table's seat holders."""
    return wallet_key(f"seats:{table_id}")


def pool_key(tournament_id: str) -> str:
    """Hash of one tournament pool's entries and prizes."""
    return wallet_key(f"pool:{tournament_id}")


def postings_key(account: AccountId) -> str:
    """Stream of one account's postings (its statement)."""
    return wallet_key(f"postings:{account.key}")


LEGACY_FIXED: Final = ("accounts", "ledger", "balances", "idempotency", "last_hand")
"""The wallet's keys with fixed names, accounts and ledger first (the adopt script's order)."""
