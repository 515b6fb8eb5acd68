"""Credentials from the environment: the public key set every service verifies with, a
service's own private key, and the issuer's private key (the issuer tool only).

``STUD_AUTH_PUBLIC_KEYS``: the key set (a JWKS, see :mod:`studkit.auth.signing`), inline JSON
or the path of a file. ``STUD_SERVICE_KEY``: a service's Ed25519 private key, inline PEM or
the path of a PEM file. ``STUD_ISSUER_KEY``: the issuer's private key, likewise; only
``python -m studkit.auth`` reads it, never a service. There are no built-in defaults:
``make run`` generates dev keys (``.run/keys``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Final

from studkit.auth.signing import KeySet, SigningKey, read_value, service_signer
from studkit.auth.tokens import Clock, ServiceTokenSource, TokenIssuer, TokenVerifier

PUBLIC_KEYS_ENV: Final = "STUD_AUTH_PUBLIC_KEYS"
SERVICE_KEY_ENV: Final = "STUD_SERVICE_KEY"
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
RETIRED_SECRET_ENV: Final = "STUD_AUTH_SECRET"
"""The shared HS256 secret of old; refused so that nobody believes it still protects."""


def _required(env: Mapping[str, str], name: str, hint: str) -> str:
    if env.get(RETIRED_SECRET_ENV):
        raise RuntimeError(f"{RETIRED_SECRET_ENV} is no longer used: tokens are Ed25519-signed; "
                           f"set {PUBLIC_KEYS_ENV} (see docs/deploy.md)")
    value = env.get(name, "")
    if not value.strip():
        raise RuntimeError(f"{name} is not set ({hint}; see docs/deploy.md)")
    return value


def key_set_from_env(env: Mapping[str, str]) -> KeySet:
    """The public key set named by ``STUD_AUTH_PUBLIC_KEYS``; ``RuntimeError`` when it is
    unset, unreadable or malformed."""
    value = _required(env, PUBLIC_KEYS_ENV, "the public key set, a JSON file or inline JSON")
    try:
        return KeySet.from_json(read_value(value, "{"))
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{PUBLIC_KEYS_ENV}: {exc}") from None


def signing_key_from_env(env: Mapping[str, str], name: str) -> SigningKey:
    """The private key named by env var ``name`` (PEM, inline or a path); ``RuntimeError``
    when unset, unreadable or not an Ed25519 key. The message never holds the key."""
    value = _required(env, name, "an Ed25519 private key, a PEM file or inline PEM")
    try:
        return SigningKey.from_pem(read_value(value, "-----BEGIN"))
    except OSError as exc:
        # Not the value: it could be a mangled key.
        raise RuntimeError(f"{name}: cannot read the key file ({exc.strerror})") from None
    except ValueError as exc:
        raise RuntimeError(f"{name}: {exc}") from None


def verifier_from_env(env: Mapping[str, str], *, audience: str | None = None,
                      clock: Clock = time.time) -> TokenVerifier:
    """A verifier over the key set of ``STUD_AUTH_PUBLIC_KEYS``; a token naming an audience
    must name ``audience`` (the verifying service's name)."""
    return TokenVerifier(key_set_from_env(env), clock=clock, audience=audience)


def service_token_source_from_env(env: Mapping[str, str], service_name: str, *,
                                  clock: Clock = time.time) -> ServiceTokenSource:
    """``service_name``'s credentials from its private key in ``STUD_SERVICE_KEY``."""
    return ServiceTokenSource(signing_key_from_env(env, SERVICE_KEY_ENV), service_name,
                              clock=clock)


def issuer_from_env(env: Mapping[str, str], *, clock: Clock = time.time) -> TokenIssuer:
    """The issuer (player, operator and auditor tokens) from ``STUD_ISSUER_KEY``: for the
    issuer tool, never for a service."""
    return TokenIssuer(signing_key_from_env(env, ISSUER_KEY_ENV), clock)


def service_names(env: Mapping[str, str], name: str, default: str) -> tuple[str, ...]:
    """The comma-separated service names in env var ``name`` (``default`` when unset): the
    services allowed one duty, e.g. ``WALLET_TABLE_SERVICES``. ``ValueError`` when it names
    none or a malformed one.

    >>> service_names({"X": " table, table-b "}, "X", "table")
    ('table', 'table-b')
    """
    names = tuple(n.strip() for n in env.get(name, default).split(",") if n.strip())
    if not names:
        raise ValueError(f"{name} names no service")
    for service in names:
        service_signer(service)
    return names
