"""Typed exceptions for refused calls: a gRPC status code plus the server's machine-readable
reason (trailing metadata ``stud-reason``).

Every failed call surfaces as a :class:`StudError` (or a subclass chosen by reason first, then
by status code), carrying ``code``, ``reason`` and the server's ``message``::

    try:
        await client.check(table_id)
    except NotYourTurn:
        ...
    except StudError as exc:
        print(exc.code, exc.reason, exc.message)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

REASON_KEY: Final = "stud-reason"
DETAILS_KEY: Final = "grpc-status-details-bin"


class StudError(Exception):
    """A call the server refused (or that could not reach it)."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str,
                 metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{code.name} {reason}: {message}" if reason else
                         f"{code.name}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        """The ``google.rpc.ErrorInfo`` metadata (e.g. ``field``; ``owner`` for
        ``not_owner``: the address of the table replica that owns the table)."""


class InvalidArgument(StudError):
    """INVALID_ARGUMENT: a malformed request (or a command id reused for another command)."""


class Unauthenticated(StudError):
    """UNAUTHENTICATED: no token, or one that is forged, malformed or expired."""


class TokenExpired(Unauthenticated):
    """UNAUTHENTICATED with reason ``token_expired``: call again with a fresh token."""


class PermissionDenied(StudError):
    """PERMISSION_DENIED: not your seat, not your account, not an operator."""


class NotFound(StudError):
    """NOT_FOUND: an unknown table or hand."""


class AlreadyExists(StudError):
    """ALREADY_EXISTS: e.g. a table or an account that exists already."""


class FailedPrecondition(StudError):
    """FAILED_PRECONDITION: a move that is illegal now (the reason is the rules' Reason)."""


class NotYourTurn(FailedPrecondition):
    """FAILED_PRECONDITION ``not_your_turn``."""


class Stale(FailedPrecondition):
    """FAILED_PRECONDITION ``stale``: the table moved on since the view you decided on."""


class IllegalAction(FailedPrecondition):
    """FAILED_PRECONDITION: an action that is not legal now (``illegal_action``,
    ``wrong_amount``, ``cap_reached``, ``check_not_allowed``, ``fold_not_allowed``, ...)."""


class InsufficientFunds(FailedPrecondition):
    """FAILED_PRECONDITION ``insufficient_funds``: the wallet balance is short."""


class ResourceExhausted(StudError):
    """RESOURCE_EXHAUSTED: too many streams, or a watcher that fell too far behind."""


class Aborted(StudError):
    """ABORTED: concurrent writers kept winning (retried automatically)."""


class Unavailable(StudError):
    """UNAVAILABLE: the server or its store could not answer (retried automatically)."""


class DeadlineExceeded(StudError):
    """DEADLINE_EXCEEDED: no answer in time (retried automatically for commands)."""


_BY_REASON: Final[dict[str, type[StudError]]] = {
    "token_expired": TokenExpired,
    "not_your_turn": NotYourTurn,
    "stale": Stale,
    "insufficient_funds": InsufficientFunds,
    **{reason: IllegalAction for reason in (
        "illegal_action", "wrong_amount", "cap_reached", "raise_not_reopened",
        "check_not_allowed", "fold_not_allowed", "not_betting", "insufficient_chips")},
}

_BY_CODE: Final[dict[grpc.StatusCode, type[StudError]]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def rpc_reason(error: grpc.aio.AioRpcError) -> str:
    """The ``stud-reason`` trailing metadata of a failed call ('' when absent)."""
    try:
        metadata = error.trailing_metadata()
    except Exception:  # pragma: no cover - a call that never got trailers
        return ""
    for key, value in metadata or ():
        if key == REASON_KEY:
            return value if isinstance(value, str) else bytes(value).decode()
    return ""


def rpc_error_info(error: grpc.aio.AioRpcError) -> tuple[str, dict[str, str]]:
    """(reason, metadata) of the call's ``google.rpc.ErrorInfo``; ('', {}) when absent."""
    try:
        metadata = error.trailing_metadata()
    except Exception:  # pragma: no cover
        return "", {}
    for key, value in metadata or ():
        if key != DETAILS_KEY:
            continue
        try:
            status = status_pb2.Status.FromString(bytes(value))
        except DecodeError:
            return "", {}
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return info.reason, dict(info.metadata)
    return "", {}


def from_rpc_error(error: grpc.aio.AioRpcError) -> StudError:
    """The typed exception for a failed call."""
    info_reason, metadata = rpc_error_info(error)
    return error_for(error.code(), rpc_reason(error) or info_reason, error.details() or "",
                     metadata)


def error_for(code: grpc.StatusCode, reason: str, message: str,
              metadata: Mapping[str, str] | None = None) -> StudError:
    """The typed exception for a refusal: by reason first, then by status code."""
    cls = _BY_REASON.get(reason)
    if cls is None or _code_of(cls) not in (None, code):
        cls = _BY_CODE.get(code, StudError)
    return cls(code, reason, message, metadata)


_STATUS_BY_NUMBER: Final = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """A status code by its number (``PlayReply.code``); UNKNOWN for a number not known."""
    return _STATUS_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def from_play_reply(reply: Any) -> StudError:
    """The typed exception for an action a Play stream refused (a ``PlayReply`` with its
    ``code`` set): the same one its unary call's refusal raises."""
    return error_for(status_code(reply.code), reply.reason, reply.message, reply.metadata)


def _code_of(cls: type[StudError]) -> grpc.StatusCode | None:
    for code, base in _BY_CODE.items():
        if issubclass(cls, base):
            return code
    return None
