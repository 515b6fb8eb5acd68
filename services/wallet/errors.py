"""The wallet's exception -> status code table: the shared base plus the wallet's own
refusals. Applied in one place, by ``studkit.grpc_server.ErrorMappingInterceptor``."""

from __future__ import annotations

from typing import Final

import grpc

from studkit.grpc_server import BASE_ERRORS, ErrorTable
from wallet.ledger import (
    InsufficientFunds,
    InvalidTransaction,
    PoolUnavailable,
    SeatUnavailable,
    UnknownEntry,
)
from wallet.store import BalanceChanged, BalanceLimit, IdempotencyKeyReused, UnknownAccount

WALLET_ERRORS: Final[ErrorTable] = BASE_ERRORS.extend(
    {
        # Never valid as sent: amount <= 0, unbalanced settlement, wrong rake, bad seat.
        InvalidTransaction: grpc.StatusCode.INVALID_ARGUMENT,
        # Valid, but not now: short balance or escrow, seat held for someone else.
        InsufficientFunds: grpc.StatusCode.FAILED_PRECONDITION,
        SeatUnavailable: grpc.StatusCode.FAILED_PRECONDITION,
        # A tournament pool's record forbids it: entry taken or refunded, other terms.
        PoolUnavailable: grpc.StatusCode.FAILED_PRECONDITION,
        UnknownEntry: grpc.StatusCode.NOT_FOUND,
        BalanceLimit: grpc.StatusCode.FAILED_PRECONDITION,
        UnknownAccount: grpc.StatusCode.NOT_FOUND,
        # Same idempotency key (or hand id), different payload.
        IdempotencyKeyReused: grpc.StatusCode.ALREADY_EXISTS,
        # A cash-out kept racing settlements past the retries.
        BalanceChanged: grpc.StatusCode.ABORTED,
    }
)
