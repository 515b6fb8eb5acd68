"""PHH, the Poker Hand History format (https://github.com/uoftcprg/phh-std), for seven card
stud hi/lo: :mod:`rules.phh.format` (hands and actions as values, read from and written to
TOML), :mod:`rules.phh.replay` with :mod:`rules.phh.table` and :mod:`rules.phh.verdict`
(replaying a hand through our rules) and :mod:`rules.phh.export` (writing our log as PHH).
Their public names are importable from here."""

# The compiled build (tools/compile_core.py, ``make compiled``) holds extension modules of
# this package in a directory ahead of libs/ on sys.path (unless STUD_PURE=1): those come
# first, and a module the build leaves pure is found here.
import pkgutil as _pkgutil

_everywhere: list[str] = _pkgutil.extend_path([], __name__)
# In sys.path's order: the build first, then the first libs/ on the path (a checkout's own
# sources before another's, when a clone runs with another checkout's venv).
__path__ = _everywhere or __path__

from rules.phh.export import export_phh
from rules.phh.format import (
    VARIANT,
    PhhAction,
    PhhError,
    PhhHand,
    parse_action,
    parse_phh,
    parse_phh_cards,
    parse_phhs,
)
from rules.phh.replay import replay_phh
from rules.phh.table import replay_config
from rules.phh.verdict import END_OF_ACTIONS, Rejection, ReplayResult, Verdict

__all__ = [
    "END_OF_ACTIONS",
    "VARIANT",
    "PhhAction",
    "PhhError",
    "PhhHand",
    "Rejection",
    "ReplayResult",
    "Verdict",
    "export_phh",
    "parse_action",
    "parse_phh",
    "parse_phh_cards",
    "parse_phhs",
    "replay_config",
    "replay_phh",
]
