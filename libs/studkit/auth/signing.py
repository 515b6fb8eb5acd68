"""Ed25519 keys for tokens: a private :class:`SigningKey`, and the public :class:`KeySet` that
says which key (``kid``) may sign for which subjects.

A key's ``kid`` is its RFC 7638 JWK thumbprint, so a private key alone names its key-set entry
and no entry can claim another key's id. The key set is a JSON Web Key Set whose entries carry
one extra member, ``signer``: ``"issuer"`` (may sign player, operator and auditor tokens) or
``"service:<name>"`` (may sign only tokens whose subject is ``service:<name>``)::

    {"keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
               "kid": "<thumbprint>", "x": "<public key>", "signer": "service:table"}]}

Several entries may share a signer: that is how keys rotate. Private keys are PKCS#8 PEM
(``openssl genpkey -algorithm ed25519`` writes one).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from studkit.auth.principal import Role
from studkit.keys import check_id

ISSUER_SIGNER: Final = "issuer"
"""The signer of player, operator and auditor tokens."""
SERVICE_PREFIX: Final = "service:"
ISSUED_ROLES: Final = frozenset({Role.PLAYER, Role.OPERATOR, Role.AUDITOR})
"""Roles only the issuer's keys may sign for; a service key signs for its own service."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def thumbprint(public_key: Ed25519PublicKey) -> str:
    """The RFC 7638 JWK thumbprint (SHA-256, base64url) of an Ed25519 public key: its kid."""
    x = _b64url(_raw_public(public_key))
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"),
                           sort_keys=True)
    return _b64url(hashlib.sha256(canonical.encode()).digest())


def service_signer(name: str) -> str:
    """The signer label of service ``name``'s keys: ``service:<name>``."""
    return SERVICE_PREFIX + check_id(name, "service name")


def check_signer(signer: str) -> str:
    """``signer`` if it is ``issuer`` or ``service:<valid name>``; else ``ValueError``."""
    if signer == ISSUER_SIGNER:
        return signer
    if signer.startswith(SERVICE_PREFIX):
        return service_signer(signer[len(SERVICE_PREFIX):])
    raise ValueError(f"a signer is {ISSUER_SIGNER!r} or 'service:<name>', not {signer!r}")


def may_sign(signer: str, role: Role, name: str) -> bool:
    """True when a key of ``signer`` may sign a token for ``role:name``."""
    if signer == ISSUER_SIGNER:
        return role in ISSUED_ROLES
    return role is Role.SERVICE and signer == SERVICE_PREFIX + name


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private Ed25519 key and its kid. Never logged, never in a repr."""

    private_key: Ed25519PrivateKey = field(repr=False)

    @classmethod
    def generate(cls) -> SigningKey:
        """A fresh random key."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, pem: str | bytes) -> SigningKey:
        """The key of a PKCS#8 PEM text; ``ValueError`` if it is not an Ed25519 key."""
        data = pem.encode() if isinstance(pem, str) else pem
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not an unencrypted PEM private key ({type(exc).__name__})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("not an Ed25519 private key")
        return cls(key)

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self.private_key.public_key()

    @property
    def kid(self) -> str:
        """The key id: the thumbprint of the public key."""
        return thumbprint(self.public_key)

    def pem(self) -> str:
        """The private key as PKCS#8 PEM (keep it in a file only its owner reads)."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode()

    def verifying_key(self, signer: str, *, dev: bool = False) -> VerifyingKey:
        """This key's public entry for a key set, signing for ``signer``."""
        return VerifyingKey(kid=self.kid, public_key=self.public_key,
                            signer=check_signer(signer), dev=dev)


@dataclass(frozen=True, slots=True)
class VerifyingKey:
    """One entry of a key set: a public key, its kid and what it may sign."""

    kid: str
    public_key: Ed25519PublicKey = field(repr=False, compare=False)
    signer: str
    dev: bool = False
    """Generated for development (``make run``, tests); a service warns when it trusts one."""

    def to_jwk(self) -> dict[str, Any]:
        """The JWK of this entry (with the ``signer`` member)."""
        jwk: dict[str, Any] = {"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
                               "kid": self.kid, "x": _b64url(_raw_public(self.public_key)),
                               "signer": self.signer}
        if self.dev:
            jwk["dev"] = True
        return jwk

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> VerifyingKey:
        """The entry of a JWK; ``ValueError`` when it is not an Ed25519 signing key whose kid
        is its thumbprint, with a valid signer."""
        if "d" in jwk:
            # Never echo it: this is a private key where only public ones belong.
            raise ValueError("a key set holds public keys only; an entry carries a private key")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise ValueError("a key must be an Ed25519 JWK (kty OKP, crv Ed25519)")
        if jwk.get("alg", "EdDSA") != "EdDSA" or jwk.get("use", "sig") != "sig":
            raise ValueError("a key must be for EdDSA signatures")
        x, kid, signer = jwk.get("x"), jwk.get("kid"), jwk.get("signer")
        if not isinstance(x, str) or not isinstance(kid, str) or not isinstance(signer, str):
            raise ValueError("a key needs string members x, kid and signer")
        try:
            public_key = Ed25519PublicKey.from_public_bytes(_unb64url(x))
        except ValueError:
            raise ValueError(f"key {kid!r}: x is not an Ed25519 public key") from None
        if thumbprint(public_key) != kid:
            raise ValueError(f"key {kid!r}: kid is not the key's thumbprint")
        return cls(kid=kid, public_key=public_key, signer=check_signer(signer),
                   dev=jwk.get("dev") is True)


class KeySet:
    """The public keys a verifier trusts, by kid."""

    def __init__(self, keys: Iterable[VerifyingKey]) -> None:
        self._keys: dict[str, VerifyingKey] = {}
        for key in keys:
            if key.kid in self._keys:
                raise ValueError(f"key {key.kid!r} appears twice in the key set")
            self._keys[key.kid] = key
        if not self._keys:
            raise ValueError("the key set holds no key")

    def __repr__(self) -> str:
        signers = sorted({k.signer for k in self._keys.values()})
        return f"KeySet({len(self._keys)} keys for {', '.join(signers)})"

    def __iter__(self) -> Iterator[VerifyingKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, kid: str) -> VerifyingKey | None:
        """The entry for ``kid``, or None."""
        return self._keys.get(kid)

    @property
    def has_dev_keys(self) -> bool:
        """True when any key was generated for development."""
        return any(k.dev for k in self._keys.values())

    def to_json(self) -> str:
        """The key set as a JWKS document."""
        return json.dumps({"keys": [k.to_jwk() for k in self._keys.values()]}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> KeySet:
        """A key set from a JWKS document; ``ValueError`` when malformed."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the key set is not JSON ({exc.msg})") from None
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError('the key set must be a JSON object {"keys": [...]}')
        keys = []
        for jwk in document["keys"]:
            if not isinstance(jwk, dict):
                raise ValueError("each key of the key set must be a JSON object")
            keys.append(VerifyingKey.from_jwk(jwk))
        return cls(keys)

    def merged(self, other: Iterable[VerifyingKey]) -> KeySet:
        """This set plus ``other``'s keys (rotation: publish the new key first)."""
        return KeySet([*self, *(k for k in other if k.kid not in self._keys)])


def read_value(value: str, looks_inline: str) -> str:
    """``value`` itself when it starts with ``looks_inline`` (inline JSON or PEM), else the
    text of the file it names."""
    if value.lstrip().startswith(looks_inline):
        return value
    return Path(value).read_text()
