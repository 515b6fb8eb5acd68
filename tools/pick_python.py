"""Print the interpreter ``make venv`` builds the venv from: of the interpreters on ``PATH``
(``python3``, ``python3.X``) of the same Python version as the ``python3`` that runs this
(3.11 or newer), that can make a venv and have their C headers (the compiled core is built
against them), the fastest. The choice never changes the version a machine would use, only
which build of it.

Why measure: CPython built with profile-guided optimization and link-time optimization (as
distributions and the official images build it) runs this project's hot paths about a quarter
faster than one built from source without them (as pyenv builds it by default), and two such
interpreters are often both on a machine, the slower one first on ``PATH``. Which one is
which cannot be read from ``sysconfig``; a short loop of the kind of code the services run
(dict, attribute and call heavy) tells, best of five runs each.

Run: ``python3 tools/pick_python.py [-v]`` (``-v`` prints each candidate's time to stderr).
Prints ``python3`` when no candidate qualifies.
"""

from __future__ import annotations

import os
import subprocess
import sys

WANTED = sys.version_info[:2]
NAMES = ("python3", f"python3.{WANTED[1]}")

PROBE = r"""
import os, sys, sysconfig, time
if sys.version_info[:2] != (int(sys.argv[1]), int(sys.argv[2])) or sys.version_info < (3, 11):
    raise SystemExit(2)
import ensurepip, venv  # noqa: F401  (a Debian python3 without python3-venv has no ensurepip)
if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    raise SystemExit(3)

class Slot:
    __slots__ = ("a", "b")
    def __init__(self, a, b):
        self.a = a
        self.b = b

def work(n):
    d = {}
    out = 0
    for i in range(n):
        s = Slot(i, str(i))
        d[i & 127] = d.get(i & 127, 0) + s.a
        out += len(s.b)
    return out + len(d)

best = min(
    (lambda t: (work(60_000), time.perf_counter() - t)[1])(time.perf_counter())
    for _ in range(5))
print(sys.executable, best)
"""


def candidates() -> list[str]:
    seen: dict[str, None] = {}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        for name in NAMES:
            path = os.path.join(directory or ".", name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                seen.setdefault(path)
    return list(seen)


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    timed: dict[str, float] = {}
    for path in candidates():
        try:
            done = subprocess.run([path, "-c", PROBE, *map(str, WANTED)],
                                  capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode != 0 or not done.stdout.strip():
            continue
        executable, seconds = done.stdout.split()
        # The interpreter itself (a shim or a symlink on PATH names the same one).
        timed.setdefault(executable, float(seconds))
        if verbose:
            print(f"{path} -> {executable}: {float(seconds) * 1000:.1f} ms", file=sys.stderr)
    if not timed:
        print("python3")
        return 0
    print(min(timed, key=lambda k: timed[k]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
