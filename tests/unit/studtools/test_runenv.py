"""Every ``stud`` command finds ``make run``'s stack through one loader
(:func:`studtools.runenv.stud_environment`, called by :func:`studtools.cli.main`): the
``.run/env`` that make run wrote in the working directory, without ``source .run/env``, and a
variable set in the process environment still wins."""

from __future__ import annotations

import argparse
import inspect
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import pytest

from studclient import bots
from studkit.auth import Principal, Role
from studtools import cli
from studtools.devkeys import DevKeys
from studtools.devrun import env_file_text
from studtools.runenv import env_file, read_env_file, stud_environment

ADDRS = {"table": "127.0.0.1:61051", "dealer": "127.0.0.1:61052", "wallet": "127.0.0.1:61053"}
FROM_FILE = {"STUD_TABLE_TARGET": "127.0.0.1:61051", "STUD_DEALER_TARGET": "127.0.0.1:61052",
             "STUD_WALLET_TARGET": "127.0.0.1:61053"}
STUD_VARIABLES = ("STUD_TABLE_TARGET", "STUD_DEALER_TARGET", "STUD_WALLET_TARGET",
                  "STUD_ISSUER_KEY", "STUD_OPERATOR_TOKEN", "STUD_PLAYER_TOKENS", "STUD_RUN_DIR")


@pytest.fixture
def made_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DevKeys:
    """A working directory with make run's ``.run/env`` (written by devrun's own writer) whose
    issuer key is not at the default ``.run/keys/issuer.pem``, and a process environment
    without any of its variables (the file is not sourced)."""
    monkeypatch.chdir(tmp_path)
    for name in STUD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    keys = DevKeys.generate()
    key_file = tmp_path / "elsewhere" / "issuer.pem"
    key_file.parent.mkdir()
    key_file.write_text(keys.issuer_key.pem())
    Path(".run").mkdir()
    Path(".run/env").write_text(env_file_text(ADDRS, key_file.resolve()) + "\n")
    assert not Path(".run/keys/issuer.pem").exists()
    return keys


def test_stud_bots_finds_make_runs_stack_without_the_env_sourced(
        made_run: DevKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stud bots --tables 3 --hands 20`` resolves the addresses and the issuer key from
    ``.run/env``: its operator token is signed with that key (a key from elsewhere gave
    ``UNAUTHENTICATED unknown key id``)."""
    seen: list[Mapping[str, str]] = []

    async def run(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
        seen.append(env)  # stands in for the play itself: no room is running here
        return 0

    monkeypatch.setattr(bots, "run", run)
    assert cli.main(["bots", "--tables", "3", "--hands", "20"], io.StringIO()) == 0
    (env,) = seen
    assert bots.targets(env) == FROM_FILE
    creds = bots.credentials(env)
    assert creds.minted
    token = creds.operator() if callable(creds.operator) else creds.operator
    assert made_run.verifier().verify(str(token)) == Principal(Role.OPERATOR, "bots")
    player, player_token = creds.players(0, "bot-1")
    assert player == "bot-1" and callable(player_token)
    assert made_run.verifier().verify(str(player_token())) == Principal(Role.PLAYER, "bot-1")


def test_a_variable_set_in_the_environment_wins_and_an_empty_one_does_not(
        made_run: DevKeys) -> None:
    env = stud_environment({"STUD_TABLE_TARGET": "10.0.0.9:1", "STUD_WALLET_TARGET": "",
                            "HOME": "/somewhere"})
    assert bots.targets(env) == {**FROM_FILE, "STUD_TABLE_TARGET": "10.0.0.9:1"}
    assert env["HOME"] == "/somewhere"
    assert Path(env["STUD_ISSUER_KEY"]).name == "issuer.pem"


def test_stud_run_dir_names_another_run_directory(made_run: DevKeys, tmp_path: Path) -> None:
    other = tmp_path / "other-run"
    other.mkdir()
    (other / "env").write_text("export STUD_TABLE_TARGET=127.0.0.1:7000\n")
    env = stud_environment({"STUD_RUN_DIR": str(other)})
    assert env_file(env) == other / "env"
    assert bots.targets(env)["STUD_TABLE_TARGET"] == "127.0.0.1:7000"
    assert "STUD_ISSUER_KEY" not in env


def test_without_a_run_directory_the_environment_is_as_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert stud_environment({"A": "1", "EMPTY": ""}) == {"A": "1"}


def test_what_make_run_writes_is_what_stud_reads(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(env_file_text(ADDRS, Path("/keys dir/issuer.pem")) + "\n")
    assert read_env_file(path) == {**FROM_FILE, "STUD_ISSUER_KEY": "/keys dir/issuer.pem"}


def _handlers(parser: argparse.ArgumentParser, path: str = "") -> dict[str, Any]:
    """Each leaf command of the parser (``replay verify``, ``bots``, ...) and its handler."""
    found: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_handlers(sub, f"{path} {name}".strip()))
    if not found and path:
        found[path] = parser.get_default("handler")
    return found


def test_every_command_takes_the_environment_from_main() -> None:
    """Each subcommand's handler is (args, out, env): ``main`` hands every one of them the
    environment it loaded, and none has to read ``os.environ`` itself."""
    handlers = _handlers(cli.build_parser())
    assert {"bots", "play", "archive run", "archive export", "replay check", "replay list",
            "replay show", "replay verify", "replay export"} <= set(handlers)
    for name, handler in handlers.items():
        assert handler is not None, name
        assert list(inspect.signature(handler).parameters)[1:] == ["out", "env"], name


def test_an_archive_address_set_by_the_caller_beats_make_runs_file(tmp_path: Path) -> None:
    """A support address the caller sets is used even where a stopped make run's .run/env
    still names an auditor address (found by make archive-chaos)."""
    from studtools.replay_source import Settings

    (tmp_path / "env").write_text("export STUD_AUDITOR_DSN=postgresql://file-auditor\n")
    given = {"STUD_RUN_DIR": str(tmp_path), "STUD_SUPPORT_DSN": "postgresql://explicit"}
    assert Settings.from_env(given).history_dsn == "postgresql://explicit"
    assert Settings.from_env({"STUD_RUN_DIR": str(tmp_path)}).history_dsn == \
        "postgresql://file-auditor"


def test_make_runs_archive_is_not_read_for_another_room(tmp_path: Path) -> None:
    """A Redis URL the caller sets names another room than make run's: the archive address in
    make run's file (a stopped make run's, here) is not its history (a CI clone's chaos
    campaign failed 73 of 73 hands, reading a dead make run's PostgreSQL)."""
    from studtools.replay_source import Settings

    (tmp_path / "env").write_text("export STUD_AUDITOR_DSN=postgresql://file-auditor\n"
                                  "export REDIS_URL=redis://make-run\n")
    theirs = {"STUD_RUN_DIR": str(tmp_path), "STUD_REPLAY_REDIS_URL": "redis://campaign"}
    assert Settings.from_env(theirs).history_dsn == ""
    # as stud's main passes it: the file's variables already under the caller's
    assert Settings.from_env(stud_environment(theirs)).history_dsn == ""
    assert Settings.from_env({**theirs, "STUD_AUDITOR_DSN": "postgresql://campaign"}
                             ).history_dsn == "postgresql://campaign"
    assert Settings.from_env({"STUD_RUN_DIR": str(tmp_path)}).history_dsn == \
        "postgresql://file-auditor"
