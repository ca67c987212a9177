"""`explain(state) -> Explanation`: why a Job or Workload is admitted, pending or stalled, in plain
words, from live objects only (no I/O).

The rules are the core's, not re-derived: the Workload a Job gets is `workload_for_job`'s,
its requests `compile_workload`'s, the verdict one scheduling cycle of the core's `Engine`
over every live Workload, the quota in use its ledger, the pods' readiness and claims
`podstatus`/`podsready`'s. What the controller itself wrote (the Workload's conditions) is
quoted beside it.
"""

from __future__ import annotations

from reconciler.api import LocalQueue, Workload, pod_template_view
from reconciler.core.model.workloads import QUEUE_NAME_LABEL, workload_for_object, workload_name_for_job
from reconciler.core.quota.cohorts import HAS_CYCLE
from reconciler.core.quota.inventory_admission import DEVICES_DO_NOT_COVER
from reconciler.core.scheduling.scheduler import NAMESPACE_MISMATCH, REASON_PENDING, Admit, Pending
from reconciler.core.status import AFS_CONDITION, condition
from reconciler.integrations.batchjob import job_workload_name, workload_for_job
from reconciler.integrations.prebuilt import multikueue_origin, prebuilt_name

from . import explanation as states
from .claims import learn_mappings, tell_claims
from .explanation import Explanation
from .fairness import cohort_shares
from .pods import event_lines, report_pods
from .quota import backing_off, holds_quota, is_finished, load_engine, quota_rows, to_fit
from .state import ClusterState

__all__ = ["explain", "find_workload"]

Key = tuple[str, str]
SHOWN_CONDITIONS = (
    "QuotaReserved",
    "Admitted",
    "Evicted",
    "Requeued",
    "PodsReady",
    "ClaimsAllocated",
    "Finished",
)
MAX_AHEAD = 5
_DEVICE_READS = ("ResourceSlices", "Nodes")


def _unread(what: str) -> str:
    return f"could not read {what}; the answer may be incomplete"


def find_workload(state: ClusterState) -> Workload | None:
    """The asked-for Workload, or the job's (by owner UID, else by the prebuilt Workload it names,
    else by Kueue's name for it)."""
    if state.workload is not None:
        return state.workload
    if state.job is not None:
        job, named = state.job.metadata, job_workload_name(state.job.metadata.name, state.job.metadata.uid)
    elif state.other is not None:
        job, integration = state.other.meta, state.other.integration
        group = integration.api_version.rpartition("/")[0]
        named = workload_name_for_job(job.name, job.uid, integration.kind, group)
    else:
        return None
    named = prebuilt_name(job) or named  # (a MultiKueue worker's job runs under the one it names)
    for workload in state.workloads:
        meta = workload.metadata
        if meta.namespace != job.namespace:
            continue
        if any(ref.uid == job.uid for ref in meta.owner_references) or meta.name == named:
            return workload
    return None


def _would_create(state: ClusterState) -> Workload:
    """The Workload the controller would create for the asked-for job (none exists yet)."""
    if state.job is not None:
        return workload_for_job(state.job)
    assert state.other is not None  # a Workload target is fetched or the fetch fails
    integration, meta = state.other.integration, state.other.meta
    return workload_for_object(
        meta, integration.api_version, integration.kind, integration.pod_sets(state.other.obj)
    )


def _controller_says(workload: Workload) -> list[str]:
    lines = []
    for kind in SHOWN_CONDITIONS:
        c = condition(workload.status.conditions, kind)
        if c is not None:
            lines.append(f"{c.type}={c.status} ({c.reason}): {c.message}")
    return lines


def explain(state: ClusterState) -> Explanation:
    subject = str(state.target)
    job_meta = state.job.metadata if state.job is not None else state.other.meta if state.other else None
    job_kind = "Job" if state.job is not None else state.other.integration.kind if state.other else ""
    if job_meta is not None and QUEUE_NAME_LABEL not in job_meta.labels:
        return Explanation(
            subject,
            states.NOT_MANAGED,
            f"the {job_kind} has no {QUEUE_NAME_LABEL} label, so the controller leaves it alone (it runs "
            f"as soon as it is not suspended); label it with a LocalQueue's name to queue it",
        )
    found = find_workload(state)
    workload = found if found is not None else _would_create(state)
    ex = Explanation(
        subject, states.PENDING, "", workload=f"{workload.metadata.namespace}/{workload.metadata.name}"
    )
    ex.controller_says = _controller_says(workload)
    ex.origin = multikueue_origin(workload)
    # ResourceSlices and Nodes matter only to a pending charge they size (see _pending).
    ex.notes = [_unread(what) for what in state.unreadable if not what.startswith(_DEVICE_READS)]
    _describe_claims(state, workload, ex)
    if found is None:
        ex.state = states.NO_WORKLOAD
        ex.workload = None
        ex.findings.append(
            f"the controller has not created a Workload for this {job_kind or 'Job'}: check that "
            "`reconciler run` is running and leads (its Lease), and its log; below is what it would decide"
        )
    if is_finished(workload):
        ex.state, ex.summary = states.FINISHED, "it has finished; its quota is released"
        return ex
    if not workload.spec.active:
        ex.state = states.DEACTIVATED
        requeues = workload.status.requeue_state.count if workload.status.requeue_state else None
        ex.summary = (
            "it is deactivated (spec.active is false)"
            + (f" after {requeues} requeue(s)" if requeues else "")
            + ": it stays out of every queue until spec.active is set to true again"
        )
        _add_events(state, workload, ex)
        return ex
    if holds_quota(workload):
        return _admitted(state, workload, ex)
    left = backing_off(workload, state.now)
    if left is not None:
        count = workload.status.requeue_state.count if workload.status.requeue_state else None
        evicted = condition(workload.status.conditions, "Evicted")
        why = f" ({evicted.reason}: {evicted.message})" if evicted is not None and evicted.reason else ""
        ex.state = states.BACKING_OFF
        ex.summary = (
            f"it was evicted{why} and requeued {count or 0} time(s); it waits out the requeue backoff "
            f"for {int(left)} s more, then it is queued for quota again"
        )
        _add_events(state, workload, ex)
        return ex
    _pending(state, workload, ex)
    _add_events(state, workload, ex)
    return ex


def _mappings(state: ClusterState) -> tuple[dict[str, str], bool]:
    if state.mappings is not None:
        return dict(state.mappings), False
    templates = {(t.metadata.namespace, t.metadata.name): t for t in state.templates}
    return learn_mappings(state.workloads, templates), True


def _describe_claims(state: ClusterState, workload: Workload, ex: Explanation) -> None:
    mappings, learned = _mappings(state)
    templates = {(t.metadata.namespace, t.metadata.name): t for t in state.templates}
    classes = (
        None
        if any("DeviceClass" in u for u in state.unreadable)
        else {d.metadata.name: d for d in state.device_classes}
    )
    claims = (
        None
        if any("ResourceClaim" in u and "Template" not in u for u in state.unreadable)
        else {(c.metadata.namespace, c.metadata.name): c for c in state.claims}
    )
    for pod_set in workload.spec.pod_sets:
        spec = pod_template_view(pod_set.template).spec
        story = tell_claims(
            spec, workload.metadata.namespace, templates, classes, mappings, learned=learned, claims=claims
        )
        ex.claims.extend(f"pod set {pod_set.name}, {line}" for line in story.lines)
        ex.findings.extend(story.findings)
    if learned and ex.claims:
        ex.notes.append(
            "DeviceClass mappings learned from what the controller charged on Workloads; "
            "pass --config FILE (the controller's Configuration) to use its deviceClassMappings"
        )


def _admitted(state: ClusterState, workload: Workload, ex: Explanation) -> Explanation:
    admission = workload.status.admission
    assert admission is not None
    ex.cluster_queue = admission.cluster_queue
    ex.local_queue = f"{workload.metadata.namespace}/{workload.spec.queue_name}"
    report = report_pods(
        workload, state.job, state.pods, state.claims, state.now, state.pods_ready, state.other
    )
    ex.pods = report.lines
    flavors = sorted({f for a in admission.pod_set_assignments for f in a.flavors.values()})
    where = f"in ClusterQueue {admission.cluster_queue}" + (
        f" (flavor {', '.join(flavors)})" if flavors else ""
    )
    if report.ready >= report.needed:
        ex.state, ex.summary = states.ADMITTED, f"it is admitted {where} and its pods are ready"
    elif report.stalled:
        ex.state = states.STALLED
        ex.summary = (
            f"it is admitted {where} but stalled: {report.ready} of {report.needed} pod(s) ready; "
            "the quota is held while the pods do not start"
        )
        ex.findings.extend(report.findings)
    else:
        ex.state = states.ADMITTED
        ex.summary = (
            f"it is admitted {where}; its pods are starting ({report.ready} of {report.needed} ready)"
        )
        ex.findings.extend(report.findings)
    _add_events(state, workload, ex)
    return ex


def _queue_findings(state: ClusterState, workload: Workload, ex: Explanation) -> str | None:
    """The LocalQueue -> ClusterQueue chain; returns the ClusterQueue's name when it exists."""
    namespace, queue = workload.metadata.namespace, workload.spec.queue_name
    ex.local_queue = f"{namespace}/{queue}"
    lq = next(
        (q for q in state.local_queues if (q.metadata.namespace, q.metadata.name) == (namespace, queue)), None
    )
    if lq is None:
        ex.findings.append(
            f"LocalQueue {namespace}/{queue} does not exist: create it (spec.clusterQueue naming a "
            f"ClusterQueue) or fix the {QUEUE_NAME_LABEL} label"
        )
        return None
    name = lq.spec.cluster_queue
    ex.cluster_queue = name
    ex.fair_sharing = _fair_sharing(lq)
    if not any(cq.metadata.name == name for cq in state.cluster_queues):
        ex.findings.append(
            f"ClusterQueue {name} (named by LocalQueue {namespace}/{queue}) does not exist: create it "
            "or point the LocalQueue at another"
        )
        return None
    return name


def _fair_sharing(lq: LocalQueue) -> str | None:
    """Admission fair sharing as the controller last wrote it on the LocalQueue: its score and
    place (this controller's condition), and Kueue's consumedResources."""
    ranked = condition(lq.status.conditions, AFS_CONDITION)
    fair = lq.status.fair_sharing
    afs = fair.admission_fair_sharing_status if fair is not None else None
    if ranked is None and afs is None:
        return None
    parts = [ranked.message] if ranked is not None and ranked.message else []
    if afs is not None:
        consumed = ", ".join(f"{q} {r}" for r, q in sorted(afs.consumed_resources.items())) or "nothing"
        parts.append(f"consumed {consumed} (as of {afs.last_update})")
    return "; ".join(parts)


def _pending(state: ClusterState, workload: Workload, ex: Explanation) -> None:
    cq_name = _queue_findings(state, workload, ex)
    if ex.workload is not None and condition(workload.status.conditions, "QuotaReserved") is None:
        ex.findings.append(
            "the controller has not decided on this Workload yet (no QuotaReserved condition): if that "
            "lasts, check that `reconciler run` is running and leads"
        )
    mappings, _ = _mappings(state)
    ledgered = load_engine(state, workload, mappings)
    engine = ledgered.engine
    if ledgered.compile_error is not None:
        ex.findings.append(f"its pod sets cannot be read: {ledgered.compile_error}")
    if ledgered.info is not None and any(ps.demanded for ps in ledgered.info.pod_sets):
        # allocationMode All or a device capacity: the published devices size the charge.
        ex.notes[:0] = [_unread(what) for what in state.unreadable if what.startswith(_DEVICE_READS)]
    model = engine.cache.cluster_queues.get(cq_name) if cq_name else None
    if cq_name and model is None:
        reason = engine.cache.broken_cluster_queues.get(cq_name, "")
        ex.findings.append(f"ClusterQueue {cq_name} cannot be used: {reason}")
    elif model is not None:
        status, reason, message = engine.cache.cluster_queue_active(model.name)
        if status != "True":
            fix = (
                "give one cohort of the cycle no spec.parentName (or a parent outside it)"
                if reason == HAS_CYCLE
                else "create the missing ResourceFlavors, or clear spec.stopPolicy"
            )
            ex.findings.append(
                f"ClusterQueue {model.name} is inactive ({reason}): {message} "
                f"Fix it ({fix}) and it admits again"
            )
    by_key = {(w.metadata.namespace, w.metadata.name): w for w in state.workloads}
    if model is not None and ledgered.info is not None and ledgered.info.problem is None:
        ex.quota, ex.holders, uncovered = quota_rows(ledgered, model, by_key)
        ex.findings.extend(uncovered)
        ex.to_fit = to_fit(ledgered, model, ex.holders)
    if model is not None and state.fair_sharing is not None:
        ex.cohort_shares = cohort_shares(engine, model.name)
    ex.ahead = [f"Workload {k[0]}/{k[1]}" for k in ledgered.ahead[:MAX_AHEAD]]
    if len(ledgered.ahead) > MAX_AHEAD:
        ex.ahead.append(f"and {len(ledgered.ahead) - MAX_AHEAD} more")
    decision = ledgered.decision
    reserved = condition(workload.status.conditions, "QuotaReserved")
    if isinstance(decision, Admit) and reserved is not None and DEVICES_DO_NOT_COVER in reserved.message:
        # deviceInventory Enforce: quota is not what holds it back (explain does not count devices).
        ex.summary = (
            f"it fits the quota of ClusterQueue {decision.cluster_queue} but waits for free devices "
            f"(deviceInventory mode Enforce): {reserved.message}"
        )
    elif isinstance(decision, Admit):
        ex.summary = (
            f"it fits now in ClusterQueue {decision.cluster_queue}: the controller admits it within "
            "seconds; if it stays pending, check that `reconciler run` is running and leads"
        )
    elif isinstance(decision, Pending):
        ex.summary = f"it waits ({decision.reason}): {decision.message}"
        if decision.message == NAMESPACE_MISMATCH:
            ex.findings.append(
                f"the namespaceSelector of ClusterQueue {decision.cluster_queue} does not match the labels "
                f"of namespace {workload.metadata.namespace}: label the namespace or widen the selector"
            )
        cycle = bool(model is not None and engine.cache.cycle_problem(model.name))
        quota_wait = (
            decision.reason == REASON_PENDING and decision.message != NAMESPACE_MISMATCH and not cycle
        )
        if quota_wait and ex.holders and ex.to_fit:
            holders = sorted({h.name for h in ex.holders})
            ex.summary = (
                f"it waits for quota in ClusterQueue {decision.cluster_queue}, held by {', '.join(holders)}: "
                f"{decision.message}"
            )
    elif ledgered.ahead and model is not None and model.strategy == "StrictFIFO":
        ex.summary = (
            f"it waits behind Workload {ledgered.ahead[0][0]}/{ledgered.ahead[0][1]}, the head of the "
            f"StrictFIFO ClusterQueue {model.name}, which does not fit yet"
        )
    else:
        ex.summary = "it waits: " + (ex.findings[0] if ex.findings else "no decision could be computed")


def _add_events(state: ClusterState, workload: Workload, ex: Explanation) -> None:
    names = {("Workload", workload.metadata.name)}
    if state.job is not None:
        names.add(("Job", state.job.metadata.name))
    if state.other is not None:
        names.add((state.other.integration.kind, state.other.meta.name))
    names |= {("Pod", p.metadata.name) for p in state.pods}
    ex.events = event_lines(state.events, names)
