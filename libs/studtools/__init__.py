"""The tools: the ``stud`` command line (:mod:`studtools.cli`), replay (:mod:`studtools.replay_cli`,
``replay_hands``, ``replay_source``, ``replay_check``), the archive (:mod:`studtools.archive`),
``make run`` (:mod:`studtools.devrun`) and the token issuer (:mod:`studtools.issuer`, run as
``python -m studkit.auth``).

The layers, each importing only those below it: ``rules`` (the game), ``studkit`` (the shell the
services are built on: store, repository, keys, ownership, gRPC, auth, mapping, logging,
metrics), ``studclient`` (the SDK and its bots), then this package. No service imports
it."""
