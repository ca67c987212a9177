"""The walkthrough, items 1 to 6, against the controller running on the test-bed.

The manifests are applied verbatim from examples/walkthrough (the seed's own
copies); the controller runs as `reconciler run` in a child process. The steps
(`walkthrough_items_1_to_6`, `cleanup_walkthrough`) are in
e2e/support/walkthrough_steps.py: the deployment tests run them too (the
controller as the manifests' ServiceAccount, scraped by Prometheus).
"""

from __future__ import annotations

import pytest

from e2e.support.deploy import ControllerProcess, load_documents
from e2e.support.walkthrough_steps import EXAMPLES, cleanup_walkthrough, walkthrough_items_1_to_6
from e2e.testbed import KubeClient, Testbed
from e2e.testbed.scenario import single_gpu_claim_template

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


@pytest.mark.asyncio
async def test_walkthrough_items_1_to_6(controller: ControllerProcess, testbed: Testbed) -> None:
    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        try:
            await walkthrough_items_1_to_6(kube)
        except BaseException:
            print(controller.log_tail(60))
            raise
        finally:
            await cleanup_walkthrough(kube)


def test_the_single_gpu_claim_template_is_the_walkthroughs() -> None:
    """The e2e tests build the walkthrough's ResourceClaimTemplate instead of reading it."""
    (example,) = load_documents(EXAMPLES / "20-resourceclaimtemplate.yaml")
    assert single_gpu_claim_template(example["metadata"]["namespace"]) == example
