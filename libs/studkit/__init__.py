"""The shell the services and the tools are built on: Redis keys, client and launcher, the event
store, repository, unit of work and ownership, auth tokens, mapping, logging, metrics and gRPC
server plumbing. Never game rules (those live in ``rules``), and nothing from above: no module
here imports ``studclient``, ``studtools`` (the ``stud`` CLI, replay, archive, ``make run``,
the issuer) or a service (``tests/unit/test_layers.py``)."""

import os as _os

GRPC_EXPERIMENTS = "-event_engine_client,-event_engine_listener"
"""The gRPC transport every process that imports ``studkit`` before ``grpc`` runs on (every
service does): grpcio's own I/O path for channels and servers, not the EventEngine that
grpcio 1.80 made the default for Python. Set in the environment (unless the operator set
``GRPC_EXPERIMENTS`` already) because gRPC reads it once, when ``grpc`` is first imported.
Measured on grpcio 1.85.1 (issue 35, ``docs/benchmarks.md``, "Human pace"): a unary call
costs 11 thread context switches instead of 26-30 and 13-15 % less CPU (a ``grpc.aio``
health check, client and server in one process), and the room's table CPU per action is
1.45 ms against 1.58 ms (``bench/bench_room.py``, five alternating rounds, medians).
Re-measure when the pin moves: a grpcio without these experiments logs ``Unknown
experiment`` and runs its default."""
_os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)
