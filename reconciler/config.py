"""The controller's configuration: Kueue's `config.kueue.x-k8s.io` Configuration.

Both v1beta1 and v1beta2 files are read, each with its own defaults, as Kueue
does. Only the parts this controller acts on are modelled. Kueue fields without
effect here are accepted and kept in ``Configuration.ignored_fields`` with the
reason, which the controller logs and exports at start-up; fields that would
change what is charged are refused (config_sections/ignored.py). Unknown fields
are errors (Kueue decodes strictly). Every error names the field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from reconciler.api.meta import LabelSelector, LabelSelectorRequirement
from reconciler.config_sections.admission_fair_sharing import (
    AdmissionFairSharingConfig,
    parse_admission_fair_sharing,
)
from reconciler.config_sections.fair_sharing import FairSharingConfig, parse_fair_sharing
from reconciler.config_sections.feature_gates import EXTENDED_RESOURCE_GATE, parse_feature_gates
from reconciler.config_sections.fields import ConfigError, parse_duration
from reconciler.config_sections.fields import check_unknown as _check_unknown
from reconciler.config_sections.fields import expect as _expect
from reconciler.config_sections.frameworks import DEFAULT_FRAMEWORKS, KNOWN_FRAMEWORKS
from reconciler.config_sections.ignored import (
    IgnoredField,
    ignored_fields,
    refuse_charging_fields,
    top_level_ignored,
)
from reconciler.config_sections.inventory import (
    INVENTORY_MODES,
    DeviceInventoryConfig,
    parse_device_inventory,
)
from reconciler.config_sections.queueing import WaitForPodsReady, parse_wait_for_pods_ready
from reconciler.config_sections.resources import CapacityMapping, DeviceClassMapping, parse_mappings
from reconciler.config_sections.selectors import label_key, parse_label_selector
from reconciler.config_sections.serving import (
    InternalCertManagement,
    WebhookServer,
    parse_internal_cert_management,
    parse_namespace,
    parse_webhook,
)

__all__ = [
    "INVENTORY_MODES",
    "LIVE_FIELDS",
    "AdmissionFairSharingConfig",
    "CapacityMapping",
    "ConfigError",
    "Configuration",
    "DeviceClassMapping",
    "DeviceInventoryConfig",
    "FairSharingConfig",
    "IgnoredField",
    "InternalCertManagement",
    "WaitForPodsReady",
    "WebhookServer",
    "cannot_read",
    "load_config",
    "named",
    "parse_config",
    "parse_config_file",
    "parse_duration",
    "with_live_changes",
]

GROUP = "config.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")

_HANDLED = frozenset({"resources", "waitForPodsReady", "integrations", "manageJobsWithoutQueueName"})
_HANDLED |= {"namespace", "internalCertManagement", "webhook", "managedJobsNamespaceSelector"}
_HANDLED |= {"apiVersion", "kind", "fairSharing", "admissionFairSharing"}
# This controller's own: not a Kueue field (Kueue has no device inventory).
_HANDLED |= {"deviceInventory"}


@dataclass(frozen=True)
class Configuration:
    api_version: str = f"{GROUP}/v1beta2"
    device_class_mappings: tuple[DeviceClassMapping, ...] = ()
    wait_for_pods_ready: WaitForPodsReady | None = None
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS
    # integrations.labelKeysToCopy: these labels of a job are copied to the Workload made for it.
    label_keys_to_copy: tuple[str, ...] = ()
    manage_jobs_without_queue_name: bool = False
    # Kueue's managedJobsNamespaceSelector as given; None: Kueue's default (every namespace but
    # kube-system and the controller's own), applied where the namespace is known.
    managed_jobs_namespace_selector: LabelSelector | None = None
    # The controller's own namespace (Kueue's ``namespace``); None: $POD_NAMESPACE, the service
    # account's namespace, else kueue-system (decided by the command line).
    namespace: str | None = None
    internal_cert_management: InternalCertManagement = field(default_factory=InternalCertManagement)
    webhook: WebhookServer = field(default_factory=WebhookServer)
    device_inventory: DeviceInventoryConfig = field(default_factory=DeviceInventoryConfig)
    # Cohort fair sharing (Kueue's ``fairSharing``); None: off, preemption is classical.
    fair_sharing: FairSharingConfig | None = None
    # Admission fair sharing (Kueue's ``admissionFairSharing``); None: off.
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    # featureGates.KueueDRAIntegrationExtendedResource (Kueue's alpha gate, off by default): a pod's
    # extended resource declared by a DeviceClass (spec.extendedResourceName) is charged through it.
    extended_resources: bool = False
    # Fields given but without effect here, each with the reason (named at start-up).
    ignored_fields: tuple[IgnoredField, ...] = ()
    _class_to_resource: dict[str, str] = field(default_factory=dict, init=False, compare=False, repr=False)
    _class_capacities: dict[str, tuple[tuple[str, str], ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        for mapping in self.device_class_mappings:
            for cls in mapping.device_class_names:
                self._class_to_resource.setdefault(cls, mapping.name)
                if mapping.capacity:
                    self._class_capacities.setdefault(
                        cls, tuple((c.name, c.resource) for c in mapping.capacity)
                    )

    @property
    def fair_sharing_strategies(self) -> tuple[str, ...] | None:
        """The fair-sharing preemption strategies in order; None when fair sharing is off."""
        return None if self.fair_sharing is None else self.fair_sharing.preemption_strategies

    @property
    def class_to_resource(self) -> Mapping[str, str]:
        """DeviceClass name → logical quota resource name."""
        return self._class_to_resource

    @property
    def class_capacities(self) -> Mapping[str, tuple[tuple[str, str], ...]]:
        """DeviceClass name → (device capacity name, quota resource) pairs charged besides the count."""
        return self._class_capacities


# Fields a running controller takes from a changed file (the rest need a restart), and the
# Configuration's spelling of the others, for the log line that says they were not applied.
LIVE_FIELDS = ("resources.deviceClassMappings",)
_RESTART_FIELDS = {
    "api_version": "apiVersion",
    "wait_for_pods_ready": "waitForPodsReady",
    "frameworks": "integrations.frameworks",
    "label_keys_to_copy": "integrations.labelKeysToCopy",
    "manage_jobs_without_queue_name": "manageJobsWithoutQueueName",
    "managed_jobs_namespace_selector": "managedJobsNamespaceSelector",
    "namespace": "namespace",
    "internal_cert_management": "internalCertManagement",
    "webhook": "webhook",
    "device_inventory": "deviceInventory",
    "fair_sharing": "fairSharing",
    "admission_fair_sharing": "admissionFairSharing",
    "extended_resources": f"featureGates.{EXTENDED_RESOURCE_GATE}",
}


def with_live_changes(current: Configuration, new: Configuration) -> tuple[Configuration, list[str]]:
    """The running configuration with what may change live taken from `new` (the DeviceClass
    mappings), and the Configuration fields that changed but need a restart."""
    restart = [
        spelled for attr, spelled in _RESTART_FIELDS.items() if getattr(current, attr) != getattr(new, attr)
    ]
    return replace(current, device_class_mappings=new.device_class_mappings), restart


def _parse_frameworks(raw: object, version: str) -> tuple[str, ...]:
    path = "integrations"
    obj = _expect(raw or {}, dict, path, "an object")
    allowed = {"frameworks", "externalFrameworks", "labelKeysToCopy"}
    if version == "v1beta1":
        allowed |= {"podOptions"}  # v1beta2 has none
    _check_unknown(obj, allowed, path)
    frameworks = obj.get("frameworks") or list(DEFAULT_FRAMEWORKS)
    _expect(frameworks, list, f"{path}.frameworks", "a list of framework names")
    # Kueue's names; which of them this build implements is the integrations' registry's to say
    # (`reconciler.integrations.check_frameworks`, at start).
    for i, name in enumerate(frameworks):
        if name not in KNOWN_FRAMEWORKS:
            raise ConfigError(
                f"{path}.frameworks[{i}]: Unsupported value: {name!r}: supported values: "
                + ", ".join(f'"{f}"' for f in sorted(KNOWN_FRAMEWORKS))
            )
    return tuple(frameworks)


def _label_keys_to_copy(raw: object) -> tuple[str, ...]:
    """integrations.labelKeysToCopy: label keys copied from a job to its Workload."""
    keys = (raw or {}).get("labelKeysToCopy") if isinstance(raw, dict) else None
    if keys is None:
        return ()
    path = "integrations.labelKeysToCopy"
    _expect(keys, list, path, "a list of label keys")
    return tuple(label_key(key, f"{path}[{i}]") for i, key in enumerate(keys))


def _namespace_selector(raw: object) -> LabelSelector | None:
    parsed = parse_label_selector(raw, "managedJobsNamespaceSelector")
    if parsed is None:
        return None
    labels, requirements = parsed
    expressions = [LabelSelectorRequirement(key, op, values) for key, op, values in requirements]
    return LabelSelector(match_labels=labels, match_expressions=expressions)


def parse_config(data: object) -> Configuration:
    """Validate and default a decoded Configuration document."""
    doc = _expect(data, dict, "(document)", "a Configuration object")
    api_version = doc.get("apiVersion")
    group, _, version = str(api_version).partition("/")
    if group != GROUP or version not in VERSIONS:
        raise ConfigError(
            f"apiVersion: {api_version!r} is not supported; use {GROUP}/v1beta2 (or {GROUP}/v1beta1)"
        )
    if doc.get("kind") != "Configuration":
        raise ConfigError(f"kind: {doc.get('kind')!r}: must be Configuration")
    _check_unknown(doc, top_level_ignored(version) | _HANDLED, "")
    resources = _expect(doc.get("resources") or {}, dict, "resources", "an object")
    res_allowed = {"excludeResourcePrefixes", "transformations", "deviceClassMappings"}
    if version == "v1beta2":
        res_allowed |= {"quotaCheckStrategy"}
    _check_unknown(resources, res_allowed, "resources")
    refuse_charging_fields(resources)
    mappings = parse_mappings(resources.get("deviceClassMappings") or [], version)
    manage = _expect(
        doc.get("manageJobsWithoutQueueName", False), bool, "manageJobsWithoutQueueName", "true or false"
    )
    return Configuration(
        api_version=f"{GROUP}/{version}",
        device_class_mappings=mappings,
        wait_for_pods_ready=parse_wait_for_pods_ready(doc.get("waitForPodsReady"), version),
        frameworks=_parse_frameworks(doc.get("integrations"), version),
        label_keys_to_copy=_label_keys_to_copy(doc.get("integrations")),
        manage_jobs_without_queue_name=manage,
        managed_jobs_namespace_selector=_namespace_selector(doc.get("managedJobsNamespaceSelector")),
        namespace=parse_namespace(doc.get("namespace")),
        internal_cert_management=parse_internal_cert_management(doc.get("internalCertManagement")),
        webhook=parse_webhook(doc.get("webhook")),
        device_inventory=parse_device_inventory(doc.get("deviceInventory")),
        fair_sharing=parse_fair_sharing(doc.get("fairSharing"), version),
        admission_fair_sharing=parse_admission_fair_sharing(doc.get("admissionFairSharing")),
        extended_resources=parse_feature_gates(doc.get("featureGates")),
        ignored_fields=ignored_fields(doc, version),
    )


def load_config(path: str | Path) -> Configuration:
    """Read and validate a Configuration file; ConfigError names the file and field."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as err:
        raise ConfigError(cannot_read(file, err)) from None
    return parse_config_file(file, data)


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error on one line: what it found, and where (line and column from 1)."""
    if isinstance(err, yaml.MarkedYAMLError):
        words = "; ".join(p for p in (err.context, err.problem) if p)
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return (words or type(err).__name__) + where
    return " ".join(str(err).split())


def named(file: str | Path, err: ConfigError) -> str:
    """The error's one line, led by the file's name (a check made after loading does not know it)."""
    text = str(err)
    return text if text.startswith(f"{file}: ") else f"{file}: {text}"


def cannot_read(file: str | Path, err: OSError) -> str:
    """One line for a file that cannot be read: missing, a directory, not readable..."""
    reason = err.strerror or type(err).__name__
    return f"{file}: cannot read the configuration: {reason}"


def parse_config_file(file: str | Path, data: bytes) -> Configuration:
    """The Configuration a file's bytes hold (start-up and reload read it alike); ConfigError, one
    line naming the file and what is wrong, for bytes that are not UTF-8, not YAML or not valid."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = data[err.start : err.end].hex(" ")
        raise ConfigError(
            f"{file}: not valid UTF-8: byte(s) {bad} at offset {err.start}; save the file as UTF-8"
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{file}: not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise ConfigError(f"{file}: not valid YAML: nested too deeply to be read") from None
    try:
        return parse_config(doc)
    except ConfigError as err:
        raise ConfigError(f"{file}: {err}") from None
