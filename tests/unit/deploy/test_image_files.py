"""What each service's image holds, file by file (issue 29: a dishonest test dealer shipped in
the dealer's image, reachable by an environment variable). No Docker engine is needed: the
list is computed as ``docker build`` would make it from the repository root, every ``COPY``
line's sources expanded to files, less what the root ``.dockerignore`` excludes. A test-only
module in that list fails the test: anything of the harness (``studtest``, the campaigns, the
tests, the benches, the simulator), the rigged dealer's modules by name, and any Python
module whose docstring says it is TEST ONLY."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILES = sorted(ROOT.glob("services/*/Dockerfile"))
HARNESS = ("studtest", "campaigns", "tests", "bench", "sim", "tools")
"""Top-level directories of test and development support: never in an image."""
TEST_ONLY_MODULES = ("corruption", "stacking", "rigged_dealer")
"""The rigged dealer's modules (now ``studtest/rigged_dealer.py``), under any directory."""


def _pattern(glob: str) -> re.Pattern[str]:
    """A ``.dockerignore`` pattern (Go's filepath.Match plus ``**``) as a regex."""
    out, i = "", 0
    while i < len(glob):
        if glob.startswith("**", i):
            out += ".*"
            i += 2
            if glob.startswith("/", i):
                out, i = out[:-2] + "(?:.*/)?", i + 1
            continue
        char = glob[i]
        out += {"*": "[^/]*", "?": "[^/]"}.get(char, re.escape(char))
        i += 1
    return re.compile(out)


def ignore_rules(root: Path = ROOT) -> list[tuple[bool, re.Pattern[str]]]:
    """The root ``.dockerignore`` as (exception, pattern) rules, in order."""
    path = root / ".dockerignore"
    rules = []
    for line in (path.read_text().splitlines() if path.exists() else []):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        glob = line.removeprefix("!").strip().strip("/")
        rules.append((exception, _pattern(glob)))
    return rules


def is_ignored(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path, or one of its parent directories,
    decides."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for exception, pattern in rules:
        if any(pattern.fullmatch(p) for p in prefixes):
            ignored = not exception
    return ignored


def copy_sources(dockerfile: Path) -> list[str]:
    """The build-context sources of every ``COPY`` line (not ``COPY --from``: another
    stage's files), continuation lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    sources = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].upper() != "COPY":
            continue
        flags = [w for w in words[1:] if w.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            continue
        sources.extend(w for w in words[1:-1] if not w.startswith("--"))
    return sources


def image_files(dockerfile: Path, root: Path = ROOT) -> set[str]:
    """Every file (repository-relative) the Dockerfile's COPY lines put in the image."""
    rules = ignore_rules(root)
    out: set[str] = set()
    for source in copy_sources(dockerfile):
        matches = sorted(root.glob(source)) if any(c in source for c in "*?[") else [
            root / source]
        assert matches and all(m.exists() for m in matches), f"{dockerfile}: no {source}"
        for match in matches:
            files = [match] if match.is_file() else [p for p in match.rglob("*")
                                                      if p.is_file()]
            out |= {rel for f in files
                    if not is_ignored(rel := f.relative_to(root).as_posix(), rules)}
    return out


def says_test_only(path: Path) -> bool:
    """A Python module whose docstring begins ``TEST ONLY``."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    except (SyntaxError, UnicodeDecodeError):
        return False
    return doc.lstrip().upper().startswith("TEST ONLY")


def why_test_only(rel: str, root: Path = ROOT) -> str | None:
    """Why ``rel`` is a test-only file (None when it is not)."""
    parts = rel.split("/")
    if parts[0] in HARNESS:
        return f"under {parts[0]}/"
    stem = parts[-1].split(".")[0]
    if stem in TEST_ONLY_MODULES:
        return f"the rigged dealer's {stem}"
    if rel.endswith(".py") and says_test_only(root / rel):
        return "its docstring says TEST ONLY"
    return None


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_no_test_only_module_is_in_an_image(dockerfile: Path) -> None:
    files = image_files(dockerfile)
    service = dockerfile.parent.name
    assert f"services/{service}/__main__.py" in files or not (
        ROOT / "services" / service / "__main__.py").exists()
    found = {rel: why for rel in sorted(files) if (why := why_test_only(rel)) is not None}
    assert found == {}


def test_every_service_has_its_image_checked() -> None:
    assert {p.parent.name for p in DOCKERFILES} >= {"dealer", "table", "wallet",
                                                   "tournament", "archiver"}


def test_the_file_list_sees_what_it_must_refuse(tmp_path: Path) -> None:
    """The list is not blind: in a tree like the old one (the rigged dealer's modules in the
    service's package, a stale compiled copy, the harness copied) each is found, and a
    ``.dockerignore`` rule (with an exception) is honoured."""
    dealer = tmp_path / "services" / "dealer"
    (dealer / "__pycache__").mkdir(parents=True)
    (tmp_path / "studtest").mkdir()
    (dealer / "__main__.py").write_text('"""python -m dealer"""\n')
    (dealer / "corruption.py").write_text('"""Corrupt."""\n')
    (dealer / "rig.py").write_text('"""TEST ONLY: queued decks."""\n')
    (dealer / "__pycache__" / "stacking.cpython-311.pyc").write_bytes(b"\0")
    (dealer / "notes.tmp").write_text("x")
    (dealer / "keep.tmp").write_text("x")
    (tmp_path / "studtest" / "__init__.py").write_text("")
    dockerfile = dealer / "Dockerfile"
    dockerfile.write_text("FROM python:3.11-slim\nCOPY services/dealer \\\n  ./services/dealer\n"
                          "COPY --from=build /x /x\nCOPY studtest ./studtest\n")
    (tmp_path / ".dockerignore").write_text("**/*.tmp\n!services/dealer/keep.tmp\n")
    files = image_files(dockerfile, tmp_path)
    assert "services/dealer/notes.tmp" not in files
    assert "services/dealer/keep.tmp" in files
    found = {rel: why for rel in files if (why := why_test_only(rel, tmp_path))}
    assert set(found) == {"services/dealer/corruption.py", "services/dealer/rig.py",
                          "services/dealer/__pycache__/stacking.cpython-311.pyc",
                          "studtest/__init__.py"}


def test_the_dockerignore_keeps_compiled_and_local_files_out() -> None:
    """A workstation's build context has ``__pycache__``, ``.venv`` and the like; none of
    it reaches an image (a stale compiled copy of a moved module would)."""
    rules = ignore_rules()
    for rel in ("services/dealer/__pycache__/corruption.cpython-311.pyc",
                "libs/studkit/x.pyc", ".venv/bin/python", ".git/HEAD", "protos/gen/stud/x.py",
                "services/dealer/.mypy_cache/x.json"):
        assert is_ignored(rel, rules), rel
    for rel in ("services/dealer/__main__.py", "libs/studkit/append.lua",
                "protos/stud/v1/dealer.proto", "pyproject.toml", "README.md"):
        assert not is_ignored(rel, rules), rel
