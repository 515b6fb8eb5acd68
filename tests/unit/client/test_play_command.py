"""``stud play``'s command line: where its addresses and credentials come from."""

from __future__ import annotations

from pathlib import Path

import pytest

from studclient.client import token_subject
from studclient.tui.command import Setup
from studkit.auth import Principal, Role, TokenBook
from studtools import cli
from studtools.devkeys import DevKeys


def test_the_player_token_is_minted_from_the_issuer_key_with_an_operator_for_funds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    keys = DevKeys.generate()
    setup = Setup({"STUD_ISSUER_KEY": keys.issuer_key.pem()}, "carol")
    assert setup.player == "carol"
    assert callable(setup.token) and token_subject(str(setup.token())) == ("player", "carol")
    assert setup.operator is not None
    assert setup.targets == {"STUD_TABLE_TARGET": "127.0.0.1:50051",
                             "STUD_DEALER_TARGET": "127.0.0.1:50052",
                             "STUD_WALLET_TARGET": "127.0.0.1:50053"}


def test_a_given_player_token_is_used_as_is(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    token = TokenBook(DevKeys.generate()).token(Principal(Role.PLAYER, "alice"))
    setup = Setup({"STUD_PLAYER_TOKEN": token, "STUD_TABLE_TARGET": "10.0.0.1:1"}, None)
    assert (setup.player, setup.token, setup.operator) == ("alice", token, None)
    assert setup.targets["STUD_TABLE_TARGET"] == "10.0.0.1:1"


def test_without_credentials_it_says_what_to_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("STUD_ISSUER_KEY", "STUD_PLAYER_TOKEN", "STUD_OPERATOR_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["play", "--table", "demo"]) == 2
    assert "STUD_ISSUER_KEY" in capsys.readouterr().err
