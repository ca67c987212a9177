"""`reconciler explain` on the command line: the walkthrough served by the fake API server, and
the errors a user can make (each naming what to give instead)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reconciler import cli
from reconciler.api import (
    CLUSTER_QUEUES,
    DEVICE_CLASSES,
    EVENTS,
    JOBS,
    LOCAL_QUEUES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_FLAVORS,
    RESOURCE_SLICES,
    WORKLOADS,
)
from reconciler.api.resources import COHORTS, NODES
from tests.support.explain_state import NS, PENDING_MESSAGE, walkthrough_state
from tests.support.fake_apiserver import FakeApiServer, json_reply, page
from tests.support.kubeconfigs import token_kubeconfig

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "walkthrough" / "00-configuration.yaml"


def _builtins(items: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(msgspec.json.encode(item)) for item in items]


def _serve_walkthrough(fake: FakeApiServer) -> None:
    state = walkthrough_state("job", "kueue-dra-pending-b")
    assert state.job is not None
    fake.fallback(
        ("LIST", JOBS.item_path(NS, "kueue-dra-pending-b")), json_reply(200, _builtins([state.job])[0])
    )
    lists: dict[str, list[Any]] = {
        WORKLOADS.list_path(): state.workloads,
        CLUSTER_QUEUES.list_path(): state.cluster_queues,
        COHORTS.list_path(): state.cohorts,
        LOCAL_QUEUES.list_path(): state.local_queues,
        RESOURCE_FLAVORS.list_path(): state.flavors,
        NAMESPACES.list_path(): state.namespaces,
        RESOURCE_CLAIM_TEMPLATES.list_path(): state.templates,
        DEVICE_CLASSES.list_path(): state.device_classes,
        RESOURCE_CLAIMS.list_path(NS): [],
        EVENTS.list_path(NS): [],
        PODS.list_path(NS): [],
        RESOURCE_SLICES.list_path(): [],
        NODES.list_path(): [],
    }
    for path, items in lists.items():
        fake.fallback(("LIST", path), page(_builtins(items), 42))


@pytest.mark.asyncio
async def test_explains_job_b_in_words_and_json(
    fake: FakeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _serve_walkthrough(fake)
    kubeconfig = str(token_kubeconfig(fake.url, tmp_path / "kubeconfig"))
    args = ["explain", "job", f"{NS}/kueue-dra-pending-b", "--kubeconfig", kubeconfig]
    code = await asyncio.to_thread(cli.main, args)
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert out.startswith(
        f"Job {NS}/kueue-dra-pending-b is PENDING: it waits for quota in ClusterQueue p3-dra-cq"
    )
    assert f"when Job {NS}/kueue-dra-running-a finishes, it fits" in out
    code = await asyncio.to_thread(cli.main, [*args, "--config", str(CONFIG), "-o", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["state"] == "pending"
    assert PENDING_MESSAGE in data["summary"]
    assert data["notes"] == []  # the mappings came from --config


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["explain", "job", "no-slash"], "error: 'no-slash': give NAMESPACE/NAME"),
        (["explain", "job", "ns/x", "--config", "/nonexistent.yaml"], "error: "),
        (["explain", "job", "ns/x", "--request-timeout", "0"], "--request-timeout: give a positive number"),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(args) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_a_missing_kubeconfig_names_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["explain", "job", "ns/x", "--kubeconfig", str(tmp_path / "absent")])
    assert code == 1
    assert "(give --kubeconfig FILE or set KUBECONFIG)" in capsys.readouterr().err


def test_explain_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "explain" in capsys.readouterr().out
