"""tools/pick_python.py: the interpreter ``make venv`` builds the venv from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "pick_python.py"


def pick(path: str) -> str:
    done = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True,
                          check=True, timeout=120, env={**os.environ, "PATH": path})
    return done.stdout.strip()


def test_it_picks_an_interpreter_of_its_own_version(tmp_path: Path) -> None:
    """With this interpreter alone on PATH it is the one picked (the suite's interpreter
    can make a venv and has its headers: the compiled core was built against them)."""
    (tmp_path / "python3").symlink_to(sys.executable)
    chosen = pick(str(tmp_path))
    assert chosen != "python3" and Path(chosen).exists()
    version = subprocess.run([chosen, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == str(tuple(sys.version_info[:2]))


def test_a_candidate_whose_probe_fails_is_passed_over(tmp_path: Path) -> None:
    """A python3 that fails, and a python3.X whose probe exits non-zero (as it does on
    another version, without venv or without headers) after printing, are never picked:
    with nothing else on PATH the fallback ``python3`` is printed."""
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    other = tmp_path / f"python3.{sys.version_info[1]}"
    other.write_text("#!/bin/sh\necho /elsewhere/python 0.001\nexit 2\n")
    other.chmod(0o755)
    assert pick(str(tmp_path)) == "python3"
