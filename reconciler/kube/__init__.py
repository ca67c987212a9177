"""The only code that talks to the Kubernetes API: client, errors, watches (informers), leader election."""

from reconciler.kube.backoff import Backoff
from reconciler.kube.client import KubeClient
from reconciler.kube.errors import (
    ApiError,
    ConfigError,
    Conflict,
    DecodeError,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NamespaceTerminating,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from reconciler.kube.watch import EventKind, HasMetadata, Informer, InformerStats, WatchEvent

__all__ = [
    "ApiError",
    "Backoff",
    "ConfigError",
    "Conflict",
    "DecodeError",
    "EventKind",
    "Forbidden",
    "Gone",
    "HasMetadata",
    "Informer",
    "InformerStats",
    "Invalid",
    "KubeClient",
    "KubeError",
    "NamespaceTerminating",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WatchEvent",
]
