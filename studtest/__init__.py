"""Test support, not product: the room in one process (``studtest.table``, with the dealer's
and the wallet's in-process servers and typed clients in ``studtest.dealer`` and
``studtest.wallet``), the room as separate processes (``studtest.processes``), and where the
tests' real Redis comes from (``studtest.redis``). Used by ``tests/``, ``bench/`` and
``campaigns/``; no service imports it and no service image carries it.
"""
