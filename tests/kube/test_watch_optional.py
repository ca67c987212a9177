"""An optional collection (a job kind whose CRD may not be installed, e.g. JobSets): a list
answered 404 is an empty, complete list, so the controller's other kinds are not held up; the
list is tried again and the objects appear once the CRD is installed. A kind that is not
optional stays unsynced on a 404."""

from __future__ import annotations

import pytest
from reconciler.api import Pod
from reconciler.kube import KubeClient
from structlog.testing import capture_logs

from tests.support.fake_apiserver import FakeApiServer
from tests.support.fake_apiserver import obj
from tests.support.fake_apiserver import page
from tests.support.fake_apiserver import raw_reply
from tests.support.informers import HANG
from tests.support.informers import LIST
from tests.support.informers import WATCH
from tests.support.informers import Recorder
from tests.support.informers import make
from tests.support.informers import running
from tests.support.informers import until

NOT_SERVED = raw_reply(404, b"404 page not found")


@pytest.mark.asyncio
async def test_a_collection_not_served_yet_is_empty_and_synced_then_appears(
    fake: FakeApiServer, client: KubeClient
) -> None:
    fake.script(LIST, NOT_SERVED, NOT_SERVED, page([obj("a", 5)], rv=5))
    fake.fallback(WATCH, HANG)
    recorder = Recorder()
    informer = make(client, recorder, Pod, optional=True)
    contact = informer.last_contact_monotonic
    with capture_logs() as logs:
        async with running(informer):
            await until(lambda: informer.synced)
            # The server answers: live for the liveness probe, though there is nothing to watch.
            assert informer.last_contact_monotonic > contact
            await until(lambda: recorder.count("ADDED") == 1)
    assert recorder.summary() == [("SYNCED", "", ""), ("ADDED", "a", "5"), ("SYNCED", "", "")]
    warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert warnings == [
        "pods.core is not served (is its CRD installed?): none are seen until it is; "
        "looking again after a pause"
    ]
    assert any(e["event"] == "pods.core is served now" for e in logs)


@pytest.mark.asyncio
async def test_a_kind_that_must_be_served_stays_unsynced(fake: FakeApiServer, client: KubeClient) -> None:
    fake.fallback(LIST, NOT_SERVED)
    recorder = Recorder()
    informer = make(client, recorder, Pod)
    async with running(informer):
        await until(lambda: len(fake.recorded("GET")) >= 3)
    assert not informer.synced
    assert recorder.events == []
