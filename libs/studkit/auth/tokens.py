"""Signed bearer tokens: minting (:class:`TokenIssuer`, :class:`ServiceTokenSource`,
:class:`TokenBook`) and checking (:class:`TokenVerifier`).

A token is an EdDSA (Ed25519) JWT with a ``kid`` header, carried in gRPC metadata as
``authorization: Bearer <jwt>``, with the claims ``sub`` (``"<role>:<name>"``), ``role``,
``iat``, ``exp``, ``iss`` = ``"stud-hilo"`` and optionally ``aud`` (the service it is for).
The verifier accepts a token only when its kid is in the key set and that key may sign for
the token's subject (see :mod:`studkit.auth.signing`). Tokens are never logged.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import jwt

from studkit.auth.principal import Principal, Role, Unauthorized
from studkit.auth.signing import KeySet, SigningKey, may_sign, service_signer
from studkit.keys import check_id

ISSUER: Final = "stud-hilo"
ALGORITHM: Final = "EdDSA"
METADATA_KEY: Final = "authorization"
BEARER: Final = "Bearer "
MAX_TOKEN_CHARS: Final = 4096
"""A longer bearer value is refused before it is decoded (the project's tokens are a few
hundred characters)."""
SERVICE_TOKEN_TTL_S: Final = 300
SERVICE_TOKEN_RENEW_S: Final = 60
"""A service token is re-minted when it has less than this left."""

Clock = Callable[[], float]
Metadata = tuple[tuple[str, str]]


def bearer_metadata(token: str) -> Metadata:
    """gRPC call metadata carrying ``token``."""
    return ((METADATA_KEY, f"{BEARER}{token}"),)


class TokenIssuer:
    """Mints tokens signed with one private key. Which subjects the key may sign for is the
    verifier's business: an issuer key signs players, operators and auditors, a service key
    only its own service."""

    def __init__(self, key: SigningKey, clock: Clock = time.time) -> None:
        self._key = key
        self._clock = clock

    @property
    def kid(self) -> str:
        return self._key.kid

    def issue(self, principal: Principal, ttl_seconds: int = 3600,
              audience: str | None = None) -> str:
        """A token for ``principal`` valid for ``ttl_seconds`` from now, for ``audience``
        alone when given."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        check_id(principal.name, "principal name")
        now = int(self._clock())
        claims: dict[str, Any] = {
            "sub": principal.subject,
            "role": principal.role.value,
            "iat": now,
            "exp": now + ttl_seconds,
            "iss": ISSUER,
        }
        if audience is not None:
            claims["aud"] = audience
        return jwt.encode(claims, self._key.private_key, algorithm=ALGORITHM,
                          headers={"kid": self._key.kid})

    def issuer_for(self, principal: Principal) -> TokenIssuer:
        """This issuer, for everyone (see :class:`TokenBook`)."""
        return self


class _NotYet(Unauthorized):
    """A refusal that may not hold later (a token issued in the future): never cached."""


class TokenVerifier:
    """Checks tokens: an EdDSA signature by a key of the key set that may sign for the
    subject, the issuer, the audience (when the token names one, it must be ours) and expiry
    against an injectable clock."""

    CACHE_SIZE = 4096
    """Tokens whose signature was checked, kept until they expire (least recently used go
    first): a caller's repeated token costs a dictionary lookup, not a signature check."""
    REFUSED_CACHE_SIZE = 4096
    """Tokens refused for good (forged, malformed, expired, foreign), least recently used
    going first: the same bad token sent again costs a dictionary lookup, not a decode and a
    signature check. A token refused only for now (issued in the future) is not kept."""

    def __init__(self, keys: KeySet, clock: Clock = time.time, leeway_seconds: int = 5,
                 audience: str | None = None) -> None:
        self._keys = keys
        self._clock = clock
        self._leeway = leeway_seconds
        self._audience = audience
        # Both caches are keyed by a keyed hash of the token, never the token itself: no
        # bearer secret sits in them, and a lookup compares digests an outsider cannot aim
        # at (the key is this process's own).
        self._cache_key = secrets.token_bytes(32)
        self._verified: OrderedDict[bytes, Principal] = OrderedDict()
        self._refused: OrderedDict[bytes, tuple[str, str]] = OrderedDict()

    @property
    def keys(self) -> KeySet:
        return self._keys

    def _digest(self, token: str) -> bytes:
        return hashlib.blake2b(token.encode("utf-8", "replace"), digest_size=16,
                               key=self._cache_key).digest()

    def verify(self, token: str) -> Principal:
        """The principal of a valid token; raises :class:`Unauthorized` otherwise. The
        message never includes the token. A token verified before is looked up (the same
        bytes carry the same signature), its expiry checked again against the clock; a token
        refused before is refused again from the cache; a token longer than
        :data:`MAX_TOKEN_CHARS` is refused before anything is decoded."""
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized(f"invalid token (longer than {MAX_TOKEN_CHARS} characters)")
        digest = self._digest(token)
        known = self._verified.get(digest)
        if known is not None:
            assert known.expires_at is not None
            if known.expires_at + self._leeway <= self._clock():
                del self._verified[digest]
                self._remember_refusal(digest, "token expired", "token_expired")
                raise Unauthorized("token expired", reason="token_expired")
            self._verified.move_to_end(digest)
            return known
        refused = self._refused.get(digest)
        if refused is not None:
            self._refused.move_to_end(digest)
            raise Unauthorized(refused[0], reason=refused[1])
        try:
            principal = self._verify(token)
        except _NotYet:
            raise
        except Unauthorized as exc:
            self._remember_refusal(digest, exc.detail, exc.reason)
            raise
        self._verified[digest] = principal
        if len(self._verified) > self.CACHE_SIZE:
            self._verified.popitem(last=False)
        return principal

    def _remember_refusal(self, digest: bytes, detail: str, reason: str) -> None:
        self._refused[digest] = (detail, reason)
        if len(self._refused) > self.REFUSED_CACHE_SIZE:
            self._refused.popitem(last=False)

    def _verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"invalid token ({type(exc).__name__})") from None
        if header.get("alg") != ALGORITHM:
            raise Unauthorized(f"invalid token (algorithm must be {ALGORITHM})")
        kid = header.get("kid")
        entry = self._keys.get(kid) if isinstance(kid, str) else None
        if entry is None:
            raise Unauthorized("invalid token (unknown key id)")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                entry.public_key,
                algorithms=[ALGORITHM],
                issuer=ISSUER,
                # Expiry and audience are checked below (the clock is injectable).
                options={
                    "require": ["sub", "role", "iat", "exp", "iss"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                    "verify_aud": False,
                },
            )
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"invalid token ({type(exc).__name__})") from None
        self._check_audience(claims.get("aud"))
        now = self._clock()
        exp, iat = claims["exp"], claims["iat"]
        if type(exp) is not int or type(iat) is not int:
            raise Unauthorized("invalid token (exp and iat must be integers)")
        if exp + self._leeway <= now:
            raise Unauthorized("token expired", reason="token_expired")
        if iat - self._leeway > now:
            raise _NotYet("token issued in the future")
        try:
            role = Role(claims["role"])
        except ValueError:
            raise Unauthorized("invalid token (unknown role)") from None
        sub = claims["sub"]
        prefix = f"{role.value}:"
        if not isinstance(sub, str) or not sub.startswith(prefix):
            raise Unauthorized("invalid token (sub does not match role)")
        name = sub[len(prefix):]
        try:
            check_id(name, "principal name")
        except ValueError:
            raise Unauthorized("invalid token (malformed subject)") from None
        if not may_sign(entry.signer, role, name):
            raise Unauthorized(f"invalid token (a key of {entry.signer} may not sign for "
                               f"role {role.value})")
        return Principal(role=role, name=name, expires_at=float(exp))

    def _check_audience(self, aud: object) -> None:
        if aud is None:
            return
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise Unauthorized("invalid token (malformed aud)")
        if self._audience is None or self._audience not in audiences:
            raise Unauthorized("invalid token (issued for another service)")

    def verify_metadata(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> Principal:
        """The principal of the ``authorization: Bearer`` entry of gRPC metadata."""
        return self.verify(_bearer(metadata))

    def known(self, metadata: Sequence[tuple[str, str | bytes]] | None) -> Principal | None:
        """The principal of the metadata's token if it was verified before and has not
        expired, from the cache alone (nothing decoded, nothing raised); None otherwise (a
        token not seen yet, refused, expired, or no token): then :meth:`verify_metadata`
        decides."""
        try:
            token = _bearer(metadata)
        except Unauthorized:
            return None
        if len(token) > MAX_TOKEN_CHARS:
            return None
        digest = self._digest(token)
        known = self._verified.get(digest)
        if known is None or known.expires_at is None \
                or known.expires_at + self._leeway <= self._clock():
            return None
        self._verified.move_to_end(digest)
        return known


def _bearer(metadata: Sequence[tuple[str, str | bytes]] | None) -> str:
    """The token of the ``authorization: Bearer`` entry of gRPC metadata."""
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
    return value[len(BEARER):].strip()


class ServiceTokenSource:
    """A service's own credentials for calling other services: short-lived tokens for
    ``service:<name>``, signed with that service's key and re-minted before they expire."""

    def __init__(self, key: SigningKey, service_name: str, *,
                 ttl_seconds: int = SERVICE_TOKEN_TTL_S,
                 renew_before_seconds: int = SERVICE_TOKEN_RENEW_S,
                 clock: Clock = time.time) -> None:
        if not 0 <= renew_before_seconds < ttl_seconds:
            raise ValueError("renew_before_seconds must be below ttl_seconds")
        service_signer(service_name)  # a valid name
        self.principal = Principal(Role.SERVICE, service_name)
        self._issuer = TokenIssuer(key, clock)
        self._ttl = ttl_seconds
        self._renew = renew_before_seconds
        self._clock = clock
        self._tokens: dict[str | None, tuple[str, float]] = {}

    def __repr__(self) -> str:
        return f"ServiceTokenSource({self.principal.subject}, kid={self._issuer.kid})"

    def token(self, audience: str | None = None) -> str:
        """A token for this service (for ``audience`` alone when given), fresh enough."""
        cached = self._tokens.get(audience)
        if cached is not None and self._clock() < cached[1] - self._renew:
            return cached[0]
        expires = int(self._clock()) + self._ttl
        token = self._issuer.issue(self.principal, self._ttl, audience)
        self._tokens[audience] = (token, float(expires))
        return token

    def metadata(self, audience: str | None = None) -> Metadata:
        """Call metadata carrying :meth:`token`. Pass the callee's name as ``audience`` so
        that the callee cannot replay the token elsewhere."""
        return bearer_metadata(self.token(audience))


class IssuerSource(Protocol):
    """Picks the key that signs for a principal (a :class:`TokenIssuer` signs for anyone;
    :class:`~studtools.devkeys.DevKeys` picks the issuer or the service's own key)."""

    def issuer_for(self, principal: Principal) -> TokenIssuer: ...


class TokenBook:
    """Tokens for any principal, minted once each (and again near expiry): the credentials
    of test clients, tools and bots that call as several principals."""

    def __init__(self, source: IssuerSource, ttl_seconds: int = 3600,
                 clock: Clock = time.time) -> None:
        self.source = source
        self._ttl = ttl_seconds
        self._clock = clock
        self._tokens: dict[Principal, tuple[str, float]] = {}

    def token(self, who: Principal) -> str:
        """A token for ``who``."""
        cached = self._tokens.get(who)
        if cached is None or self._clock() >= cached[1] - SERVICE_TOKEN_RENEW_S:
            expires = int(self._clock()) + self._ttl
            cached = (self.source.issuer_for(who).issue(who, self._ttl), float(expires))
            self._tokens[who] = cached
        return cached[0]

    def metadata(self, who: Principal) -> Metadata:
        """Call metadata carrying a token for ``who``."""
        return bearer_metadata(self.token(who))
