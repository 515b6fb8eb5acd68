"""studclient: an async, typed Python client for the Seven Card Stud Hi/Lo room.

>>> from studclient import Client, StudError
>>> Client.__name__, StudError.__name__
('Client', 'StudError')

See docs/sdk.md and ``examples/random_bot.py``.
"""

from studclient.client import AUTO, RETRIED_CODES, Client, RetryPolicy, TokenProvider, token_subject
from studclient.errors import (
    Aborted,
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    IllegalAction,
    InsufficientFunds,
    InvalidArgument,
    NotFound,
    NotYourTurn,
    PermissionDenied,
    ResourceExhausted,
    Stale,
    StudError,
    TokenExpired,
    Unauthenticated,
    Unavailable,
)
from studclient.play import PlaySession
from studclient.tournament import Seat, SeatTracker, TournamentClient, TournamentUpdate
from studclient.views import hand_over, legal_actions, my_cards, my_turn
from studclient.watch import TableWatch, merge_cards

__all__ = [
    "AUTO", "RETRIED_CODES", "Aborted", "AlreadyExists", "Client", "DeadlineExceeded",
    "FailedPrecondition", "IllegalAction", "InsufficientFunds", "InvalidArgument", "NotFound",
    "NotYourTurn", "PermissionDenied", "PlaySession", "ResourceExhausted", "RetryPolicy", "Seat",
    "SeatTracker", "Stale", "StudError", "TableWatch", "TokenExpired", "TokenProvider",
    "TournamentClient", "TournamentUpdate", "Unauthenticated", "Unavailable", "hand_over",
    "legal_actions", "merge_cards", "my_cards", "my_turn", "token_subject",
]
