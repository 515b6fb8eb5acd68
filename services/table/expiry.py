"""Refusing a command retried after its record may have left Redis (``command_expired``;
issue 31; docs/history.md, "Expired commands").

The archiver trims a table's command records some time after their events (at least the
idempotency window, :mod:`studkit.commandwindow`), so a retry of such a command finds no
record and would be applied again. So a player's command must say how old it is:

- it carries ``expected_sequence``, or a *timed* id (``t<13 digits: Unix ms>-<rest>``, the
  SDK's, or an RFC 9562 UUIDv7); one with neither is refused ``INVALID_ARGUMENT``
  ``command_id_untimed`` at every table, before its record is read (the rule is the same
  before and after a trim);
- a timed id more than ``MAX_SKEW_S`` ahead of the table's clock is refused
  ``INVALID_ARGUMENT`` ``command_id_future`` (any caller's).

A caller's command without a record is refused ``FAILED_PRECONDITION`` ``command_expired``
(it changes nothing) when the table has trimmed events and:

- it carries ``expected_sequence`` at or below the trimmed count (a record that left was
  written at a version at most the trimmed count, and at or after the command's
  ``expected_sequence``); or
- it carries no ``expected_sequence`` and its id is timed and made more than
  ``COMMAND_WINDOW_S - MAX_SKEW_S`` before the table's clock: a record that left was
  written more than ``COMMAND_WINDOW_S`` ago, and no timed id is accepted more than
  ``MAX_SKEW_S`` ahead of the table's clock. An ``expected_sequence`` above the trimmed
  count dates the command better than its id: it is new, however old its id looks (a
  client whose clock is slow).

Only players' commands must be timed: an operator's OpenTable and CloseTable cannot apply
twice (a retry is refused ``table_exists``, or closes a closed table: no event), and the
tournament service's ids are its process manager's, derived from its own log. The money
saga's and the table's own commands do not come through here. Nothing is kept per command:
the check reads the record and, for a command that has none, the trimmed count.
"""

from __future__ import annotations

from studkit.commandwindow import COMMAND_WINDOW_S, MAX_SKEW_S, id_time_ms
from studkit.errors import BadRequest, FailedPrecondition
from studkit.store import AppendResult, EventStore


class CommandExpired(FailedPrecondition):
    """A command retried too late: it may have been applied, its record archived."""

    default_reason = "command_expired"


class CommandIdUntimed(BadRequest):
    """A player's command that cannot say how old it is: neither a timed id nor an
    ``expected_sequence``."""

    def __init__(self, command_id: str) -> None:
        super().__init__("command_id", f"{command_id!r} carries no time and the command no "
                         "expected_sequence: send a timed id, t<Unix ms, 13 digits>-<random> "
                         "(the SDK's) or a UUIDv7 (RFC 9562), so that a retry after the "
                         f"idempotency window ({COMMAND_WINDOW_S} s) is refused rather than "
                         "applied twice", reason="command_id_untimed")


#: The stored ids of the commands that must be timed (:func:`table.app.command_key`).
PLAYERS = "c:player:"


def check_future(command_id: str, now: float) -> int | None:
    """The time of a timed id (None: another id); ``now``: the table's clock (Unix s).
    Refuses a time more than ``MAX_SKEW_S`` ahead of it."""
    at = id_time_ms(command_id)
    now_ms = int(now * 1000)
    if at is not None and at > now_ms + MAX_SKEW_S * 1000:
        raise BadRequest("command_id", f"made at {at} ms, more than {MAX_SKEW_S} s after "
                         f"the table's clock ({now_ms} ms)", reason="command_id_future")
    return at


async def check(store: EventStore, table_id: str, stored_id: str, fp: str,
                expected: int | None, now: float, visible: int) -> AppendResult | None:
    """The recorded outcome of ``stored_id`` (a caller's command id as stored,
    ``c:<role>:<name>:<command id>``) if it has one (the caller answers it, appending
    nothing), else None (a new command); raises :class:`CommandExpired` when its record may
    have left Redis. ``visible``: the room's visible version.

    A command that cannot be expired costs no read: a timed id inside the window, or one
    decided at the room's visible version or later (the trimmed events all lie before the
    hands kept hot, so before ``visible``), or an untimed id without ``expected_sequence``
    (another caller's). The append's script answers a retry of those from its record.
    Raises :class:`CommandIdUntimed` first, reading nothing, for a player's command with
    neither a timed id nor ``expected_sequence``."""
    at = check_future(stored_id.rsplit(":", 1)[-1], now)
    if at is None and expected is None and stored_id.startswith(PLAYERS):
        raise CommandIdUntimed(stored_id.rsplit(":", 1)[-1])
    old = at is not None and at < int((now - COMMAND_WINDOW_S + MAX_SKEW_S) * 1000)
    if not old and (expected is None or expected >= visible):
        return None
    recorded = await store.recorded(table_id, stored_id, fp)
    if recorded is not None:
        return recorded
    trimmed = await store.trimmed(table_id)
    if not trimmed:
        return None  # nothing left this table: no record means never applied
    if expected is not None and expected <= trimmed:
        raise CommandExpired(f"table {table_id}: events 1..{trimmed} are archived with their "
                             f"command records, and this command was decided at {expected}: "
                             "it may have been applied; send a new command")
    if expected is not None:
        return None  # decided above the trimmed events: after any record that left
    if old:
        raise CommandExpired(f"table {table_id}: command id made at {at} ms, more than "
                             f"{COMMAND_WINDOW_S - MAX_SKEW_S} s ago, and no record of it: "
                             "it may have been applied; send a new command")
    return None
