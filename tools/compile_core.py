"""Build the compiled core: ``libs/rules`` compiled with mypyc into ``build/compiled``.

The pure-Python sources in ``libs/rules`` stay the reference; the build holds only extension
modules (one per compiled source, plus mypyc's shared runtime library) and a manifest of the
sources it was made from. ``make compiled`` runs this script when a C compiler is there and
writes a ``.pth`` into the venv that puts ``build/compiled`` ahead of ``libs`` on ``sys.path``
unless ``STUD_PURE=1``; ``rules/__init__.py`` (and ``rules/phh/__init__.py``) extend the
package's path with :func:`pkgutil.extend_path`, so a compiled module is found before its
source and a module left pure (:data:`PURE_ONLY`) is found in ``libs/rules``.

Run: ``.venv/bin/python tools/compile_core.py [--check]`` (``--check`` only says whether the
build is there and matches the sources: exit 0 if it does, 1 if not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "libs"
PACKAGE = SOURCES / "rules"
OUT = ROOT / "build" / "compiled"
MANIFEST = OUT / "MANIFEST.json"

PURE_ONLY = frozenset({
    # Package __init__ modules stay pure: they extend the package's path to the build.
    "rules/__init__.py",
    "rules/phh/__init__.py",
    # The frozen state values are copied without __init__ (object.__new__ and a twin of the
    # same layout that becomes the value, code generated with exec: rules._mutable), which
    # mypyc's native classes refuse. Left pure, they are ordinary Python classes that the
    # compiled modules use as they are. (The fold's mutable twins, rules._mutable, are
    # compiled: native classes there, read natively by the compiled evolve and rounds, and
    # copied into frozen values when frozen.)
    "rules/state.py",
    # The legal actions' values, built without __init__ (rules._mutable.maker) as the state
    # values are; rules.betting and rules.decide, which decide them, are compiled (they read
    # frozen hands only, a twin through rules.rounds' union, and a command's fields untyped
    # where they check them: compiled, a typed read would raise TypeError before the refusal).
    "rules/legal.py",
    # Checks and converts what it is given (a tuple for the rake, an int that is a bool):
    # compiled, its native __init__ refuses a wrong type before the check can say why.
    "rules/config.py",
    # Test support: tests and benchmarks subclass its TableDriver, and an interpreted class
    # cannot inherit from a compiled one.
    "rules/testing.py",
    # The values the fold and decide read most (events, commands): their attributes read
    # from interpreted code cost more on a compiled class than on a slotted one (the fold
    # measured about 10% slower with them compiled while it was pure); decide builds events
    # by rules._mutable.maker (a twin that becomes the value), which a native class refuses;
    # and a command's fields are checked by decide, where a native __init__ would refuse a
    # wrong type first. (rules/cards.py is compiled since issue 35: the fold and decide are
    # compiled, and Card's written __eq__ and __hash__ run natively where decide hashes
    # every known card at every street.)
    "rules/events.py",
    "rules/commands.py",
})
"""Sources (relative to ``libs``) that are never compiled."""


def sources() -> dict[str, str]:
    """Every source of the package (relative to ``libs``) -> its SHA-256."""
    return {
        path.relative_to(SOURCES).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def compiled_modules() -> list[str]:
    """The dotted names of the modules the build compiles."""
    return [name[:-3].replace("/", ".") for name in sources() if name not in PURE_ONLY]


def manifest() -> dict[str, object]:
    """What the build records: the sources, which are compiled, and the toolchain."""
    import mypy.version

    return {
        "sources": sources(),
        "compiled": compiled_modules(),
        "mypyc": mypy.version.__version__,
        "python": sys.version.split()[0],
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    }


def fresh() -> bool:
    """Whether ``build/compiled`` exists and was built from the sources as they are now."""
    try:
        recorded = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return False
    return bool(recorded == manifest())


def build() -> None:
    """Compile the package into a temporary directory, then replace ``build/compiled``."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    recorded = manifest()  # before compiling: a source changed meanwhile makes it stale
    paths = [str(SOURCES / name) for name in sources() if name not in PURE_ONLY]
    os.chdir(ROOT)  # mypyc names the modules from paths relative to here and MYPYPATH
    os.environ["MYPYPATH"] = str(SOURCES)
    with tempfile.TemporaryDirectory(prefix="stud-compile-") as work:
        staging = Path(work, "lib")
        extensions = mypycify(paths, opt_level="3", target_dir=str(Path(work, "c")),
                              strict_dunder_typing=False)
        distribution = Distribution({"name": "stud-hilo-core", "ext_modules": extensions})
        command = distribution.get_command_obj("build_ext")
        command.build_lib = str(staging)
        command.build_temp = str(Path(work, "o"))
        command.parallel = os.cpu_count() or 1
        distribution.run_command("build_ext")
        Path(staging, MANIFEST.name).write_text(json.dumps(recorded, indent=1) + "\n")
        if OUT.exists():
            shutil.rmtree(OUT)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), OUT)


PTH_NAME = "stud-hilo-compiled.pth"


def write_pth() -> Path:
    """Put ``build/compiled`` ahead of everything on this venv's ``sys.path`` unless
    ``STUD_PURE=1`` (a ``.pth`` line that starts with ``import`` is run at start-up)."""
    pth = Path(sysconfig.get_paths()["purelib"], PTH_NAME)
    pth.write_text(f'import os, sys; os.environ.get("STUD_PURE") == "1" '
                   f'or sys.path.insert(0, {str(OUT)!r})\n')
    return pth


def remove_pth() -> None:
    """The pure build only: no ``.pth``, no ``build/compiled``."""
    Path(sysconfig.get_paths()["purelib"], PTH_NAME).unlink(missing_ok=True)
    shutil.rmtree(OUT, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 0 if the build matches the sources, 1 if not")
    parser.add_argument("--remove", action="store_true",
                        help="remove the build and its .pth (back to the pure build)")
    args = parser.parse_args(argv)
    if args.check:
        return 0 if fresh() else 1
    if args.remove:
        remove_pth()
        print("compiled core: removed; the pure build")
        return 0
    if fresh():
        print(f"compiled core: up to date ({len(compiled_modules())} modules)")
    else:
        build()
        print(f"compiled core: built {len(compiled_modules())} modules into build/compiled")
    write_pth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
