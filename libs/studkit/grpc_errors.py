"""The services' exception -> status code table, and what a client receives for a refusal: a
status code, a readable message, trailing metadata ``stud-reason`` and a
``google.rpc.ErrorInfo`` (``grpc-status-details-bin``); plus the client-side readers of both.
:class:`studkit.grpc_server.ErrorMappingInterceptor` applies the table, in one place."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, TypeAlias

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from rules.errors import RuleViolation
from studkit.auth import Forbidden, Unauthorized
from studkit.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    FailedPrecondition,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    Unavailable,
)
from studkit.store import STORE_UNAVAILABLE_ERRORS

REASON_KEY: Final = "stud-reason"
DETAILS_KEY: Final = "grpc-status-details-bin"
ERROR_DOMAIN: Final = "stud-hilo"
INTERNAL_MESSAGE: Final = "internal error"


@dataclass(frozen=True, slots=True)
class MappedError:
    """What the client receives for an exception."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def reason_of(exc: BaseException) -> str:
    """The machine-readable reason of an exception: its ``reason`` attribute (an enum's
    value, or a string), else the snake_case class name."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, Enum):
        return str(reason.value)
    if isinstance(reason, str) and reason:
        return reason
    return _snake(type(exc).__name__)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A status code with a fixed reason and message, for exceptions that are not ours (a
    driver's): their class name is no stable reason and their text may name hosts."""

    code: grpc.StatusCode
    reason: str
    message: str


ErrorEntry: TypeAlias = grpc.StatusCode | Refusal
"""What an :class:`ErrorTable` maps an exception class to."""


class ErrorTable:
    """Exception class -> status code (or :class:`Refusal`). The most specific class in an
    exception's MRO wins; anything unlisted is ``INTERNAL``. Services extend
    :data:`BASE_ERRORS` in their ``errors.py``."""

    def __init__(self, codes: Mapping[type[BaseException], ErrorEntry]) -> None:
        self._codes: dict[type[BaseException], ErrorEntry] = dict(codes)

    def extend(self, codes: Mapping[type[BaseException], ErrorEntry]) -> ErrorTable:
        """A new table with ``codes`` added (or overriding)."""
        return ErrorTable({**self._codes, **codes})

    def _entry(self, exc: BaseException) -> ErrorEntry | None:
        for cls in type(exc).__mro__:
            if cls in self._codes:
                return self._codes[cls]
        return None

    def code_for(self, exc: BaseException) -> grpc.StatusCode | None:
        """The status code of ``exc``, or None when unmapped."""
        entry = self._entry(exc)
        return entry.code if isinstance(entry, Refusal) else entry

    def map(self, exc: BaseException) -> MappedError:
        """How ``exc`` is reported to the client."""
        entry = self._entry(exc)
        if entry is None:
            return MappedError(grpc.StatusCode.INTERNAL, "internal", INTERNAL_MESSAGE)
        if isinstance(entry, Refusal):
            return MappedError(entry.code, entry.reason, entry.message)
        code = entry
        field_name = getattr(exc, "field", None)
        metadata = {"field": field_name} if isinstance(field_name, str) and field_name else {}
        extra = getattr(exc, "error_metadata", None)  # e.g. the owner of a table: where to go
        if isinstance(extra, dict):
            metadata.update({str(k): str(v) for k, v in extra.items()})
        return MappedError(code, reason_of(exc), str(exc) or reason_of(exc), metadata)


STORE_UNAVAILABLE: Final = Refusal(
    grpc.StatusCode.UNAVAILABLE,
    "store_unavailable",
    "the store is unavailable; retry with the same idempotency key",
)
"""Redis down, unreachable, timing out, loading or out of connections. A write may or may
not have been applied; its retry with the same key is answered as a replay if it was."""

BASE_ERRORS: Final = ErrorTable(
    {
        BadRequest: grpc.StatusCode.INVALID_ARGUMENT,
        RuleViolation: grpc.StatusCode.FAILED_PRECONDITION,
        FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
        Unauthorized: grpc.StatusCode.UNAUTHENTICATED,
        Forbidden: grpc.StatusCode.PERMISSION_DENIED,
        NotFound: grpc.StatusCode.NOT_FOUND,
        OutOfRange: grpc.StatusCode.OUT_OF_RANGE,
        AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
        Conflict: grpc.StatusCode.ABORTED,
        ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
        Unavailable: grpc.StatusCode.UNAVAILABLE,
        **{error: STORE_UNAVAILABLE for error in STORE_UNAVAILABLE_ERRORS},
    }
)
"""The shared part of every service's table; a service adds its own in ``errors.py``."""


def trailing_metadata(error: MappedError) -> tuple[tuple[str, str | bytes], ...]:
    """``stud-reason`` plus a serialized ``google.rpc.Status`` with an ``ErrorInfo``."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=dict(error.metadata)
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(
        code=error.code.value[0], message=error.message, details=[detail]
    )
    return ((REASON_KEY, error.reason), (DETAILS_KEY, status.SerializeToString()))


def rpc_error_reason(error: grpc.aio.AioRpcError | grpc.RpcError) -> str | None:
    """Client side: the ``stud-reason`` of a failed call, or None."""
    metadata = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in metadata or ():
        if key == REASON_KEY:
            return value if isinstance(value, str) else bytes(value).decode()
    return None


def rpc_error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """Client side: the ``google.rpc.ErrorInfo`` of a failed call, or None."""
    for key, value in error.trailing_metadata() or ():
        if key == DETAILS_KEY:
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None
