"""Who is calling: a :class:`Principal` (a role and a name), and the two refusals."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum, unique

from studkit.errors import ServiceError


@unique
class Role(StrEnum):
    """What a caller is."""

    PLAYER = "player"
    SERVICE = "service"
    OPERATOR = "operator"
    AUDITOR = "auditor"


class Unauthorized(ServiceError):
    """Raised when a call carries no token, or one that is forged, malformed, expired or
    signed by a key that may not sign for its subject (``UNAUTHENTICATED``)."""

    default_reason = "unauthenticated"


class Forbidden(ServiceError):
    """Raised when an authenticated caller may not do what they ask (``PERMISSION_DENIED``)."""

    default_reason = "permission_denied"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: a role and a name (a player id, a service name, ...)."""

    role: Role
    name: str
    expires_at: float | None = field(default=None, compare=False)
    """When the token that authenticated this caller expires (epoch seconds); None when not
    known. Streams end with ``UNAUTHENTICATED`` at this time."""

    @property
    def subject(self) -> str:
        """The ``sub`` claim: ``"<role>:<name>"``."""
        return f"{self.role.value}:{self.name}"

    def is_player(self, player_id: str) -> bool:
        """True when this is the player ``player_id`` themself."""
        return self.role is Role.PLAYER and self.name == player_id

    def is_service(self, names: Collection[str]) -> bool:
        """True when this is one of the services ``names``."""
        return self.role is Role.SERVICE and self.name in names


def require_role(principal: Principal, *roles: Role) -> None:
    """Raise :class:`Forbidden` unless ``principal`` has one of ``roles``."""
    if principal.role not in roles:
        allowed = ", ".join(r.value for r in roles)
        raise Forbidden(f"role {principal.role.value} may not do this (needs {allowed})")


def require_service(principal: Principal, names: Collection[str],
                    what: str) -> None:
    """Raise :class:`Forbidden` unless ``principal`` is one of the services ``names``
    (``what`` names the duty, e.g. ``"table"``, for the message)."""
    require_role(principal, Role.SERVICE)
    if principal.name not in names:
        raise Forbidden(f"service {principal.name} is not a {what} service")
