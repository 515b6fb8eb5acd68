"""The shell the services and the tools are built on: Redis keys, client and launcher, the event
store, repository, unit of work and ownership, auth tokens, mapping, logging, metrics and gRPC
server plumbing. Never game rules (those live in ``rules``), and nothing from above: no module
here imports ``studclient``, ``studtools`` (the ``stud`` CLI, replay, archive, ``make run``,
the issuer) or a service (``tests/unit/test_layers.py``)."""
