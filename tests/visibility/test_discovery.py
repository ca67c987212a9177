"""Discovery documents of the visibility API, plain and aggregated."""

from __future__ import annotations

from reconciler.visibility.discovery import aggregated_discovery, api_group_list, resource_list

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList"


def test_plain_discovery_lists_both_versions_and_the_get_subresources() -> None:
    group, whatif = api_group_list()["groups"]
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    assert (whatif["name"], whatif["preferredVersion"]["version"]) == ("whatif.dra-quota.dev", "v1alpha1")
    assert group["preferredVersion"]["version"] == "v1beta2"
    verbs = {r["name"]: r["verbs"] for r in resource_list("v1beta1")["resources"]}
    assert verbs == {
        "clusterqueues": [],
        "clusterqueues/pendingworkloads": ["get"],
        "localqueues": [],
        "localqueues/pendingworkloads": ["get"],
    }


def test_aggregated_discovery_answers_the_version_asked_with_subresources_under_parents() -> None:
    # The aggregator's Accept header: v2 first, v2beta1 as a fallback.
    answer = aggregated_discovery(f"{AGGREGATED.format('v2')},{AGGREGATED.format('v2beta1')}")
    assert answer is not None
    body, content_type = answer
    assert content_type == AGGREGATED.format("v2")
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2"
    group, whatif = body["items"]
    assert group["metadata"]["name"] == "visibility.kueue.x-k8s.io"
    (dry,) = whatif["versions"]
    assert whatif["metadata"]["name"] == "whatif.dra-quota.dev"
    assert [(r["resource"], r["scope"], r["verbs"]) for r in dry["resources"]] == [
        ("whatifs", "Namespaced", ["create"])
    ]
    versions = {v["version"]: v for v in group["versions"]}
    assert list(versions) == ["v1beta2", "v1beta1"]
    resources = {r["resource"]: r for r in versions["v1beta1"]["resources"]}
    assert resources["localqueues"]["scope"] == "Namespaced"
    assert resources["clusterqueues"]["scope"] == "Cluster"
    (sub,) = resources["clusterqueues"]["subresources"]
    assert sub["subresource"] == "pendingworkloads"
    assert sub["verbs"] == ["get"]
    assert sub["responseKind"]["version"] == "v1beta1"
    beta = aggregated_discovery(AGGREGATED.format("v2beta1"))
    assert beta is not None
    assert beta[0]["apiVersion"] == "apidiscovery.k8s.io/v2beta1"


def test_plain_json_or_an_unknown_aggregated_version_gets_the_plain_list() -> None:
    assert aggregated_discovery("application/json") is None
    assert aggregated_discovery(AGGREGATED.format("v3")) is None
    assert aggregated_discovery("") is None
