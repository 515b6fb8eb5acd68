"""Who is calling (a :class:`Principal`) and whether they may: Ed25519-signed bearer tokens.

A token is an EdDSA JWT with a ``kid`` header, carried as ``authorization: Bearer <jwt>``; its
claims are ``sub`` (``"<role>:<name>"``), ``role``, ``iat``, ``exp``, ``iss`` = ``"stud-hilo"``
and optionally ``aud``. Roles: ``player`` (their own seat and account), ``service``
(service-to-service calls, e.g. the table calling the wallet), ``operator`` (deposits,
withdrawals) and ``auditor`` (read-only). Tokens are never logged.

Who signs what: the *issuer* key signs player, operator and auditor tokens, and only the issuer
tool (``python -m studkit.auth``) holds it. Each service has its own key, which signs only
``service:<its name>`` tokens (:class:`ServiceTokenSource`). Services hold the public key set
(``STUD_AUTH_PUBLIC_KEYS``), in which each kid says what it may sign; a token signed by a key
for a subject it may not sign is refused. Nothing in a service can mint an operator's or a
player's token. Modules: :mod:`~studkit.auth.principal`, :mod:`~studkit.auth.signing` (keys,
key set), :mod:`~studkit.auth.tokens`, :mod:`~studkit.auth.config` (environment),
:mod:`studtools.devkeys` holds the generated keys of development and tests (above this
package, so never in a service's image). The issuer's command line is a tool above this
package too, :mod:`studtools.issuer`; ``python -m studkit.auth`` (:mod:`studkit.auth.__main__`)
only runs it.
"""

from studkit.auth.config import (
    ISSUER_KEY_ENV,
    PUBLIC_KEYS_ENV,
    SERVICE_KEY_ENV,
    issuer_from_env,
    key_set_from_env,
    service_names,
    service_token_source_from_env,
    signing_key_from_env,
    verifier_from_env,
)
from studkit.auth.principal import (
    Forbidden,
    Principal,
    Role,
    Unauthorized,
    require_role,
    require_service,
)
from studkit.auth.signing import (
    ISSUER_SIGNER,
    KeySet,
    SigningKey,
    VerifyingKey,
    may_sign,
    service_signer,
)
from studkit.auth.tokens import (
    ALGORITHM,
    BEARER,
    ISSUER,
    METADATA_KEY,
    IssuerSource,
    ServiceTokenSource,
    TokenBook,
    TokenIssuer,
    TokenVerifier,
    bearer_metadata,
)

__all__ = [
    "ALGORITHM",
    "BEARER",
    "ISSUER",
    "ISSUER_KEY_ENV",
    "ISSUER_SIGNER",
    "METADATA_KEY",
    "PUBLIC_KEYS_ENV",
    "SERVICE_KEY_ENV",
    "Forbidden",
    "IssuerSource",
    "KeySet",
    "Principal",
    "Role",
    "ServiceTokenSource",
    "SigningKey",
    "TokenBook",
    "TokenIssuer",
    "TokenVerifier",
    "Unauthorized",
    "VerifyingKey",
    "bearer_metadata",
    "issuer_from_env",
    "key_set_from_env",
    "may_sign",
    "require_role",
    "require_service",
    "service_names",
    "service_signer",
    "service_token_source_from_env",
    "signing_key_from_env",
    "verifier_from_env",
]
