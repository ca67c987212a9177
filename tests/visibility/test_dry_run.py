"""The dry run through the API (`POST .../namespaces/NS/whatifs`): the request checked field by
field, the answer shaped for the asker, and the server's refusals, over real TLS on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from reconciler.visibility.dryrun import DryRunAnswer, RequestError, answer_document, parse_request
from reconciler.visibility.server import DRY_RUN_BUSY, Published
from tests.support.visibility_server import serving

PATH = "/apis/whatif.dra-quota.dev/v1alpha1/namespaces/team-a/whatifs"


def job(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {}}


def what_if(*objects: Any, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "whatif.dra-quota.dev/v1alpha1",
        "kind": "WhatIf",
        "spec": {"objects": list(objects)},
    } | extra


def test_objects_take_the_paths_namespace_and_keep_the_rest() -> None:
    request, objects = parse_request(json.dumps(what_if(job("a"), job("b", "team-a"))).encode(), "team-a")
    assert [(o["metadata"]["name"], o["metadata"]["namespace"]) for o in objects] == [
        ("a", "team-a"),
        ("b", "team-a"),
    ]
    assert objects[0]["spec"] == {}
    assert request["kind"] == "WhatIf"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "the request body is not JSON"),
        (json.dumps({"kind": "Job"}).encode(), "apiVersion, kind: "),
        (json.dumps(what_if()).encode(), "spec.objects: give 1 to 100 objects (got 0)"),
        (json.dumps(what_if(job("a"), "x")).encode(), "spec.objects[1]: must be an object"),
        (
            json.dumps(what_if({"apiVersion": "v1", "metadata": {"name": "p"}})).encode(),
            "spec.objects[0].kind",
        ),
        (json.dumps(what_if({"apiVersion": "v1", "kind": "Pod", "metadata": {}})).encode(), ".metadata.name"),
        (
            json.dumps(what_if(job("a", "team-b"))).encode(),
            'spec.objects[0].metadata.namespace: "team-b": a WhatIf in namespace "team-a" asks about that',
        ),
        (
            json.dumps(what_if(job("a"), metadata={"namespace": "team-b"})).encode(),
            'metadata.namespace: "team-b" is not the namespace of the path',
        ),
    ],
)
def test_a_bad_request_names_the_field(body: bytes, message: str) -> None:
    with pytest.raises(RequestError) as refused:
        parse_request(body, "team-a")
    assert message in str(refused.value)


def test_victims_of_other_namespaces_are_counted_not_named() -> None:
    verdict = {
        "namespace": "team-a",
        "workload": "job-a-1",
        "admitted": True,
        "cluster_queue": "cq",
        "flavors": {"main": {"nvidia.com/gpu": "t4"}},
        "waiting": "",
        "preempts": [
            {"namespace": "team-a", "name": "old", "reason": "InClusterQueue", "message": "m1"},
            {"namespace": "team-b", "name": "secret", "reason": "InCohortReclamation", "message": "m2"},
        ],
    }
    document = answer_document(what_if(job("a")), "team-a", DryRunAnswer([verdict], ["w"]))
    (shown,) = document["status"]["workloads"]
    assert shown["clusterQueue"] == "cq"
    assert shown["admitted"] is True
    assert [(p["namespace"], p["name"], p["reason"]) for p in shown["preempts"]] == [
        ("team-a", "old", "InClusterQueue"),
        ("", "", "InCohortReclamation"),
    ]
    assert "secret" not in json.dumps(document)
    assert document["status"]["warnings"] == ["w"]
    assert document["metadata"]["namespace"] == "team-a"


class _Runner:
    """Answers after `release` is set, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, list[str]]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.entered = asyncio.Event()

    async def __call__(self, namespace: str, objects: Sequence[Mapping[str, Any]]) -> DryRunAnswer:
        self.asked.append((namespace, [o["metadata"]["name"] for o in objects]))
        self.entered.set()
        await self.release.wait()
        verdict = {"namespace": namespace, "workload": "w", "admitted": False, "waiting": "full"}
        return DryRunAnswer([verdict], [])


def test_the_server_answers_201_with_the_verdicts_and_refuses_plainly(tmp_path: Path) -> None:
    runner = _Runner()

    async def scenario() -> list[tuple[int, dict[str, Any], dict[str, str]]]:
        async with serving(tmp_path, Published(dry_run=runner)) as asker:
            answers = [
                await asker.ask("alice", PATH, "POST", what_if(job("a"))),
                await asker.ask("nobody", PATH, "POST", what_if(job("a"))),
                await asker.ask("alice", PATH, "POST", what_if(job("a", "team-b"))),
                await asker.ask("alice", PATH, "GET"),
            ]
            runner.release.clear()  # the next dry run holds the replica's one slot
            runner.entered.clear()
            first = asyncio.create_task(asker.ask("alice", PATH, "POST", what_if(job("slow"))))
            await runner.entered.wait()
            answers.append(await asker.ask("alice", PATH, "POST", what_if(job("b"))))
            runner.release.set()
            answers.append(await first)
            return answers

    ok, denied, invalid, get, busy, slow = asyncio.run(scenario())
    assert ok[0] == 201
    assert ok[1]["kind"] == "WhatIf"
    assert ok[1]["status"]["workloads"][0]["waiting"] == "full"
    assert denied[0] == 403
    assert (
        'User "nobody" cannot create resource "whatifs" in API group "whatif.dra-quota.dev" in the '
        'namespace "team-a"' in denied[1]["message"]
    )
    assert (invalid[0], invalid[1]["reason"]) == (422, "Invalid")
    assert get[0] == 405
    assert (busy[0], busy[1]["message"], busy[2]["Retry-After"]) == (429, DRY_RUN_BUSY, "2")
    assert slow[0] == 201
    assert runner.asked == [("team-a", ["a"]), ("team-a", ["slow"])]  # nobody else got through


def test_without_a_dry_run_the_server_says_so(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, dict[str, Any], dict[str, str]]:
        async with serving(tmp_path, Published()) as asker:
            return await asker.ask("alice", PATH, "POST", what_if(job("a")))

    status, body, _ = asyncio.run(scenario())
    assert (status, body["message"]) == (503, "this controller does not serve dry runs")
