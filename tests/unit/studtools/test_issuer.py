"""The issuer tool (:mod:`studtools.issuer`, run as ``python -m studkit.auth``): it mints
tokens with the issuer key and generates, publishes and retires keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from studkit.auth import KeySet, Principal, Role, TokenVerifier, Unauthorized
from studkit.auth.signing import SigningKey
from studtools.devkeys import DevKeys, write_private
from studtools.issuer import main

KEYS = DevKeys.generate()
TABLE = Principal(Role.SERVICE, "table")


def test_the_documented_command_still_mints(tmp_path: Path) -> None:
    """``python -m studkit.auth player carol`` (README) runs the issuer tool."""
    KEYS.write(tmp_path)
    run = subprocess.run([sys.executable, "-m", "studkit.auth", "player", "carol", "--ttl", "60"],
                         env={**os.environ, "STUD_ISSUER_KEY": str(tmp_path / "issuer.pem")},
                         capture_output=True, text=True, timeout=60, check=True)
    assert KEYS.verifier().verify(run.stdout.strip()) == Principal(Role.PLAYER, "carol")


class TestTool:
    def test_mints_with_the_issuer_key(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``python -m studkit.auth operator ops`` signs with STUD_ISSUER_KEY."""
        KEYS.write(tmp_path)
        monkeypatch.setenv("STUD_ISSUER_KEY", str(tmp_path / "issuer.pem"))
        assert main(["operator", "ops", "--ttl", "60"]) == 0
        token = capsys.readouterr().out.strip()
        assert KEYS.verifier().verify(token) == Principal(Role.OPERATOR, "ops")

    def test_without_the_issuer_key_it_fails(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No issuer key, no token: exit status 2 and a message."""
        monkeypatch.delenv("STUD_ISSUER_KEY", raising=False)
        assert main(["player", "alice"]) == 2
        assert "STUD_ISSUER_KEY" in capsys.readouterr().err

    def test_keygen_publish_and_retire(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A new key is generated, published into a key set, signs, and is retired."""
        key_set = tmp_path / "public-keys.json"
        KEYS.write(tmp_path / "old")
        assert main(["public", str(tmp_path / "old" / "service-table.pem"), "--signer",
                     "service:table", "--add-to", str(key_set)]) == 0  # creates the set
        assert main(["keygen", str(tmp_path / "table-2.pem")]) == 0
        kid = capsys.readouterr().out.strip().splitlines()[-1]
        assert main(["keygen", str(tmp_path / "table-2.pem")]) == 2  # never overwrites
        assert main(["public", str(tmp_path / "table-2.pem"), "--signer", "service:table",
                     "--add-to", str(key_set)]) == 0
        assert main(["service", "table", "--key", str(tmp_path / "table-2.pem")]) == 0
        token = capsys.readouterr().out.strip().splitlines()[-1]
        assert TokenVerifier(KeySet.from_json(key_set.read_text())).verify(token) == TABLE
        assert len(KeySet.from_json(key_set.read_text())) == 2
        assert main(["retire", kid, "--from", str(key_set)]) == 0
        with pytest.raises(Unauthorized):
            TokenVerifier(KeySet.from_json(key_set.read_text())).verify(token)
        old_token = KEYS.service_source("table").token()
        assert TokenVerifier(KeySet.from_json(key_set.read_text())).verify(old_token) == TABLE

    def test_dev_keys(self, tmp_path: Path) -> None:
        """``dev-keys DIR`` writes a loadable set for the named services."""
        assert main(["dev-keys", str(tmp_path), "--services", "table"]) == 0
        assert set(DevKeys.load(tmp_path).service_keys) == {"table"}


def test_a_key_whose_id_starts_with_a_dash_is_retired(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key id is a base64url thumbprint: one in 64 starts with "-", which the command line
    must still take for the key id (argparse took it for an unknown option and exited 2;
    the test above failed so, now and then)."""
    key = next(k for k in (SigningKey(Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32))
                           for n in range(256)) if k.kid.startswith("-"))
    write_private(tmp_path / "dash.pem", key.pem())
    KEYS.write(tmp_path / "old")
    key_set = tmp_path / "public-keys.json"
    for pem in (tmp_path / "old" / "service-table.pem", tmp_path / "dash.pem"):
        assert main(["public", str(pem), "--signer", "service:table",
                     "--add-to", str(key_set)]) == 0
    assert main(["retire", key.kid, "--from", str(key_set)]) == 0
    kept = KeySet.from_json(key_set.read_text())
    assert len(kept) == 1 and kept.get(key.kid) is None
    capsys.readouterr()
    assert main(["retire", "--from", str(key_set), key.kid]) == 2  # gone: refused by name
    assert f"no key {key.kid}" in capsys.readouterr().err
