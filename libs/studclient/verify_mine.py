"""``stud replay verify-mine --table T --hand N``: check one hand with a player's own token
alone (docs/fairness.md): the hand's public record from the table, the dealer's public proof
and the player's own cards with their openings, against the card commitment published before
the first card. Credentials as ``stud play``'s (``STUD_PLAYER_TOKEN``, or ``--player NAME``
with the dev issuer key); targets ``STUD_TABLE_TARGET`` and ``STUD_DEALER_TARGET``. Prints the
verdict (it has no copy of the player's seed: it says whether a seed under their name is in
the deal order, and "your seed not checked"; a seed committed under their name but withheld
from the order is ``verified_without_your_seed``, as the live check says of a seed the dealer
dropped) and each problem; last line
``hand=N outcome=… problems=…``; exit status 0 when verified, 1 otherwise, 2 when the room
cannot be reached or refuses."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from typing import Any, TextIO

from studclient.errors import StudError
from studclient.fairness import verify_hand_alone
from studclient.tui.command import Setup


async def _check(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
    setup = Setup(env, args.player)
    client = setup.connect()
    try:
        # No copy of the seed the player's SDK gave (it keeps none after the hand): the
        # verdict says whether a seed under the player's name is in the order, not checked.
        verdict = await verify_hand_alone(client, args.table, args.hand, seed_known=False)
    except StudError as exc:
        print(f"stud replay verify-mine: {exc}", file=out)
        return 2
    finally:
        await client.close()
    if args.json:
        print(json.dumps({"table": verdict.table_id, "hand": verdict.hand_number,
                          "outcome": verdict.outcome.value, "problems": verdict.problems,
                          "own_cards": verdict.own_cards, "public_cards": verdict.public_cards,
                          "seeds": verdict.seeds, "seed_in_order": verdict.my_seed_listed,
                          "seed_checked": verdict.seed_checked}), file=out)
    else:
        print(f"{setup.player} at {args.table}: {verdict.summary()}", file=out)
        for problem in verdict.problems:
            print(f"  {problem}", file=out)
        print(f"hand={verdict.hand_number} outcome={verdict.outcome.value} "
              f"problems={len(verdict.problems)}", file=out)
    return 0 if verdict.ok else 1


def register(replay_commands: Any) -> None:
    """Add ``verify-mine`` under ``stud replay``."""
    p = replay_commands.add_parser(
        "verify-mine", help="check one hand with your own token alone",
        description="Check one hand with your own token alone: the hand's public record, "
        "the dealer's public proof and your own cards' openings against the card commitment "
        "published before the first card. Last line 'hand=N outcome=… problems=…'; exit "
        "status 0 when verified, 1 otherwise, 2 when the room cannot be reached.")
    p.add_argument("--table", required=True, metavar="T")
    p.add_argument("--hand", required=True, type=int, metavar="N")
    p.add_argument("--player", metavar="NAME", help="dev rooms: mint NAME's token")
    p.add_argument("--json", action="store_true", help="print JSON")

    def handle(args: argparse.Namespace, out: TextIO, env: Mapping[str, str]) -> int:
        try:
            return asyncio.run(_check(args, out, env))
        except (OSError, RuntimeError) as exc:
            print(f"stud replay verify-mine: {exc}", file=out)
            return 2

    p.set_defaults(handler=handle)
