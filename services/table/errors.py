"""The table's exception -> status code table: the shared base plus the table's own refusals.
Applied in one place, by ``studkit.grpc_server.ErrorMappingInterceptor``."""

from __future__ import annotations

from typing import Final

import grpc

from studkit.grpc_server import BASE_ERRORS, ErrorTable
from studkit.store import CommandIdReused, NotOwner
from table.clients import Unreachable
from table.inbox import WatcherTooSlow

TABLE_ERRORS: Final[ErrorTable] = BASE_ERRORS.extend(
    {
        CommandIdReused: grpc.StatusCode.INVALID_ARGUMENT,
        WatcherTooSlow: grpc.StatusCode.RESOURCE_EXHAUSTED,
        # Another replica owns the table: ErrorInfo metadata `owner` says where to go.
        NotOwner: grpc.StatusCode.FAILED_PRECONDITION,
        # The dealer or the wallet stayed unreachable: retry with the same command id.
        Unreachable: grpc.StatusCode.UNAVAILABLE,
    }
)
