"""The campaigns (``make failover``, ``make chaos``, ``make audit``, ``make load`` and the
parts of ``make fuzz``): one room of processes (:mod:`campaigns.room`, over
:mod:`studtest.processes`), one router (:mod:`campaigns.router`), one bot
(:mod:`campaigns.bot`), and the invariants as comparisons that can come out false
(:mod:`campaigns.checks`). Not product: no service imports them, no image carries them.
"""

import studkit.transport  # noqa: F401  (the services' gRPC transport in every campaign process)
