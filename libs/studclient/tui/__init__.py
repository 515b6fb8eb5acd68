"""``stud play``: the terminal client (textual) for a human at a running room.

``stud play [--table demo] [--seat N] [--buy-in X] [--player NAME]`` connects with the SDK,
sits down (a free seat, or ``--seat``; ``--buy-in`` or the table's minimum) and shows the
table: every seat's up cards, stack, wager and status; your own down cards; the pots; whose
turn it is with a live countdown; the legal actions with their amounts as keys and buttons;
the dealer log; the last hand's history on demand. Keys: docs/play.md.

Addresses and credentials come from the same environment variables as ``stud bots``
(``STUD_TABLE_TARGET``, ``STUD_DEALER_TARGET``, ``STUD_WALLET_TARGET``, defaulting to
``make run``'s; ``STUD_ISSUER_KEY`` or make run's ``.run/keys/issuer.pem`` to mint the
player's token, or ``STUD_PLAYER_TOKEN``), read from ``.run/env`` too when that file exists
(``stud`` loads it for every command: ``studtools.runenv``).

The textual app itself lives in :mod:`studclient.tui.app` (imported only when ``stud play``
runs) and its text in :mod:`studclient.tui.text`.
"""

from studclient.tui.command import register

__all__ = ["register"]
