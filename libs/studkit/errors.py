"""Exceptions the service shells raise for a refused request; ``grpc_server.ErrorTable`` maps
each class to a gRPC status code in one place, so handlers never pick a status themselves.

Every class carries a machine-readable ``reason`` (a stable snake_case string sent to clients
as trailing metadata ``stud-reason`` and as ``google.rpc.ErrorInfo.reason``) and a readable
``detail``.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Base of the shell's refusals; ``reason`` is stable, ``detail`` is for humans."""

    default_reason: str = "refused"

    def __init__(self, detail: str, *, reason: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reason = reason or self.default_reason


class BadRequest(ServiceError):
    """Raised when a request is malformed: a field is missing, out of range or unparsable.

    Retrying the same request can never succeed (``INVALID_ARGUMENT``)."""

    default_reason = "bad_request"

    def __init__(self, field: str, detail: str, *, reason: str | None = None) -> None:
        super().__init__(f"{field}: {detail}", reason=reason)
        self.field = field


class NotFound(ServiceError):
    """Raised when a request names an entity (account, table, hand) that does not exist."""

    default_reason = "not_found"


class AlreadyExists(ServiceError):
    """Raised when a create names an entity that exists, or an idempotency key is reused for
    a different request."""

    default_reason = "already_exists"


class FailedPrecondition(ServiceError):
    """Raised when a well-formed request is refused by the current state (e.g. a short
    balance); it may succeed once the state changes (``FAILED_PRECONDITION``)."""

    default_reason = "failed_precondition"


class Conflict(ServiceError):
    """Raised when a concurrent writer kept winning after bounded retries (``ABORTED``): the
    client may retry the whole request."""

    default_reason = "conflict"


class ResourceExhausted(ServiceError):
    """Raised when a caller already holds as much of a bounded resource (open streams, ...)
    as it may; the same request may succeed once it lets some go (``RESOURCE_EXHAUSTED``)."""

    default_reason = "resource_exhausted"


class Unavailable(ServiceError):
    """Raised when something the service needs (its store) cannot answer now
    (``UNAVAILABLE``). A write may or may not have been applied: retry it with the same
    idempotency key, which is answered as a replay if it was."""

    default_reason = "unavailable"


class OutOfRange(ServiceError):
    """A position past the end of what exists (a resume point after a table's last event)."""

    default_reason = "out_of_range"
