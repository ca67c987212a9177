"""The shipped CRDs serve Kueue's objects in v1beta1 beside v1beta2 (stored), as Kueue v0.18.1
does: every kind the conversion knows, through the controller's webhook where the versions differ;
and the v1beta1 schemas keep every field the conversion carries (the API server prunes what a
version's schema does not know, before and after a conversion)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.conversion import HUB, KINDS, SPOKE, convert
from reconciler.webhook.certmanager import CONVERSION_CRDS
from reconciler.webhook.server import CONVERSION_PATH
from tests.support.conversion_samples import objects, pruned_object

ROOT = Path(__file__).resolve().parents[2]
CRDS = {
    crd["spec"]["names"]["kind"]: crd
    for crd in (yaml.safe_load(p.read_text()) for p in sorted((ROOT / "manifests" / "crds").glob("*.yaml")))
}


def _service() -> dict[str, Any]:
    for doc in yaml.safe_load_all((ROOT / "manifests" / "webhook.yaml").read_text()):
        if doc and doc["kind"] == "Service":
            return {"name": doc["metadata"]["name"], "namespace": doc["metadata"]["namespace"]}
    raise AssertionError("manifests/webhook.yaml has no Service")


def _schema(kind: str, version: str) -> dict[str, Any]:
    versions = {v["name"]: v for v in CRDS[kind]["spec"]["versions"]}
    schema: dict[str, Any] = versions[version]["schema"]["openAPIV3Schema"]
    return schema


def test_every_shipped_crd_serves_both_versions_with_v1beta2_stored() -> None:
    assert set(CRDS) == set(KINDS)
    for kind, crd in CRDS.items():
        versions = [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]]
        assert versions == [("v1beta2", True, True), ("v1beta1", True, False)], kind


def test_kinds_that_differ_are_converted_by_the_controllers_webhook() -> None:
    same = KINDS["ResourceFlavor"][0]
    for kind, crd in CRDS.items():
        conversion = crd["spec"].get("conversion") or {"strategy": "None"}
        if KINDS[kind] == (same, same):
            assert conversion["strategy"] == "None", kind
            continue
        assert conversion["strategy"] == "Webhook", kind
        assert conversion["webhook"]["conversionReviewVersions"] == ["v1"]
        assert conversion["webhook"]["clientConfig"] == {"service": {**_service(), "path": CONVERSION_PATH}}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_v1beta1_object_keeps_through_both_schemas_what_v1beta2_keeps(kind: str) -> None:
    sample = objects("v1beta1")[kind]
    old, new = _schema(kind, "v1beta1"), _schema(kind, "v1beta2")
    through_the_server = pruned_object(convert(pruned_object(sample, old), HUB), new)
    assert through_the_server == pruned_object(convert(sample, HUB), new)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_stored_object_read_as_v1beta1_and_written_back_is_whole(kind: str) -> None:
    old, new = _schema(kind, "v1beta1"), _schema(kind, "v1beta2")
    stored = pruned_object(objects("v1beta2")[kind], new)
    read = pruned_object(convert(stored, SPOKE), old)
    assert pruned_object(convert(read, HUB), new) == stored


def test_a_schema_hole_would_be_seen() -> None:
    """Guard the guard: without priorityClassName in the v1beta1 schema, the priority is lost."""
    old = yaml.safe_load(yaml.safe_dump(_schema("Workload", "v1beta1")))
    del old["properties"]["spec"]["properties"]["priorityClassName"]
    sample = objects("v1beta1")["Workload"]
    new = _schema("Workload", "v1beta2")
    through_the_server = pruned_object(convert(pruned_object(sample, old), HUB), new)
    assert through_the_server != pruned_object(convert(sample, HUB), new)
    assert through_the_server["spec"]["priorityClassRef"]["name"] == ""


def test_the_certificate_manager_injects_into_exactly_the_converted_crds() -> None:
    converted = {
        crd["metadata"]["name"]
        for crd in CRDS.values()
        if (crd["spec"].get("conversion") or {}).get("strategy") == "Webhook"
    }
    assert set(CONVERSION_CRDS) == converted
