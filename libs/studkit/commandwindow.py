"""The idempotency window of table commands (issue 31; docs/history.md, "Expired commands").

A command id of the form ``t<13 digits: Unix ms>-<rest>`` (a *timed* id, what the SDK makes)
says when it was made. The archiver keeps every command record for at least
:data:`COMMAND_WINDOW_S` after its events (it may keep them longer, never shorter), and the
table refuses an id more than :data:`MAX_SKEW_S` ahead of its clock. So a timed id older
than ``COMMAND_WINDOW_S - MAX_SKEW_S`` with no record may have been applied and had its
record archived: the table refuses it ``command_expired`` instead of applying it again.
"""

from __future__ import annotations

import re

#: The least time a command record stays in Redis after its events (seconds).
COMMAND_WINDOW_S = 600
#: How far ahead of the table's clock a timed id may be (clients' clocks drift; seconds).
MAX_SKEW_S = 60

_TIMED = re.compile(r"t(\d{13})-.")


def id_time_ms(command_id: str) -> int | None:
    """The Unix ms a timed command id carries, else None (any other id)."""
    match = _TIMED.match(command_id)
    return int(match.group(1)) if match else None


def timed_id(now_ms: int, rest: str) -> str:
    """A timed command id made at ``now_ms``."""
    return f"t{now_ms:013d}-{rest}"
