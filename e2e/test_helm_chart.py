"""The Helm chart (manifests/helm/dra-quota-reconciler) against the kustomize manifests, offline.

`helm template` with the default values must render the objects of
`kustomize build manifests` (and, with prometheus.enabled, those of
`kustomize build manifests/prometheus` besides): the same kinds, namespaces and
names (kustomize's ConfigMap hash aside), and the same content except labels and
annotations (the chart's labels include kustomize's). `helm lint --strict` must be
clean, the values must change what they say, and combinations that cannot work
are refused naming the value. Needs the cached helm and kustomize, no cluster.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ROOT, kustomize_build
from e2e.support.helm import Helm, HelmError
from tests.support.deploy_files import CONTRACT_ARGS

pytestmark = [pytest.mark.binaries, pytest.mark.timeout(120)]

Obj = dict[str, Any]
Key = tuple[str, str, str]
CONFIG_MAP = "dra-quota-reconciler-config"
_HASHED = re.compile(rf"^{CONFIG_MAP}-[a-z0-9]{{10}}$")


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def default_render(helm: Helm) -> list[Obj]:
    return helm.template()


def unhashed(name: str) -> str:
    """kustomize's generated ConfigMap name without its content hash (the chart has none)."""
    return CONFIG_MAP if _HASHED.match(name) else name


def key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), unhashed(meta["name"]))


def comparable(obj: Obj) -> Obj:
    """The object without labels and annotations, names unhashed."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    meta.pop("labels", None)
    meta.pop("annotations", None)
    meta["name"] = unhashed(meta["name"])
    if out["kind"] == "Deployment":
        pod = out["spec"]["template"]
        pod["metadata"].pop("annotations", None)
        for volume in pod["spec"].get("volumes", []):
            if "configMap" in volume:
                volume["configMap"]["name"] = unhashed(volume["configMap"]["name"])
    return out


def by_key(objects: list[Obj]) -> dict[Key, Obj]:
    found: dict[Key, Obj] = {}
    for obj in objects:
        assert key(obj) not in found, f"rendered twice: {key(obj)}"
        found[key(obj)] = obj
    return found


def assert_same_objects(chart: list[Obj], kustomize: list[Obj]) -> None:
    ours, theirs = by_key(chart), by_key(kustomize)
    assert sorted(ours) == sorted(theirs)
    for k, theirs_obj in theirs.items():
        assert comparable(ours[k]) == comparable(theirs_obj), f"{k} differs"
        if k[0] != "CustomResourceDefinition":  # crds/ is not templated: the files as they are
            labels = ours[k]["metadata"].get("labels", {})
            wanted = theirs_obj["metadata"].get("labels", {})
            assert wanted.items() <= labels.items(), f"{k}: labels {labels} lack {wanted}"


def test_lint_is_clean(helm: Helm) -> None:
    for extra in ((), ("--set", "prometheus.enabled=true")):
        result = helm.run("lint", "--strict", str(helm.chart), *extra, timeout=60)
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout, result.stdout


def test_default_render_is_the_kustomize_render(default_render: list[Obj]) -> None:
    assert_same_objects(default_render, kustomize_build(ROOT / "manifests"))
    kinds = sorted(o["kind"] for o in default_render)
    assert kinds.count("CustomResourceDefinition") == len(list((ROOT / "manifests" / "crds").glob("*.yaml")))
    (deployment,) = [o for o in default_render if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == CONTRACT_ARGS
    assert container["image"] == "dra-quota-reconciler:0.1.0"


def test_prometheus_add_on_is_the_kustomize_render(helm: Helm, default_render: list[Obj]) -> None:
    with_addon = helm.template("--set", "prometheus.enabled=true")
    defaults = {key(o) for o in default_render}
    addon = [o for o in with_addon if key(o) not in defaults]
    assert_same_objects(addon, kustomize_build(ROOT / "manifests" / "prometheus"))
    # ServiceMonitor, PrometheusRule, the dashboard's ConfigMap and the metrics-reader binding.
    assert sorted(o["kind"] for o in addon) == [
        "ClusterRoleBinding",
        "ConfigMap",
        "PrometheusRule",
        "ServiceMonitor",
    ]


def test_the_comparison_can_fail(default_render: list[Obj]) -> None:
    kustomized = kustomize_build(ROOT / "manifests")
    changed = copy.deepcopy(default_render)
    (deployment,) = [o for o in changed if o["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["args"].remove("--leader-elect")
    with pytest.raises(AssertionError, match="Deployment"):
        assert_same_objects(changed, kustomized)
    with pytest.raises(AssertionError):
        assert_same_objects([o for o in default_render if o["kind"] != "Role"], kustomized)


def _only(objects: list[Obj], kind: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_values_change_what_they_say(helm: Helm, default_render: list[Obj], tmp_path: Path) -> None:
    config = (ROOT / "manifests" / "config" / "configuration.yaml").read_text().replace("5m", "10m")
    values = {
        "image": {"repository": "registry.example/dra", "tag": "1.2.3", "pullPolicy": "Always"},
        "replicas": 1,
        "leaderElection": {"enabled": False},
        "configuration": config,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
        "extraArgs": ["--log-level", "debug"],
        "podDisruptionBudget": {"enabled": False},
        "namespace": {"name": "gpu-quota"},
        "webhook": {"enabled": False},
        "visibility": {"enabled": False},
    }
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    objects = helm.template("-f", str(tmp_path / "values.yaml"))
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"Role", "RoleBinding", "PodDisruptionBudget"}
    assert not kinds & {"APIService", "FlowSchema", "PriorityLevelConfiguration"}
    args = _only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--visibility-bind-address") + 1] == "0"
    assert not kinds & {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-quota"}
    assert _only(objects, "Namespace")["metadata"]["name"] == "gpu-quota"
    deployment = _only(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/dra:1.2.3"
    assert container["imagePullPolicy"] == "Always"
    # Helm merges maps with the defaults: the default cpu limit stays.
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    assert "--leader-elect" not in container["args"]
    assert container["args"][-2:] == ["--log-level", "debug"]
    assert _only(objects, "ConfigMap")["data"]["config.yaml"] == config
    # A changed configuration rolls the pods.
    before = _only(default_render, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    after = deployment["spec"]["template"]["metadata"]["annotations"]
    assert before["checksum/config"] != after["checksum/config"]


def test_leader_election_timings_become_flags(helm: Helm) -> None:
    objects = helm.template(
        "--set", "leaderElection.id=gpu-quota", "--set", "leaderElection.leaseDuration=30s"
    )
    args = _only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--leader-election-id") + 1] == "gpu-quota"
    assert args[args.index("--lease-duration") + 1] == "30s"
    assert "--renew-deadline" not in args


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"leaderElection": {"enabled": False}},
            "replicas: 2 replicas without leaderElection.enabled would all admit and write; "
            "set leaderElection.enabled=true or replicas=1",
        ),
        (
            {"webhook": {"certManager": {"enabled": True}}},
            "webhook.certManager.enabled: the chart does not render cert-manager objects yet",
        ),
        (
            {"configuration": "kind: Configuration\n"},
            'configuration.apiVersion: "" is not config.kueue.x-k8s.io/v1beta1 or v1beta2',
        ),
        ({"configuration": "a: [\n"}, "configuration: not a YAML map"),
        (
            {"configuration": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Config\n"},
            'configuration.kind: "Config" is not Configuration',
        ),
        ({"configuration": {"kind": "Configuration"}}, "at '/configuration': got object, want string"),
        ({"replicas": "two"}, "at '/replicas': got string, want integer"),
        ({"leaderElection": {"leaseDuration": "fifteen"}}, "at '/leaderElection/leaseDuration'"),
        ({"imagee": {"tag": "x"}}, "additional properties 'imagee' not allowed"),
        (
            {"prometheus": {"enabled": True, "serviceAccount": {"name": ""}}},
            "at '/prometheus/serviceAccount/name'",
        ),
    ],
)
def test_refused_values_name_the_value(helm: Helm, tmp_path: Path, values: Obj, message: str) -> None:
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    with pytest.raises(HelmError) as refused:
        helm.template("-f", str(tmp_path / "values.yaml"))
    assert message in refused.value.stderr


def test_the_release_namespace_cannot_be_the_created_one(helm: Helm) -> None:
    with pytest.raises(HelmError) as refused:
        helm.template("--namespace", "dra-quota-system")
    assert (
        "namespace.create: the chart would create the Namespace dra-quota-system, but Helm keeps its "
        "release record there and needs it to exist first; install with --namespace default, or set "
        "namespace.create=false"
    ) in refused.value.stderr
    objects = helm.template("--namespace", "dra-quota-system", "--set", "namespace.create=false")
    assert "Namespace" not in {o["kind"] for o in objects}
    objects = helm.template(
        "--namespace", "gpus", "--set", "namespace.create=false", "--set", "namespace.name="
    )
    namespaces = {o["metadata"]["namespace"] for o in objects if "namespace" in o["metadata"]}
    # The visibility API's reader binding lives beside the Role it binds, in kube-system.
    assert namespaces == {"gpus", "kube-system"}


def _controller_rules(objects: list[Obj]) -> set[tuple[str, str, str]]:
    (role,) = [
        o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "dra-quota-reconciler"
    ]
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_the_cluster_role_follows_the_enabled_frameworks(
    helm: Helm, default_render: list[Obj], tmp_path: Path
) -> None:
    config = (ROOT / "manifests" / "config" / "configuration.yaml").read_text()
    serving = config.replace("  - batch/job\n", "  - statefulset\n  - jobset.x-k8s.io/jobset\n")
    assert serving != config
    (tmp_path / "values.yaml").write_text(yaml.safe_dump({"configuration": serving}))
    rules = _controller_rules(helm.template("-f", str(tmp_path / "values.yaml")))
    default = _controller_rules(default_render)
    # batch/job only (the default): its Jobs, none of the StatefulSet's or JobSet's kinds.
    assert ("batch", "jobs", "patch") in default
    assert not {r for r in default if r[0] in ("apps", "jobset.x-k8s.io")}
    assert ("", "pods", "delete") not in default  # the pod framework's
    # statefulset (which implies pod) and JobSet: their rules, and no Job's.
    assert {("apps", "statefulsets", "watch"), ("jobset.x-k8s.io", "jobsets", "patch")} <= rules
    assert {("", "pods", "delete"), ("", "pods/status", "patch")} <= rules
    assert not {r for r in rules if r[0] == "batch"}
    # What every configuration needs is there either way.
    assert ("kueue.x-k8s.io", "workloads", "create") in rules & default
