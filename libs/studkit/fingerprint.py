"""One canonical fingerprint of a command, for content-checked idempotency (the event store
records it beside the command id: the same id with another fingerprint is
``command_id_reused``, the same id and fingerprint a retry answered from the log).

A fingerprint must stay the same across deploys for the same command, or every retry in
flight during a deploy is refused. So it is taken over a canonical encoding whose bytes do
not change when a field with a default is added:

- the table's, over a request's protobuf bytes (``SerializeToString(deterministic=True)``,
  where proto3 leaves out every field at its default);
- the tournament's, over its command dataclass as canonical JSON (:func:`canonical`) that
  leaves out every field at its default, nested ones included, the same rule as proto3's.

Both are :func:`fingerprint` of the parts: SHA-256 over each part followed by a NUL, the
first 32 hex digits.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import MISSING, fields, is_dataclass
from typing import Any


def fingerprint(*parts: object) -> str:
    """A command's content hash: each part (bytes as they are, anything else as its ``str``)
    then a NUL, SHA-256, 32 hex digits.

    >>> fingerprint("SitDown", b"\\x08\\x01") == fingerprint("SitDown", b"\\x08\\x01")
    True
    >>> fingerprint("a", "b") != fingerprint("ab")
    True
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in fields(value):
            item = getattr(value, f.name)
            if item is not MISSING and item == _default(f):
                continue  # at its default: left out, as proto3 leaves it out
            out[f.name] = _plain(item)
        return out
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    return value


def canonical(value: Any) -> bytes:
    """A dataclass (a command) as canonical JSON: its type's name and every field that is
    not at its default, nested dataclasses the same way, keys sorted, no spaces. A field
    added later with a default leaves the bytes of every command that does not set it as
    they were.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Register:
    ...     player_id: str
    ...     note: str = ""
    >>> canonical(Register("ann"))
    b'{"player_id":"ann","type":"Register"}'
    """
    body = _plain(value)
    if not isinstance(body, dict):
        raise TypeError(f"not a dataclass instance: {type(value).__name__}")
    body["type"] = type(value).__name__
    return json.dumps(body, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False).encode()


def of_command(value: Any) -> str:
    """:func:`fingerprint` of a command dataclass's :func:`canonical` bytes."""
    return fingerprint(type(value).__name__, canonical(value))
