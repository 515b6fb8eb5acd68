"""The gRPC transport of the services' processes, set by importing this module first.

``import studkit.transport`` at the top of a process's entry module (each
``services/*/__main__.py`` does, and so do the campaigns' and benchmarks' processes, to
measure what the services run) sets ``GRPC_EXPERIMENTS`` to :data:`GRPC_EXPERIMENTS` in the
environment, unless the operator set it already. gRPC reads the variable once, when ``grpc``
is first imported, so the import must come before anything that imports ``grpc``.

Importing ``studkit`` (or the SDK, ``studclient``) does not set it: a library does not change
its host process's gRPC or the environment its children inherit; a client application that
wants the same transport imports this module first, or sets the variable itself."""

import os as _os

GRPC_EXPERIMENTS = "-event_engine_client,-event_engine_listener"
"""grpcio's own I/O path for channels and servers, not the EventEngine that grpcio 1.80 made
the default for Python. Measured on grpcio 1.85.1 (issue 35, ``docs/benchmarks.md``, "Human
pace"): a unary call costs 11 thread context switches instead of 26-30 and 13-15 % less CPU
(a ``grpc.aio`` health check, client and server in one process), and the room's table CPU per
action is 1.45 ms against 1.58 ms (``bench/bench_room.py``, five alternating rounds,
medians). Re-measure when the pin moves: a grpcio without these experiments logs ``Unknown
experiment`` and runs its default."""

_os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)
