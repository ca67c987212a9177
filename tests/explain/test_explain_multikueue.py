"""`reconciler explain` on a MultiKueue worker (issue 41): a Workload a manager created says so
(the origin label's value, the manager's `multiKueue.origin`), in words and in JSON; a Job that
names a prebuilt Workload is explained through that Workload, even before it adopted it."""

from __future__ import annotations

import dataclasses
import json

import msgspec

from reconciler.api import Job, Workload
from reconciler.explain.analyze import explain
from reconciler.explain.render import render_json, render_text
from reconciler.integrations.prebuilt import MULTIKUEUE_ORIGIN_LABEL, PREBUILT_WORKLOAD_KEY
from tests.support.explain_state import NS, decode, walkthrough_state, workload_of

A = "kueue-dra-running-a"


def _from_manager(workload: Workload, name: str) -> Workload:
    """The Workload as a manager made it on this worker: its own name, no owner, the origin."""
    body = msgspec.json.decode(msgspec.json.encode(workload))
    body["metadata"].update(name=name, ownerReferences=[], labels={MULTIKUEUE_ORIGIN_LABEL: "mk-east"})
    copied: Workload = decode(body, Workload)
    return copied


def test_a_workload_from_a_manager_names_the_manager() -> None:
    state = walkthrough_state("job", A)
    managers = _from_manager(workload_of(state, A), "a-mk1")
    state = dataclasses.replace(
        state,
        target=dataclasses.replace(state.target, kind="workload", name="a-mk1"),
        job=None,
        workload=managers,
        workloads=[
            w if w.metadata.name != workload_of(state, A).metadata.name else managers for w in state.workloads
        ],
    )
    ex = explain(state)
    assert ex.state == "admitted"
    assert ex.origin == "mk-east"
    assert "From:     MultiKueue manager 'mk-east' (kueue.x-k8s.io/multikueue-origin)" in render_text(ex)
    assert json.loads(render_json(ex))["origin"] == "mk-east"


def test_a_job_naming_a_prebuilt_workload_is_explained_through_it() -> None:
    state = walkthrough_state("job", A)
    own = workload_of(state, A)
    managers = _from_manager(own, "a-mk1")
    assert state.job is not None
    body = msgspec.json.decode(msgspec.json.encode(state.job))
    body["metadata"]["labels"][PREBUILT_WORKLOAD_KEY] = "a-mk1"
    job: Job = decode(body, Job)
    state = dataclasses.replace(
        state,
        job=job,
        workloads=[managers if w is own else w for w in state.workloads],
    )
    ex = explain(state)
    assert ex.workload == f"{NS}/a-mk1"
    assert ex.origin == "mk-east"
    assert ex.state == "admitted"


def test_a_workload_of_this_cluster_has_no_origin() -> None:
    ex = explain(walkthrough_state("job", A))
    assert ex.origin is None
    assert "MultiKueue" not in render_text(ex)
