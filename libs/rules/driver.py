"""The driver's old home: it lives in :mod:`rules.testing` now; these names stay importable
from here."""

from rules.testing import StackedDeck, TableDriver, deal_command, revealed_hands

__all__ = ["StackedDeck", "TableDriver", "deal_command", "revealed_hands"]
