"""The walkthrough, items 1 to 6, with the controller running in its image under Docker.

The image is built from the repository's Dockerfile by e2e/build-image.sh (on a base of
Debian's python3, `--build-arg PYTHON_IMAGE`, since no registry is reachable here) and run
as the Deployment runs it: read-only root filesystem, uid 65532, no capabilities, no
privilege escalation; host network to reach the test-bed on 127.0.0.1. The container must
not be able to write anywhere, must serve /metrics while job B waits, and must exit 0 on
SIGTERM. Without Docker the tests fail (build_image says why); they never skip.
"""

from __future__ import annotations

import asyncio
import errno
import json
from collections.abc import Iterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.support.container import (
    IMAGE_GID,
    IMAGE_UID,
    ControllerContainer,
    build_image,
    docker,
    remove_leftovers,
)
from e2e.support.deploy import ROOT, install_crds
from e2e.support.walkthrough_steps import cleanup_walkthrough, walkthrough_items_1_to_6
from e2e.testbed import KubeClient, Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(1500)]

# Tries to create a file in each directory and prints the errno names, one per line.
WRITE_PROBE = """
import errno, os, sys
for d in sys.argv[1:]:
    try:
        with open(os.path.join(d, ".write-probe"), "w"):
            pass
        print(d, "written")
    except OSError as e:
        print(d, errno.errorcode[e.errno])
"""


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


@pytest.fixture(scope="module")
def container(
    image: str, testbed: Testbed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControllerContainer]:
    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    remove_leftovers()
    running = ControllerContainer(
        image,
        ROOT / "examples/walkthrough/00-configuration.yaml",
        testbed.kubeconfig,
        tmp_path_factory.mktemp("container"),
    )
    running.start()
    try:
        running.wait_ready()
        yield running
        code = running.stop()
        assert code == 0, (
            f"the container did not stop cleanly on SIGTERM (exit {code}):\n{running.log_tail(30)}"
        )
    finally:
        running.remove()


def test_the_image_runs_as_65532_by_itself(image: str) -> None:
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["User"] == f"{IMAGE_UID}:{IMAGE_GID}"
    assert config["Entrypoint"] == ["reconciler"]
    assert config["Cmd"][:3] == ["run", "--config", "/etc/dra-quota/config.yaml"]


def test_the_container_is_unprivileged_and_cannot_write(container: ControllerContainer) -> None:
    host = container.inspect()["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["NetworkMode"] == "host"

    # The controller's own process, as the kernel sees it.
    status = container.exec("cat", "/proc/1/status")
    assert status.returncode == 0, status.stderr
    fields = dict(line.split(":", 1) for line in status.stdout.splitlines() if ":" in line)
    assert fields["Uid"].split() == [str(IMAGE_UID)] * 4
    assert fields["Gid"].split() == [str(IMAGE_GID)] * 4
    assert int(fields["CapEff"], 16) == 0
    assert int(fields["CapPrm"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    cmdline = container.exec("cat", "/proc/1/cmdline").stdout.split("\0")
    assert cmdline[1:3] == ["/opt/venv/bin/reconciler", "run"]

    # Nowhere to write: not /, not /tmp, not the venv, not the mounted configuration.
    places = ["/", "/tmp", "/opt/venv", "/etc/dra-quota", "/var/tmp"]
    probe = container.exec("python", "-c", WRITE_PROBE, *places)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [
        word for place in places for word in (place, errno.errorcode[errno.EROFS])
    ]


@pytest.mark.asyncio
async def test_walkthrough_items_1_to_6_in_the_container(
    container: ControllerContainer, testbed: Testbed
) -> None:
    # Per metric, the sum over p3-dra-cq's series (they also carry status and role labels).
    scraped: dict[str, float] = {}

    async def scrape_while_b_waits() -> None:
        url = f"http://127.0.0.1:{container.metrics_port}/metrics"
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.get(url) as resp,
        ):
            assert resp.status == 200
            text = await resp.text()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.labels.get("cluster_queue") == "p3-dra-cq":
                    scraped[sample.name] = scraped.get(sample.name, 0.0) + sample.value

    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        try:
            await walkthrough_items_1_to_6(kube, while_b_waits=scrape_while_b_waits)
        except BaseException:
            print(container.log_tail(60))
            raise
        finally:
            await cleanup_walkthrough(kube)

    assert scraped["kueue_admitted_active_workloads"] == 1, scraped
    assert scraped["kueue_pending_workloads"] == 1, scraped
    assert container.running()
    # Its log is JSON lines, as --log-format json promises, and it logged no error.
    records = [json.loads(line) for line in container.logs().splitlines() if line.strip()]
    assert records
    assert [r for r in records if r.get("level") in ("error", "critical")] == []
