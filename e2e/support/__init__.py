"""What the controller's end-to-end tests (e2e/test_*.py) share, and bench/e2e_admission.py too.

deploy: CRDs, manifests, kustomize, ServiceAccount kubeconfigs, the controller as a child process.
helm: the cached helm on the chart (manifests/helm), isolated from the user's Helm.
walkthrough_steps: the walkthrough's items 1 to 6 as asserting steps, and their clean-up.
queues: a flavor, ClusterQueue, LocalQueue and claim template for one test namespace.
workloads: reading Workloads and Jobs (conditions, quota held, usage, owner; quantities).
flood: GPU node pools, their queues and floods of queue-labelled Jobs.
invariants: the monitor that watches quota and admissions while a flood runs.
final_state: every Job admitted-and-finished or pending with a reason, and waiting for it.
faults: a test-bed and controller of a test's own, and waits that fail with context.
"""

import pytest

# These helpers assert on the tests' behalf: pytest rewrites their asserts, as in a test module.
pytest.register_assert_rewrite("e2e.support.walkthrough_steps", "e2e.support.invariants")
