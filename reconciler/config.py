"""The controller's configuration: Kueue's `config.kueue.x-k8s.io` Configuration.

Both v1beta1 and v1beta2 files are read, each with its own defaults, as Kueue
does. Only the parts this controller acts on are modelled; other Kueue fields
are accepted and reported as ignored, unknown fields are errors (Kueue
decodes strictly). Every error names the field and says how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "INVENTORY_MODES",
    "LIVE_FIELDS",
    "CapacityMapping",
    "ConfigError",
    "Configuration",
    "DeviceClassMapping",
    "DeviceInventoryConfig",
    "InternalCertManagement",
    "WaitForPodsReady",
    "WebhookServer",
    "load_config",
    "parse_config",
    "parse_duration",
    "with_live_changes",
]

GROUP = "config.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
MAX_MAPPINGS = 16
MAX_CLASSES_PER_MAPPING = 8

KNOWN_FRAMEWORKS = frozenset(
    {
        "batch/job",
        "kubeflow.org/mpijob",
        "ray.io/rayjob",
        "ray.io/rayservice",
        "ray.io/raycluster",
        "jobset.x-k8s.io/jobset",
        "kubeflow.org/paddlejob",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/jaxjob",
        "trainer.kubeflow.org/trainjob",
        "workload.codeflare.dev/appwrapper",
        "sparkoperator.k8s.io/sparkapplication",
        "pod",
        "deployment",
        "statefulset",
        "leaderworkerset.x-k8s.io/leaderworkerset",
    }
)
# The frameworks reconciler.integrations implements (its registry has exactly these).
SUPPORTED_FRAMEWORKS = frozenset({"batch/job"})

# Top-level Kueue fields this controller accepts but does not act on.
_ACCEPTED_IGNORED = frozenset(
    {
        "managedJobsNamespaceSelector",
        "clientConnection",
        "multiKueue",
        "fairSharing",
        "admissionFairSharing",
        "featureGates",
        "objectRetentionPolicies",
        "health",
        "metrics",
        "leaderElection",
        "controller",
        "pprofBindAddress",
        "queueVisibility",
        "kind",
        "apiVersion",
    }
)
_HANDLED = frozenset({"resources", "waitForPodsReady", "integrations", "manageJobsWithoutQueueName"})
_HANDLED |= {"namespace", "internalCertManagement", "webhook"}
# This controller's own: not a Kueue field (Kueue has no device inventory).
_HANDLED |= {"deviceInventory"}
INVENTORY_MODES = ("Off", "Report", "Enforce")

# Kueue's defaults (apis/config/v1beta2/defaults.go).
DEFAULT_WEBHOOK_SERVICE_NAME = "kueue-webhook-service"
DEFAULT_WEBHOOK_SECRET_NAME = "kueue-webhook-server-cert"
DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"

_QUALIFIED_NAME = re.compile(
    r"^(?:(?=.{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ConfigError(ValueError):
    """A configuration that cannot be used. The message names the field and the fix."""


@dataclass(frozen=True)
class CapacityMapping:
    """``capacity[i]`` of a mapping: charge a device capacity (``name``) as a quota resource."""

    name: str
    resource: str


@dataclass(frozen=True)
class DeviceClassMapping:
    name: str
    device_class_names: tuple[str, ...]
    # This controller's extension: device capacities charged as quota resources too.
    capacity: tuple[CapacityMapping, ...] = ()


@dataclass(frozen=True)
class DeviceInventoryConfig:
    """``deviceInventory``: compare quota with the devices published in ResourceSlices.

    ``Off`` (default): nothing is watched. ``Report``: DeviceClasses, ResourceSlices and Nodes
    are watched; ClusterQueues get the DevicesCoverQuota condition, and metrics and Events
    show the inventory. ``Enforce``: the same, and admission waits for free devices too."""

    mode: str = "Off"

    @property
    def enabled(self) -> bool:
        return self.mode != "Off"

    @property
    def enforce(self) -> bool:
        return self.mode == "Enforce"


@dataclass(frozen=True)
class WaitForPodsReady:
    timeout_seconds: float
    block_admission: bool
    recovery_timeout_seconds: float | None
    requeuing_timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class InternalCertManagement:
    """Kueue's internalCertManagement: a self-signed CA and serving certificate kept in a Secret.

    With ``enable`` false the serving certificate is provided from outside (cert-manager), mounted
    in the webhook's certificate directory as tls.crt and tls.key."""

    enable: bool = True
    webhook_service_name: str = DEFAULT_WEBHOOK_SERVICE_NAME
    webhook_secret_name: str = DEFAULT_WEBHOOK_SECRET_NAME


@dataclass(frozen=True)
class WebhookServer:
    """Kueue's ``webhook`` section: where the admission webhooks listen and find their certificate."""

    port: int = DEFAULT_WEBHOOK_PORT
    host: str = ""
    cert_dir: str = DEFAULT_WEBHOOK_CERT_DIR


@dataclass(frozen=True)
class Configuration:
    api_version: str = f"{GROUP}/v1beta2"
    device_class_mappings: tuple[DeviceClassMapping, ...] = ()
    wait_for_pods_ready: WaitForPodsReady | None = None
    frameworks: tuple[str, ...] = ("batch/job",)
    manage_jobs_without_queue_name: bool = False
    # The controller's own namespace (Kueue's ``namespace``); None: $POD_NAMESPACE, the service
    # account's namespace, else kueue-system (decided by the command line).
    namespace: str | None = None
    internal_cert_management: InternalCertManagement = field(default_factory=InternalCertManagement)
    webhook: WebhookServer = field(default_factory=WebhookServer)
    device_inventory: DeviceInventoryConfig = field(default_factory=DeviceInventoryConfig)
    ignored_fields: tuple[str, ...] = ()
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
    "manage_jobs_without_queue_name": "manageJobsWithoutQueueName",
    "namespace": "namespace",
    "internal_cert_management": "internalCertManagement",
    "webhook": "webhook",
}


def with_live_changes(current: Configuration, new: Configuration) -> tuple[Configuration, list[str]]:
    """The running configuration with what may change live taken from `new` (the DeviceClass
    mappings), and the Configuration fields that changed but need a restart."""
    restart = [
        spelled for attr, spelled in _RESTART_FIELDS.items() if getattr(current, attr) != getattr(new, attr)
    ]
    return replace(current, device_class_mappings=new.device_class_mappings), restart


def parse_duration(value: object, path: str) -> float:
    """A Go duration such as "30m", "1h30m", "90s", "500ms", in seconds."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f'{path}: expected a duration such as "5m" or "90s", got {value!r}')
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ConfigError(
            f"{path}: {value!r} is not a duration; use a number with a unit: ns, us, ms, s, m, h "
            '(e.g. "5m", "1h30m")'
        )
    return sign * total


def _expect(value: object, kind: type | tuple[type, ...], path: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{path}: expected {what}, got {type(value).__name__} {value!r}")
    return value


def _check_unknown(obj: Mapping[str, Any], allowed: set[str] | frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            where = f"{path}.{key}" if path else key
            raise ConfigError(f"{where}: unknown field; known fields here are: {known}")


def _parse_mappings(raw: object, version: str) -> tuple[DeviceClassMapping, ...]:
    path = "resources.deviceClassMappings"
    items = _expect(raw, list, path, "a list of {name, deviceClassNames}")
    if len(items) > MAX_MAPPINGS:
        raise ConfigError(
            f"{path}: Too many: {len(items)}: must have at most {MAX_MAPPINGS} items; "
            "merge mappings or drop unused ones"
        )
    allowed = {"name", "deviceClassNames", "capacity"} | ({"sources"} if version == "v1beta2" else set())
    out: list[DeviceClassMapping] = []
    seen_names: set[str] = set()
    owner: dict[str, str] = {}
    for i, item in enumerate(items):
        ipath = f"{path}[{i}]"
        entry = _expect(item, dict, ipath, "an object with name and deviceClassNames")
        _check_unknown(entry, allowed, ipath)
        if "sources" in entry:
            raise ConfigError(
                f"{ipath}.sources: Kueue's counter and capacity sources are not supported by this "
                "controller; remove sources, and charge a device capacity with this controller's "
                "capacity field instead (capacity: [{name: memory, resource: example.com/gpu-memory}])"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"{ipath}.name: Required value: name the logical quota resource, e.g. nvidia.com/gpu"
            )
        if not _QUALIFIED_NAME.match(name):
            raise ConfigError(
                f"{ipath}.name: Invalid value: {name!r}: must be a qualified name such as "
                "nvidia.com/gpu (optional DNS prefix, '/', then alphanumerics, '-', '_', '.')"
            )
        if name in seen_names:
            raise ConfigError(
                f"{ipath}.name: Duplicate value: {name!r}: each mapping needs its "
                "own name; merge the two entries"
            )
        seen_names.add(name)
        classes = entry.get("deviceClassNames")
        if not classes:
            raise ConfigError(
                f"{ipath}.deviceClassNames: Required value: at least one device class name is required"
            )
        classes = _expect(classes, list, f"{ipath}.deviceClassNames", "a list of DeviceClass names")
        if len(classes) > MAX_CLASSES_PER_MAPPING:
            raise ConfigError(
                f"{ipath}.deviceClassNames: Too many: {len(classes)}: must have at most "
                f"{MAX_CLASSES_PER_MAPPING} items; split them over several mappings"
            )
        seen_here: set[str] = set()
        for j, cls in enumerate(classes):
            cpath = f"{ipath}.deviceClassNames[{j}]"
            if not isinstance(cls, str) or not _DNS_SUBDOMAIN.match(cls) or len(cls) > 253:
                raise ConfigError(
                    f"{cpath}: Invalid value: {cls!r}: must be a DeviceClass name "
                    "(lower-case DNS subdomain, e.g. gpu.nvidia.com)"
                )
            if cls in seen_here:
                raise ConfigError(f"{cpath}: Duplicate value: {cls!r}: list it once")
            seen_here.add(cls)
            if cls in owner:
                raise ConfigError(
                    f"{cpath}: Invalid value: {cls!r}: device class already mapped to resource "
                    f"{owner[cls]}; a DeviceClass may appear in one mapping only"
                )
            owner[cls] = name
        out.append(DeviceClassMapping(name, tuple(classes), _parse_capacity(entry.get("capacity"), ipath)))
    counts = {m.name: f"{path}[{i}].name" for i, m in enumerate(out)}
    for i, mapping in enumerate(out):
        for k, cap in enumerate(mapping.capacity):
            if cap.resource in counts:
                raise ConfigError(
                    f"{path}[{i}].capacity[{k}].resource: Invalid value: {cap.resource!r}: already the "
                    f"device count resource of {counts[cap.resource]}; charge the capacity as a resource "
                    "of its own, e.g. example.com/gpu-memory"
                )
    return tuple(out)


def _parse_capacity(raw: object, ipath: str) -> tuple[CapacityMapping, ...]:
    """``capacity``: [{name: memory, resource: example.com/gpu-memory}] (this controller's extension)."""
    if raw is None:
        return ()
    path = f"{ipath}.capacity"
    items = _expect(
        raw, list, path, "a list of {name, resource}, e.g. [{name: memory, resource: example.com/gpu-memory}]"
    )
    out: list[CapacityMapping] = []
    names: set[str] = set()
    resources: set[str] = set()
    for k, item in enumerate(items):
        cpath = f"{path}[{k}]"
        entry = _expect(item, dict, cpath, "an object with name and resource")
        _check_unknown(entry, {"name", "resource"}, cpath)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"{cpath}.name: Required value: name the device capacity to charge, as the "
                "ResourceSlices publish it (e.g. memory)"
            )
        if not _QUALIFIED_NAME.match(name):
            raise ConfigError(
                f"{cpath}.name: Invalid value: {name!r}: must be a capacity name such as memory or "
                "gpu.nvidia.com/memory (optional DNS prefix, '/', then alphanumerics, '-', '_', '.')"
            )
        if name in names:
            raise ConfigError(f"{cpath}.name: Duplicate value: {name!r}: list each capacity once")
        names.add(name)
        resource = entry.get("resource")
        if not isinstance(resource, str) or not resource:
            raise ConfigError(
                f"{cpath}.resource: Required value: name the quota resource the capacity is charged as, "
                "e.g. example.com/gpu-memory"
            )
        if not _QUALIFIED_NAME.match(resource):
            raise ConfigError(
                f"{cpath}.resource: Invalid value: {resource!r}: must be a qualified name such as "
                "example.com/gpu-memory (optional DNS prefix, '/', then alphanumerics, '-', '_', '.')"
            )
        if resource in resources:
            raise ConfigError(
                f"{cpath}.resource: Duplicate value: {resource!r}: two capacities of one mapping need "
                "two quota resources"
            )
        resources.add(resource)
        out.append(CapacityMapping(name, resource))
    return tuple(out)


def _parse_wait_for_pods_ready(raw: object, version: str) -> WaitForPodsReady | None:
    path = "waitForPodsReady"
    if raw is None:
        raw = {}
    obj = _expect(raw, dict, path, "an object")
    allowed = {"timeout", "blockAdmission", "recoveryTimeout", "requeuingStrategy"}
    if version == "v1beta1":
        allowed |= {"enable"}
    _check_unknown(obj, allowed, path)
    if version == "v1beta1":
        enable = _expect(obj.get("enable", False), bool, f"{path}.enable", "true or false")
        if not enable:
            return None
        timeout = parse_duration(obj.get("timeout", "5m"), f"{path}.timeout")
        block_default = True
    else:
        timeout = parse_duration(obj["timeout"], f"{path}.timeout") if "timeout" in obj else 0.0
        if timeout == 0:
            timeout = 30 * 60.0
        block_default = False
    if timeout <= 0:
        raise ConfigError(f'{path}.timeout: must be specified and greater than 0, e.g. "5m"')
    block = _expect(obj.get("blockAdmission", block_default), bool, f"{path}.blockAdmission", "true or false")
    recovery: float | None = timeout
    if "recoveryTimeout" in obj:
        recovery = parse_duration(obj["recoveryTimeout"], f"{path}.recoveryTimeout")
        if recovery < 0:
            raise ConfigError(
                f'{path}.recoveryTimeout: must not be negative; use "0s" to disable recovery checking'
            )
    strategy = _expect(obj.get("requeuingStrategy") or {}, dict, f"{path}.requeuingStrategy", "an object")
    spath = f"{path}.requeuingStrategy"
    _check_unknown(
        strategy, {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}, spath
    )
    timestamp = strategy.get("timestamp", "Eviction")
    if timestamp not in ("Eviction", "Creation"):
        raise ConfigError(
            f'{spath}.timestamp: Unsupported value: {timestamp!r}: supported values: "Creation", "Eviction"'
        )
    numbers: dict[str, int | None] = {}
    for key, default in (
        ("backoffLimitCount", None),
        ("backoffBaseSeconds", 60),
        ("backoffMaxSeconds", 3600),
    ):
        value = strategy.get(key, default)
        if value is not None:
            _expect(value, int, f"{spath}.{key}", "a whole number")
            if value < 0:
                raise ConfigError(f"{spath}.{key}: must not be negative, got {value}")
        numbers[key] = value
    base = numbers["backoffBaseSeconds"] or 0
    top = numbers["backoffMaxSeconds"] or 0
    return WaitForPodsReady(
        timeout_seconds=timeout,
        block_admission=block,
        recovery_timeout_seconds=recovery if recovery else None,
        requeuing_timestamp=timestamp,
        backoff_limit_count=numbers["backoffLimitCount"],
        backoff_base_seconds=base,
        backoff_max_seconds=top,
    )


def _parse_frameworks(raw: object) -> tuple[str, ...]:
    path = "integrations"
    obj = _expect(raw or {}, dict, path, "an object")
    _check_unknown(obj, {"frameworks", "externalFrameworks", "labelKeysToCopy", "podOptions"}, path)
    frameworks = obj.get("frameworks") or ["batch/job"]
    _expect(frameworks, list, f"{path}.frameworks", "a list of framework names")
    for i, name in enumerate(frameworks):
        if name not in SUPPORTED_FRAMEWORKS:
            # Kueue knows more frameworks than are implemented here: say which ones are.
            later = ""
            if name in KNOWN_FRAMEWORKS:
                later = f" (Kueue's {name!r} integration is not implemented yet)"
            raise ConfigError(
                f"{path}.frameworks[{i}]: Unsupported value: {name!r}: supported values: "
                + ", ".join(f'"{f}"' for f in sorted(SUPPORTED_FRAMEWORKS))
                + later
            )
    return tuple(frameworks)


def _parse_namespace(raw: object) -> str | None:
    if raw is None:
        return None
    name: str = _expect(raw, str, "namespace", "a namespace name")
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise ConfigError(
            f"namespace: Invalid value: {name!r}: must be a namespace name (lower-case RFC 1123 label, "
            "e.g. dra-quota-system)"
        )
    return name


def _parse_internal_cert_management(raw: object) -> InternalCertManagement:
    path = "internalCertManagement"
    obj = _expect(raw or {}, dict, path, "an object")
    _check_unknown(obj, {"enable", "webhookServiceName", "webhookSecretName"}, path)
    enable = _expect(obj.get("enable", True), bool, f"{path}.enable", "true or false")
    service = obj.get("webhookServiceName", DEFAULT_WEBHOOK_SERVICE_NAME)
    if not isinstance(service, str) or not _DNS_LABEL.match(service) or len(service) > 63:
        raise ConfigError(
            f"{path}.webhookServiceName: Invalid value: {service!r}: must be a Service name "
            "(lower-case RFC 1123 label of at most 63 characters)"
        )
    secret = obj.get("webhookSecretName", DEFAULT_WEBHOOK_SECRET_NAME)
    if not isinstance(secret, str) or not _DNS_SUBDOMAIN.match(secret) or len(secret) > 253:
        raise ConfigError(
            f"{path}.webhookSecretName: Invalid value: {secret!r}: must be a Secret name "
            "(lower-case RFC 1123 subdomain)"
        )
    return InternalCertManagement(enable, service, secret)


def _parse_webhook(raw: object) -> WebhookServer:
    path = "webhook"
    obj = _expect(raw or {}, dict, path, "an object")
    _check_unknown(obj, {"port", "host", "certDir"}, path)
    port = _expect(obj.get("port", DEFAULT_WEBHOOK_PORT), int, f"{path}.port", "a port number")
    if not 0 < port < 65536:
        raise ConfigError(f"{path}.port: Invalid value: {port}: must be between 1 and 65535, e.g. 9443")
    host = _expect(obj.get("host", ""), str, f"{path}.host", "a host name or address")
    cert_dir = _expect(obj.get("certDir", DEFAULT_WEBHOOK_CERT_DIR), str, f"{path}.certDir", "a directory")
    if not cert_dir:
        raise ConfigError(f"{path}.certDir: Required value: name the directory holding tls.crt and tls.key")
    return WebhookServer(port=port, host=host, cert_dir=cert_dir)


def _parse_device_inventory(raw: object) -> DeviceInventoryConfig:
    path = "deviceInventory"
    if raw is None:
        return DeviceInventoryConfig()
    doc = _expect(raw, dict, path, "an object like {mode: Enforce}")
    _check_unknown(doc, {"mode"}, path)
    mode = doc.get("mode", "Off")
    if mode is False:  # YAML 1.1 reads an unquoted Off as false
        mode = "Off"
    if mode not in INVENTORY_MODES:
        raise ConfigError(
            f"{path}.mode: Unsupported value: {mode!r}: supported values: "
            + ", ".join(f'"{m}"' for m in INVENTORY_MODES)
        )
    return DeviceInventoryConfig(mode=str(mode))


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
    _check_unknown(doc, _ACCEPTED_IGNORED | _HANDLED, "")
    resources = _expect(doc.get("resources") or {}, dict, "resources", "an object")
    res_allowed = {"excludeResourcePrefixes", "transformations", "deviceClassMappings"}
    if version == "v1beta2":
        res_allowed |= {"quotaCheckStrategy"}
    _check_unknown(resources, res_allowed, "resources")
    mappings = _parse_mappings(resources.get("deviceClassMappings") or [], version)
    manage = _expect(
        doc.get("manageJobsWithoutQueueName", False), bool, "manageJobsWithoutQueueName", "true or false"
    )
    ignored = sorted(k for k in doc if k in _ACCEPTED_IGNORED - {"kind", "apiVersion"})
    ignored += sorted(f"resources.{k}" for k in resources if k != "deviceClassMappings")
    return Configuration(
        api_version=f"{GROUP}/{version}",
        device_class_mappings=mappings,
        wait_for_pods_ready=_parse_wait_for_pods_ready(doc.get("waitForPodsReady"), version),
        frameworks=_parse_frameworks(doc.get("integrations")),
        manage_jobs_without_queue_name=manage,
        namespace=_parse_namespace(doc.get("namespace")),
        internal_cert_management=_parse_internal_cert_management(doc.get("internalCertManagement")),
        webhook=_parse_webhook(doc.get("webhook")),
        device_inventory=_parse_device_inventory(doc.get("deviceInventory")),
        ignored_fields=tuple(ignored),
    )


def load_config(path: str | Path) -> Configuration:
    """Read and validate a Configuration file; ConfigError names the file and field."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as err:
        raise ConfigError(f"{file}: cannot read the configuration: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{file}: not valid YAML: {err}") from None
    try:
        return parse_config(data)
    except ConfigError as err:
        raise ConfigError(f"{file}: {err}") from None
