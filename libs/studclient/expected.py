"""``expected_sequence``'s default, shared by the unary actions (:mod:`studclient.client`) and
the play session's (:mod:`studclient.play`)."""

from __future__ import annotations

import enum
from typing import Final


class _Auto(enum.Enum):
    AUTO = "auto"


AUTO: Final = _Auto.AUTO
"""``expected_sequence=AUTO`` (the default): the version of the client's current view of the
table (from its last GetTable, watch update or command reply), if it has one."""

ExpectedSequence = int | None | _Auto
