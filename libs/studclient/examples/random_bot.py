"""A bot in twenty lines: connect, sit, act at random until N hands are over, leave.

    STUD_TOKEN=<player token> python libs/studclient/examples/random_bot.py TABLE SEAT [HANDS]
"""

import asyncio
import os
import random
import sys

from studclient import Client, Stale, hand_over, legal_actions, my_turn


async def play(client: Client, table: str, seat: int, hands: int, buy_in: int = 8_000) -> int:
    """Sit at ``seat``, play until ``hands`` hands have been dealt and are over; actions."""
    await client.sit(table, seat, buy_in)
    actions = 0
    async with client.watch(table) as watch:
        async for view in watch.views():
            if view.hands_started >= hands and hand_over(view):
                break
            if my_turn(view):
                try:
                    await client.act(table, random.choice(legal_actions(view)),
                                     expected_sequence=view.version)
                    actions += 1
                except Stale:
                    pass  # the table moved on meanwhile: decide on the next view
    await client.leave(table)
    return actions


async def main(table: str, seat: int, hands: int) -> None:
    env = os.environ.get
    async with Client.connect(env("STUD_TABLE_TARGET", "127.0.0.1:50051"),
                              env("STUD_DEALER_TARGET", "127.0.0.1:50052"),
                              env("STUD_WALLET_TARGET", "127.0.0.1:50053"),
                              os.environ["STUD_TOKEN"]) as client:
        actions = await play(client, table, seat, hands)
        print(f"{actions} actions; balance {await client.balance()}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 10))
