"""A managed LeaderWorkerSet's pod templates may not change what decides their pods' quota; a
refusal names each changed part with its new value, as Kueue v0.18.1 does (not `Invalid value: ""`)."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest

from reconciler.admission.review import AdmissionRequest, GroupVersionResource
from reconciler.api.lws import LeaderWorkerSet
from reconciler.integrations.lws.webhook import validate_lws_update
from reconciler.webhook.handlers import handle, routes
from tests.support.lws import LWS_POLICY, lws_body, stored_lws

TEMPLATES = "spec.leaderWorkerTemplate"


def _lws(body: dict[str, Any]) -> LeaderWorkerSet:
    return msgspec.json.decode(msgspec.json.encode(body), type=LeaderWorkerSet)


def _refusals(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate_lws_update(_lws(new), _lws(old), LWS_POLICY)]


def test_a_changed_leader_template_is_named_with_its_new_value() -> None:
    old = stored_lws(lws_body("serve"))
    new = copy.deepcopy(old)
    leader = new["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    leader["containers"][0]["resources"]["requests"]["cpu"] = "2"
    leader["containers"][0]["image"] = "busybox:2"  # not part of the shape: allowed
    new["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] = {"pool": "b"}
    assert _refusals(new, old) == [
        f'{TEMPLATES}.leaderTemplate.spec.containers[0].resources.requests: Invalid value: {{"cpu":"2"}}: '
        "field is immutable",
        f'{TEMPLATES}.workerTemplate.spec.nodeSelector: Invalid value: {{"pool":"b"}}: field is immutable',
    ]


def test_a_container_added_shows_the_new_containers() -> None:
    old = stored_lws(lws_body("serve"))
    new = copy.deepcopy(old)
    leader = new["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    leader["containers"].append({"name": "side", "image": "busybox"})
    (refusal,) = _refusals(new, old)
    assert refusal == (
        f"{TEMPLATES}.leaderTemplate.spec.containers: Invalid value: "
        '[{"ports":null,"resources":{"requests":{"cpu":"1"}}},{"ports":null,"resources":{"requests":null}}]: '
        "field is immutable"
    )


def test_a_leader_template_removed_or_added_shows_the_new_one() -> None:
    old = stored_lws(lws_body("serve"))
    new = copy.deepcopy(old)
    added = new["spec"]["leaderWorkerTemplate"].pop("leaderTemplate")
    assert _refusals(new, old) == [f"{TEMPLATES}.leaderTemplate: Invalid value: null: field is immutable"]
    shown = json.dumps(added, sort_keys=True, separators=(",", ":"))
    assert _refusals(old, new) == [f"{TEMPLATES}.leaderTemplate: Invalid value: {shown}: field is immutable"]


@pytest.mark.asyncio
async def test_the_elastic_job_annotation_is_refused_by_name_as_kueue_refuses_it() -> None:
    """Kueue v0.18.1's LeaderWorkerSet webhook refuses kueue.x-k8s.io/elastic-job: "true" (no
    elastic LeaderWorkerSets); so does this one, rather than accepting and ignoring it."""
    route = next(r for r in routes() if r.name == "vleaderworkerset.kb.io")
    body = lws_body("set")
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    request = AdmissionRequest(
        uid="u",
        resource=GroupVersionResource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
        operation="CREATE",
        namespace="ns",
        object=msgspec.Raw(msgspec.json.encode(body)),
    )
    verdict = await handle(route, request, LWS_POLICY, None)  # type: ignore[arg-type]
    assert not verdict.allowed
    assert verdict.message == (
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: elastic job is not supported for "
        '"leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"'
    )
