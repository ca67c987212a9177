"""The Dockerfile and the manifests, checked statically (no Docker, no cluster).

What a container runtime or the API server would need a real build for is in
e2e/test_image_contents.py (the wheel installed and run from a read-only venv)
and e2e/test_deploy.py (the manifests rendered by kustomize and applied).
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deploy_files import BUILD_WHEEL, COMPILE_VENV, CONTRACT_ARGS, INSTALL_LOCKED, INSTALL_WHEEL

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
MANIFESTS = ROOT / "manifests"
METRICS_READER = "dra-quota-reconciler-metrics-reader"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, instructions joined across line continuations."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        logical.append(current + line)
        current = ""
    assert not current, "the Dockerfile ends inside a line continuation"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            assert len(parts) in (1, 3), f"unexpected FROM line: {line}"
            stages.append(Stage(base=parts[0], name=name))
        elif not stages:
            assert keyword == "ARG", f"only ARG may come before the first FROM, got: {line}"
            key, _, default = rest.partition("=")
            args[key] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


def resolve(image: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], image)


def pinned_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None."""
    if "@sha256:" in image:
        return None
    _, _, tag = image.rpartition(":")
    if "/" in tag or not tag or tag == image:
        return f"{image}: no tag"
    if tag == "latest":
        return f"{image}: the tag latest"
    if not re.search(r"\d", tag):
        return f"{image}: tag {tag!r} names no version"
    return None


def user_problem(user: str) -> str | None:
    """Why a USER value is not a numeric non-root uid (and gid), or None.

    Kubernetes' runAsNonRoot can only verify a numeric uid."""
    for part in user.split(":"):
        if not part.isdigit():
            return f"USER {user!r}: not numeric"
        if int(part) == 0:
            return f"USER {user!r}: root"
    return None


@pytest.mark.parametrize(
    ("user", "ok"),
    [("65532:65532", True), ("1000", True), ("0", False), ("nobody", False), ("65532:0", False)],
)
def test_user_check_can_fail(user: str, ok: bool) -> None:
    assert (user_problem(user) is None) is ok


def exec_form(value: str) -> list[str]:
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"not the exec (JSON) form: {value}"
    assert all(isinstance(p, str) for p in parsed), value
    return parsed


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_multi_stage_build_installs_the_wheel_into_a_venv(
    dockerfile: tuple[dict[str, str], list[Stage]],
) -> None:
    _, stages = dockerfile
    assert len(stages) >= 2
    names = [s.name for s in stages[:-1]]
    assert all(names), "every stage but the last is named"
    builder, *_, final = stages
    assert any(BUILD_WHEEL in run for run in builder.args("RUN"))
    runs = [run for stage in stages[1:-1] for run in stage.args("RUN")]
    assert any(INSTALL_WHEEL in run for run in runs)
    # The locked dependencies go in before the wheel, which then resolves nothing.
    (install,) = [run for run in runs if INSTALL_WHEEL in run]
    assert INSTALL_LOCKED in install
    assert install.index(INSTALL_LOCKED) < install.index(INSTALL_WHEEL)
    assert any(COMPILE_VENV in run for run in runs)
    # The final stage takes the venv from an earlier stage and nothing from the build context.
    copies = final.args("COPY")
    assert copies
    assert all(c.startswith("--from=") for c in copies)
    assert all(c.split()[0].removeprefix("--from=") in names for c in copies)
    assert final.args("ADD") == []


def test_images_are_pinned(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    args, stages = dockerfile
    names = {s.name for s in stages}
    for stage in stages:
        if stage.base in names:
            continue
        problem = pinned_problem(resolve(stage.base, args))
        assert problem is None, problem


@pytest.mark.parametrize(
    ("image", "ok"),
    [
        ("python:3.11.11-slim-bookworm", True),
        ("python@sha256:" + "0" * 64, True),
        ("python:latest", False),
        ("python", False),
        ("registry:5000/python", False),
        ("python:slim", False),
    ],
)
def test_pinned_check_can_fail(image: str, ok: bool) -> None:
    assert (pinned_problem(image) is None) is ok


def test_runs_non_root_without_writes(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    final = stages[-1]
    (user,) = final.args("USER")
    assert user_problem(user) is None, user_problem(user)
    env = " ".join(final.args("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "/opt/venv/bin" in env
    # The stdlib is compiled in the final stage: the base image ships it without bytecode.
    assert any("compileall" in run for run in final.args("RUN"))
    # No pip cache is left in any stage that installs.
    for stage in stages[:-1]:
        if any("pip " in run for run in stage.args("RUN")):
            assert "PIP_NO_CACHE_DIR=1" in " ".join(stage.args("ENV")), stage.name


def test_entrypoint_and_command(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    final = stages[-1]
    (entrypoint,) = final.args("ENTRYPOINT")
    assert exec_form(entrypoint) == ["reconciler"]
    (cmd,) = final.args("CMD")
    command = exec_form(cmd)
    # Standalone by default; the Deployment adds leader election (it knows the namespace).
    assert command == [a for a in CONTRACT_ARGS if "leader-el" not in a and a != "$(POD_NAMESPACE)"]
    exposed = {int(p) for line in final.args("EXPOSE") for p in line.split()}
    assert exposed == {8080, 8081, 8082, 9443}  # metrics, health probes, visibility API, admission webhooks


def test_every_port_the_deployment_serves_is_exposed(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    _, stages = dockerfile
    exposed = {int(p) for line in stages[-1].args("EXPOSE") for p in line.split()}
    (container,) = _deployment()["spec"]["template"]["spec"]["containers"]
    served = {port["containerPort"] for port in container["ports"]}
    assert served == {8080, 8081, 8082, 9443}
    assert served <= exposed, f"ports the Deployment serves but the image does not EXPOSE: {served - exposed}"


def test_dockerignore_sends_only_the_package_and_its_lock() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    included = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert included == {"pyproject.toml", "README.md", "requirements.lock", "reconciler"}
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    sources = {
        part.rstrip("/")
        for stage in stages
        for copy in stage.args("COPY")
        if not copy.startswith("--from=")
        for part in shlex.split(copy)[:-1]
    }
    assert sources <= included, f"COPY of files the build context leaves out: {sources - included}"


# --- manifests -----------------------------------------------------------------------------------


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _deployment() -> dict[str, Any]:
    (deployment,) = _documents(MANIFESTS / "deployment.yaml")
    return deployment


def test_deployment_follows_the_contract() -> None:
    spec = _deployment()["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == CONTRACT_ARGS
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "POD_TEMPLATE_HASH": "metadata.labels['pod-template-hash']",
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081, "visibility": 8082, "webhook": 9443}
    # /metrics is HTTPS behind token review (the default: no --metrics-secure=false); the kubelet's
    # probes send no token, so they stay plain HTTP on their own port.
    assert not any(a.startswith("--metrics-secure") for a in container["args"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert set(container["resources"]) == {"requests", "limits"}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/dra-quota"] == "config"


def test_deployment_is_restricted() -> None:
    pod = _deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    # The only writable places are emptyDirs: /tmp, and the webhook's certificate directory.
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = [m for m in container["volumeMounts"] if not m.get("readOnly")]
    assert [(m["mountPath"], "emptyDir" in volumes[m["name"]]) for m in writable] == [
        ("/tmp", True),
        ("/tmp/k8s-webhook-server/serving-certs", True),
    ]


def test_image_tag_is_the_package_version() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (image,) = kustomization["images"]
    assert image == {
        "name": _deployment()["spec"]["template"]["spec"]["containers"][0]["image"],
        "newTag": version,
    }


def test_shipped_configuration_loads() -> None:
    from reconciler.config import load_config

    config = load_config(str(MANIFESTS / "config" / "configuration.yaml"))
    assert config.wait_for_pods_ready is not None
    mappings = {m.name: m.device_class_names for m in config.device_class_mappings}
    assert mappings == {"nvidia.com/gpu": ("gpu.nvidia.com",)}


AUTH_READER = "extension-apiserver-authentication-reader"


def test_one_namespace_everywhere() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    namespace = kustomization["namespace"]
    (ns,) = _documents(MANIFESTS / "namespace.yaml")
    assert ns["metadata"]["name"] == namespace
    for path in MANIFESTS.glob("**/*.yaml"):
        if "templates" in path.relative_to(MANIFESTS).parts:
            continue  # Helm templates: e2e/test_helm_chart.py checks what they render
        for doc in _documents(path):
            meta = doc.get("metadata", {})
            if doc.get("roleRef", {}).get("name") == AUTH_READER:
                # The visibility API's reader binding lives beside the Role it binds.
                assert meta["namespace"] == "kube-system", f"{path}: {meta}"
            elif "namespace" in meta:
                assert meta["namespace"] == namespace, f"{path}: {meta}"
            if doc.get("roleRef", {}).get("name") == METRICS_READER:
                # The scraper's binding names Prometheus' ServiceAccount, in Prometheus' namespace.
                assert path.parent == MANIFESTS / "prometheus", f"{path}: binds {METRICS_READER}"
                continue
            for subject in doc.get("subjects", []):
                assert subject.get("namespace") == namespace, f"{path}: {subject}"
            for webhook in doc.get("webhooks", []):
                service = webhook["clientConfig"]["service"]
                assert service["namespace"] == namespace, f"{path}: {webhook['name']}"
    for path in MANIFESTS.glob("**/*"):
        if path.is_file():
            assert "../shared" not in path.read_text(), f"{path} refers outside the project"


# --- webhooks ------------------------------------------------------------------------------------


def _webhook_documents() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in _documents(MANIFESTS / "webhook.yaml")}


def test_every_served_webhook_is_registered_as_it_is_served() -> None:
    from reconciler.webhook.handlers import routes

    served = routes()

    docs = _webhook_documents()
    registered = {
        w["name"]: (kind, w)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for w in docs[kind]["webhooks"]
    }
    assert set(registered) == {r.name for r in served}
    for route in served:
        kind, webhook = registered[route.name]
        assert kind.startswith("Mutating") is route.mutating, route.name
        assert webhook["clientConfig"]["service"]["path"] == route.path
        (rule,) = webhook["rules"]
        assert rule["apiGroups"] == [route.group]
        assert rule["apiVersions"] == [route.version]
        assert rule["operations"] == list(route.operations)
        assert rule["resources"] == [route.resource, *(f"{route.resource}/{s}" for s in route.subresources)]


def test_webhooks_fail_closed_as_kueue_ships_them() -> None:
    from reconciler.config import load_config
    from reconciler.webhook.certmanager import CertSettings

    config = load_config(MANIFESTS / "config" / "configuration.yaml")
    certs = config.internal_cert_management
    namespace = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["namespace"]
    assert config.namespace == namespace
    docs = _webhook_documents()
    settings = CertSettings(namespace, certs.webhook_secret_name, certs.webhook_service_name)
    assert docs["MutatingWebhookConfiguration"]["metadata"]["name"] == settings.configuration_name("mutating")
    assert docs["ValidatingWebhookConfiguration"]["metadata"]["name"] == settings.configuration_name(
        "validating"
    )
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in docs[kind]["webhooks"]:
            assert webhook["failurePolicy"] == "Fail", webhook["name"]
            assert webhook["sideEffects"] == "None"
            assert webhook["admissionReviewVersions"] == ["v1"]
            assert 1 <= webhook["timeoutSeconds"] <= 30
            assert "caBundle" not in webhook["clientConfig"]  # injected at run time
            assert webhook["clientConfig"]["service"]["name"] == certs.webhook_service_name
            assert webhook["clientConfig"]["service"].get("port", 443) == 443
            if webhook["rules"][0]["apiGroups"] == ["batch"]:
                # Jobs of the system and of the controller itself never wait for the controller.
                (expression,) = webhook["namespaceSelector"]["matchExpressions"]
                assert expression == {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", namespace],
                }


def test_the_webhook_service_reaches_the_webhook_port_and_certificates() -> None:
    from reconciler.config import load_config

    config = load_config(MANIFESTS / "config" / "configuration.yaml")
    service = _webhook_documents()["Service"]
    assert service["metadata"]["name"] == config.internal_cert_management.webhook_service_name
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (443, "webhook")
    pod = _deployment()["spec"]["template"]["spec"]
    assert service["spec"]["selector"] == _deployment()["spec"]["selector"]["matchLabels"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["webhook"] == config.webhook.port
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts[config.webhook.cert_dir]]
