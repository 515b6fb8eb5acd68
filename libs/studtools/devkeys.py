"""Generated keys for development and tests: one issuer key and one key per service, the key
set that trusts them (marked ``dev``), and the environment each service process needs."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from studkit.auth.config import PUBLIC_KEYS_ENV, SERVICE_KEY_ENV
from studkit.auth.principal import Principal, Role
from studkit.auth.signing import ISSUER_SIGNER, KeySet, SigningKey, service_signer
from studkit.auth.tokens import Clock, ServiceTokenSource, TokenIssuer, TokenVerifier

DEV_SERVICES: Final = ("table", "dealer", "wallet", "tournament", "archiver")
ISSUER_FILE: Final = "issuer.pem"
SERVICE_FILE: Final = "service-{name}.pem"
KEY_SET_FILE: Final = "public-keys.json"


@dataclass(frozen=True)
class DevKeys:
    """An issuer key and one key per service, all generated; never for production."""

    issuer_key: SigningKey
    service_keys: Mapping[str, SigningKey] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"DevKeys(services={sorted(self.service_keys)})"

    @classmethod
    def generate(cls, services: Iterable[str] = DEV_SERVICES) -> DevKeys:
        """Fresh keys for the issuer and each of ``services``."""
        keys = {name: SigningKey.generate() for name in services}
        for name in keys:
            service_signer(name)  # a valid name
        return cls(SigningKey.generate(), keys)

    def key_set(self) -> KeySet:
        """The public keys: the issuer's and each service's (for its own name only)."""
        return KeySet([
            self.issuer_key.verifying_key(ISSUER_SIGNER, dev=True),
            *(key.verifying_key(service_signer(name), dev=True)
              for name, key in self.service_keys.items()),
        ])

    def verifier(self, clock: Clock = time.time, audience: str | None = None) -> TokenVerifier:
        """A verifier trusting these keys."""
        return TokenVerifier(self.key_set(), clock=clock, audience=audience)

    def issuer(self, clock: Clock = time.time) -> TokenIssuer:
        """The issuer: player, operator and auditor tokens."""
        return TokenIssuer(self.issuer_key, clock)

    def service_key(self, name: str) -> SigningKey:
        """Service ``name``'s private key; ``KeyError`` when there is none."""
        try:
            return self.service_keys[name]
        except KeyError:
            raise KeyError(f"no dev key for service {name!r}") from None

    def service_source(self, name: str, clock: Clock = time.time) -> ServiceTokenSource:
        """Service ``name``'s own credentials."""
        return ServiceTokenSource(self.service_key(name), name, clock=clock)

    def issuer_for(self, principal: Principal) -> TokenIssuer:
        """The key that may sign for ``principal``: the service's own key for a service, the
        issuer's for everyone else (see :class:`~studkit.auth.tokens.TokenBook`)."""
        if principal.role is Role.SERVICE:
            return TokenIssuer(self.service_key(principal.name))
        return self.issuer()

    def env(self, service_name: str) -> dict[str, str]:
        """The environment a process of ``service_name`` needs: the key set (inline) and, if
        it has one, its own private key (inline PEM)."""
        env = {PUBLIC_KEYS_ENV: self.key_set().to_json()}
        if service_name in self.service_keys:
            env[SERVICE_KEY_ENV] = self.service_keys[service_name].pem()
        return env

    def write(self, directory: str | Path) -> None:
        """Save the keys in ``directory`` (created owner-only): ``issuer.pem``,
        ``service-<name>.pem`` and the key set ``public-keys.json``."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path, 0o700)
        write_private(path / ISSUER_FILE, self.issuer_key.pem())
        for name, key in self.service_keys.items():
            write_private(path / SERVICE_FILE.format(name=name), key.pem())
        (path / KEY_SET_FILE).write_text(self.key_set().to_json() + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> DevKeys:
        """Keys saved by :meth:`write`; ``FileNotFoundError`` without an issuer key."""
        path = Path(directory)
        issuer = SigningKey.from_pem((path / ISSUER_FILE).read_text())
        prefix, suffix = SERVICE_FILE.split("{name}")
        services = {
            f.name[len(prefix):-len(suffix)]: SigningKey.from_pem(f.read_text())
            for f in sorted(path.glob(SERVICE_FILE.format(name="*")))
        }
        return cls(issuer, services)

    @classmethod
    def load_or_generate(cls, directory: str | Path,
                         services: Iterable[str] = DEV_SERVICES) -> DevKeys:
        """The keys in ``directory``, generating (and saving) any that are missing."""
        path = Path(directory)
        wanted = tuple(services)
        if (path / ISSUER_FILE).exists():
            keys = cls.load(path)
            missing = [name for name in wanted if name not in keys.service_keys]
            if not missing:
                return keys
            keys = cls(keys.issuer_key, {**keys.service_keys,
                                         **cls.generate(missing).service_keys})
        else:
            keys = cls.generate(wanted)
        keys.write(path)
        return keys


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner may read, even for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
