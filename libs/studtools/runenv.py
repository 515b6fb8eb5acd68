"""Where every ``stud`` command finds ``make run``'s stack: the run directory's ``env`` file.

``make run`` (:mod:`studtools.devrun`) writes ``.run/env``: the services' addresses
(``STUD_TABLE_TARGET``, ``STUD_DEALER_TARGET``, ``STUD_WALLET_TARGET``) and the dev issuer key
(``STUD_ISSUER_KEY``), for ``source .run/env`` in another terminal. ``stud`` reads that file
itself, once, in :func:`studtools.cli.main`, with :func:`stud_environment`, and hands the result
to whichever subcommand runs (``bots``, ``play``, ``replay``, ``archive``): none of them reads
``os.environ`` or the file on its own. A variable set (non-empty) in the process environment
wins over the file, so ``source``-ing another stack's env, or setting one variable, still
points a command elsewhere.

The run directory is ``$STUD_RUN_DIR``, else ``.run`` in the working directory.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Final

RUN_DIR_ENV: Final = "STUD_RUN_DIR"
DEFAULT_RUN_DIR: Final = Path(".run")
ENV_FILE_NAME: Final = "env"


def run_dir(env: Mapping[str, str]) -> Path:
    """``make run``'s directory: ``$STUD_RUN_DIR``, else ``.run``."""
    return Path(env.get(RUN_DIR_ENV) or DEFAULT_RUN_DIR)


def env_file(env: Mapping[str, str]) -> Path:
    """``<run dir>/env``, the file ``make run`` writes."""
    return run_dir(env) / ENV_FILE_NAME


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and shell quoting allowed; ``#`` comments) of an env
    file such as make run's ``.run/env``; {} when it is absent or unreadable.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d, "env")
    ...     _ = p.write_text("# make run\\nexport A='1 2'\\nB=x\\nnot a line\\n")
    ...     read_env_file(p)
    {'A': '1 2', 'B': 'x'}
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            continue
        try:
            parts = shlex.split(value)
        except ValueError:
            continue
        out[key] = " ".join(parts)
    return out


def run_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``make run``'s env file (:func:`env_file` of ``env``); {} when there is
    none. The one place that loads it."""
    return read_env_file(env_file(env))


def stud_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a ``stud`` command runs with: ``make run``'s env file under ``env``'s
    variables (those set to a non-empty value win; an empty one does not hide the file's)."""
    return {**run_env(env), **{name: value for name, value in env.items() if value}}
