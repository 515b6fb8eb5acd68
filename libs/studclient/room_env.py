"""Where the room is and who the SDK's bots are, from the environment (``stud bots``, the
demo, ``stud play``): the services' addresses, and the operator's and players' tokens, minted
from the issuer's key or given."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from studclient.client import Client, TokenProvider, token_subject

TABLE_TARGET_ENV: Final = "STUD_TABLE_TARGET"
DEALER_TARGET_ENV: Final = "STUD_DEALER_TARGET"
WALLET_TARGET_ENV: Final = "STUD_WALLET_TARGET"
OPERATOR_TOKEN_ENV: Final = "STUD_OPERATOR_TOKEN"
PLAYER_TOKENS_ENV: Final = "STUD_PLAYER_TOKENS"
ISSUER_KEY_ENV: Final = "STUD_ISSUER_KEY"
DEFAULT_TARGETS: Final = {TABLE_TARGET_ENV: "127.0.0.1:50051",
                          DEALER_TARGET_ENV: "127.0.0.1:50052",
                          WALLET_TARGET_ENV: "127.0.0.1:50053"}
DEFAULT_ISSUER_KEY_FILE: Final = Path(".run/keys/issuer.pem")


def targets(env: Mapping[str, str]) -> dict[str, str]:
    """The room's addresses by variable name: ``env``'s, else make run's usual ports."""
    return {name: env.get(name) or default for name, default in DEFAULT_TARGETS.items()}


@dataclass
class Credentials:
    """Where the bots' tokens come from."""

    operator: str | TokenProvider
    players: Callable[[int, str], tuple[str, str | TokenProvider]]
    """(index, wanted name) -> (player id, token or provider)."""
    minted: bool


def credentials(env: Mapping[str, str]) -> Credentials:
    """From ``STUD_ISSUER_KEY`` (or make run's key file), else ``STUD_OPERATOR_TOKEN`` and
    ``STUD_PLAYER_TOKENS``; ``RuntimeError`` when neither is there."""
    key = env.get(ISSUER_KEY_ENV, "")
    if not key.strip() and not env.get(OPERATOR_TOKEN_ENV) and DEFAULT_ISSUER_KEY_FILE.exists():
        key = str(DEFAULT_ISSUER_KEY_FILE)
    if key.strip():
        from studkit.auth import Principal, Role, TokenBook, issuer_from_env
        book = TokenBook(issuer_from_env({ISSUER_KEY_ENV: key}))

        def provider(who: Principal) -> TokenProvider:
            return lambda: book.token(who)

        operator = provider(Principal(Role.OPERATOR, "bots"))

        def minted(index: int, name: str) -> tuple[str, str | TokenProvider]:
            return name, provider(Principal(Role.PLAYER, name))

        return Credentials(operator, minted, True)
    operator_token = env.get(OPERATOR_TOKEN_ENV, "")
    tokens = [t.strip() for t in env.get(PLAYER_TOKENS_ENV, "").split(",") if t.strip()]
    if not operator_token:
        raise RuntimeError(f"set {ISSUER_KEY_ENV} (make run writes .run/keys/issuer.pem), or "
                           f"{OPERATOR_TOKEN_ENV} and {PLAYER_TOKENS_ENV}")

    def given(index: int, name: str) -> tuple[str, str | TokenProvider]:
        if index >= len(tokens):
            raise RuntimeError(f"{PLAYER_TOKENS_ENV} holds {len(tokens)} tokens; "
                               f"the bots need more")
        return token_subject(tokens[index])[1], tokens[index]

    return Credentials(operator_token, given, False)


def bots_credentials(env: Mapping[str, str]) -> Credentials | None:
    """:func:`credentials`, or None once ``stud bots`` has said why not on stderr (its exit
    status is then 2)."""
    try:
        return credentials(env)
    except RuntimeError as exc:
        print(f"stud bots: {exc}", file=sys.stderr)
        return None


def connector(env: Mapping[str, str], tournament_addr: str | None = None
              ) -> Callable[[str | TokenProvider], Client]:
    """A client of the room at ``env``'s addresses (:func:`targets`) for each token (and of
    the tournament service at ``tournament_addr``)."""
    where = targets(env)

    def connect(token: str | TokenProvider) -> Client:
        return Client.connect(where[TABLE_TARGET_ENV], where[DEALER_TARGET_ENV],
                              where[WALLET_TARGET_ENV], token, tournament_addr=tournament_addr)

    return connect
