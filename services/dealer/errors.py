"""The dealer's exception -> status code table: the shared base plus the dealer's own
refusals. Applied in one place, by ``studkit.grpc_server.ErrorMappingInterceptor``; the
specific ``FailedPrecondition`` subclasses (wrong deal, not at showdown, seat not in the hand,
hand not over) map through their base and keep their own reasons."""

from __future__ import annotations

from typing import Final

import grpc

from studkit.deckproof import DeckInconsistent
from studkit.grpc_server import BASE_ERRORS, ErrorTable

DEALER_ERRORS: Final[ErrorTable] = BASE_ERRORS.extend(
    {
        # Stored draws that do not follow from the stored deck: refuse to deal from it.
        DeckInconsistent: grpc.StatusCode.DATA_LOSS,
    }
)
