"""The controller's Deployment, named from the pod it runs in (runtime/loop/notices.py)."""

from __future__ import annotations

from reconciler.runtime.loop.notices import owning_deployment


def test_a_deployments_pod_names_it_by_its_template_hash() -> None:
    assert (
        owning_deployment("kueue-controller-manager-7d9f8c6b5-x2k4q", "7d9f8c6b5")
        == "kueue-controller-manager"
    )
    assert owning_deployment("a-1-b-1-zzzzz", "1") == "a-1-b"  # the last occurrence


def test_a_pod_without_a_deployment_names_none() -> None:
    assert owning_deployment("made-by-hand", "") is None  # no template hash: not a Deployment's
    assert owning_deployment("web-0", "abc") is None  # the hash is not in its name
    assert owning_deployment("abc-xyz12", "abc") is None  # nothing before the hash
    assert owning_deployment("d-abc-", "abc") is None  # nothing after it
