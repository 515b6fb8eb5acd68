"""Signed bearer tokens: who is calling (a :class:`Principal`) and whether they may.

A token is an HS256 JWT carried in gRPC metadata as ``authorization: Bearer <jwt>`` with the
claims ``sub`` (``"<role>:<name>"``), ``role``, ``iat``, ``exp`` and ``iss`` = ``"stud-hilo"``.
Roles: ``player`` (acts for their own seat and account), ``service`` (service-to-service
calls, e.g. the table calling the wallet), ``operator`` (deposits, withdrawals) and ``auditor``
(read-only). Tokens are never logged.

Mint one for a local run::

    STUD_ENV=dev python -m studkit.auth player alice --ttl 3600
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum, unique
from typing import Any, Final

import jwt

from studkit.errors import ServiceError
from studkit.keys import check_id

ISSUER: Final = "stud-hilo"
ALGORITHM: Final = "HS256"
SECRET_ENV: Final = "STUD_AUTH_SECRET"
ENV_NAME_ENV: Final = "STUD_ENV"
MIN_SECRET_BYTES: Final = 32
DEV_INSECURE_SECRET: Final = "dev-only-INSECURE-stud-hilo-secret-never-use-in-prod"
"""Used only when ``STUD_ENV=dev`` and no ``STUD_AUTH_SECRET`` is set."""

METADATA_KEY: Final = "authorization"
BEARER: Final = "Bearer "

Clock = Callable[[], float]


@unique
class Role(StrEnum):
    """What a caller is."""

    PLAYER = "player"
    SERVICE = "service"
    OPERATOR = "operator"
    AUDITOR = "auditor"


class Unauthorized(ServiceError):
    """Raised when a call carries no token, or one that is forged, malformed or expired
    (``UNAUTHENTICATED``)."""

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


def require_role(principal: Principal, *roles: Role) -> None:
    """Raise :class:`Forbidden` unless ``principal`` has one of ``roles``."""
    if principal.role not in roles:
        allowed = ", ".join(r.value for r in roles)
        raise Forbidden(f"role {principal.role.value} may not do this (needs {allowed})")


def _check_secret(secret: str) -> bytes:
    key = secret.encode()
    if len(key) < MIN_SECRET_BYTES:
        raise ValueError(f"the auth secret must be at least {MIN_SECRET_BYTES} bytes")
    return key


def secret_from_env(env: Mapping[str, str]) -> str:
    """The signing secret from ``STUD_AUTH_SECRET``; the insecure dev default only when
    ``STUD_ENV=dev``. Raises ``RuntimeError`` otherwise."""
    secret = env.get(SECRET_ENV, "")
    if secret:
        _check_secret(secret)
        return secret
    if env.get(ENV_NAME_ENV) == "dev":
        return DEV_INSECURE_SECRET
    raise RuntimeError(f"{SECRET_ENV} is not set (set {ENV_NAME_ENV}=dev for the dev default)")


class TokenIssuer:
    """Mints tokens signed with a shared secret."""

    def __init__(self, secret: str, clock: Clock = time.time) -> None:
        self._key = _check_secret(secret)
        self._clock = clock

    def issue(self, principal: Principal, ttl_seconds: int = 3600) -> str:
        """A token for ``principal`` valid for ``ttl_seconds`` from now."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        check_id(principal.name, "principal name")
        now = int(self._clock())
        claims = {
            "sub": principal.subject,
            "role": principal.role.value,
            "iat": now,
            "exp": now + ttl_seconds,
            "iss": ISSUER,
        }
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)


class TokenVerifier:
    """Checks tokens: signature (HS256 only), issuer, expiry against an injectable clock."""

    def __init__(self, secret: str, clock: Clock = time.time, leeway_seconds: int = 5) -> None:
        self._key = _check_secret(secret)
        self._clock = clock
        self._leeway = leeway_seconds

    def verify(self, token: str) -> Principal:
        """The principal of a valid token; raises :class:`Unauthorized` otherwise. The
        message never includes the token."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                issuer=ISSUER,
                # Expiry is checked below against the injectable clock.
                options={
                    "require": ["sub", "role", "iat", "exp", "iss"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"invalid token ({type(exc).__name__})") from None
        now = self._clock()
        exp, iat = claims["exp"], claims["iat"]
        if not isinstance(exp, int) or not isinstance(iat, int):
            raise Unauthorized("invalid token (exp and iat must be integers)")
        if exp + self._leeway <= now:
            raise Unauthorized("token expired", reason="token_expired")
        if iat - self._leeway > now:
            raise Unauthorized("token issued in the future")
        try:
            role = Role(claims["role"])
        except ValueError:
            raise Unauthorized("invalid token (unknown role)") from None
        sub = claims["sub"]
        prefix = f"{role.value}:"
        if not isinstance(sub, str) or not sub.startswith(prefix):
            raise Unauthorized("invalid token (sub does not match role)")
        name = sub[len(prefix) :]
        try:
            check_id(name, "principal name")
        except ValueError:
            raise Unauthorized("invalid token (malformed subject)") from None
        return Principal(role=role, name=name, expires_at=float(exp))

    def verify_metadata(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> Principal:
        """The principal of the ``authorization: Bearer`` entry of gRPC metadata."""
        values = [v for k, v in (metadata or ()) if k.lower() == METADATA_KEY]
        if not values:
            raise Unauthorized("missing authorization metadata", reason="missing_token")
        if len(values) > 1:
            raise Unauthorized("more than one authorization entry")
        value = values[0]
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        if not value.startswith(BEARER):
            raise Unauthorized("authorization is not a Bearer token")
        return self.verify(value[len(BEARER) :].strip())


def bearer_metadata(token: str) -> tuple[tuple[str, str]]:
    """gRPC call metadata carrying ``token``."""
    return ((METADATA_KEY, f"{BEARER}{token}"),)


class TokenBook:
    """Tokens for any principal, minted once each: the credentials of test clients, tools
    and bots that call as several principals."""

    def __init__(self, issuer: TokenIssuer) -> None:
        self.issuer = issuer
        self._tokens: dict[Principal, str] = {}

    def metadata(self, who: Principal) -> tuple[tuple[str, str]]:
        """Call metadata carrying a token for ``who``."""
        if who not in self._tokens:
            self._tokens[who] = self.issuer.issue(who)
        return bearer_metadata(self._tokens[who])


def mint_token(role: Role | str, name: str, secret: str, ttl_seconds: int = 3600) -> str:
    """Convenience: a token for ``role:name`` (local runs, tests, bots)."""
    principal = Principal(role=Role(role), name=name)
    return TokenIssuer(secret).issue(principal, ttl_seconds)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m studkit.auth ROLE NAME [--ttl N]``: print a token signed with the secret
    from ``STUD_AUTH_SECRET`` (or the dev default when ``STUD_ENV=dev``)."""
    parser = argparse.ArgumentParser(prog="python -m studkit.auth", description=main.__doc__)
    parser.add_argument("role", choices=[r.value for r in Role])
    parser.add_argument("name")
    parser.add_argument("--ttl", type=int, default=3600, help="seconds (default 3600)")
    args = parser.parse_args(argv)
    try:
        secret = secret_from_env(os.environ)
        token = mint_token(args.role, args.name, secret, args.ttl)
    except (RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
