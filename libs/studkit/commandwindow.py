"""The idempotency window of table commands (issue 31; docs/history.md, "Expired commands").

A *timed* command id says when it was made, in one of two forms:

- ``t<13 digits: Unix ms>-<rest>`` (what the SDK makes, :func:`timed_id`);
- an RFC 9562 UUIDv7 in its text form (``0190b6c2-5f4e-7abc-9def-0123456789ab``, either
  case), whose first 48 bits are its Unix ms.

The archiver keeps every command record for at least :data:`COMMAND_WINDOW_S` after its
events (it may keep them longer, never shorter), and the table refuses an id more than
:data:`MAX_SKEW_S` ahead of its clock. So a timed id older than
``COMMAND_WINDOW_S - MAX_SKEW_S`` with no record may have been applied and had its record
archived: the table refuses it ``command_expired`` instead of applying it again.
"""

from __future__ import annotations

import os
import re
import time
import uuid

#: The least time a command record stays in Redis after its events (seconds).
COMMAND_WINDOW_S = 600
#: How far ahead of the table's clock a timed id may be (clients' clocks drift; seconds).
MAX_SKEW_S = 60

_TIMED = re.compile(r"t([0-9]{13})-.")  # ASCII digits only: \d matches any Unicode digit
# RFC 9562: 48 bits of Unix ms, the version nibble 7, 12 bits, the variant 10xx, 62 bits.
_UUID7 = re.compile(r"([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                    re.IGNORECASE)


def id_time_ms(command_id: str) -> int | None:
    """The Unix ms a timed command id carries (``t<ms>-...`` or a UUIDv7), else None.

    >>> id_time_ms("t1764979200000-a1"), id_time_ms("019af0f5-5000-7abc-9def-0123456789ab")
    (1764979200000, 1764979200000)
    >>> id_time_ms("9b2f1c3e-4d5a-4e6f-8a7b-0c1d2e3f4a5b") is None  # a UUIDv4
    True
    """
    match = _TIMED.match(command_id)
    if match:
        return int(match.group(1))
    match = _UUID7.fullmatch(command_id)
    return int(match.group(1) + match.group(2), 16) if match else None


def timed_id(now_ms: int, rest: str) -> str:
    """A timed command id made at ``now_ms``."""
    return f"t{now_ms:013d}-{rest}"


def new_id(label: str = "") -> str:
    """A timed command id made now: ``t<Unix ms>-<label>``, or ``t<Unix ms>-<20 hex>`` with no
    label (the SDK's, :func:`studclient.client.new_command_id`). A label keeps the id
    readable in a test's log; it must keep it unique among its caller's ids at the table."""
    return timed_id(int(time.time() * 1000), label or uuid.uuid4().hex[:20])


def uuid7(ms: int) -> str:
    """An RFC 9562 UUIDv7 made at Unix ``ms`` (48 bits), in its text form; the rest random.
    (Python 3.11 has no ``uuid.uuid7``.)"""
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = 0x70 | (raw[6] & 0x0F)  # the version, 7
    raw[8] = 0x80 | (raw[8] & 0x3F)  # the variant, 10xx
    return str(uuid.UUID(bytes=bytes(raw)))
