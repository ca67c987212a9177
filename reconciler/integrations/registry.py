"""The registry: Kueue framework names -> the registrations of the kinds that implement them.

Each kind registers once, with one line below; everything the controller does for a kind (its
watches, webhooks, RBAC rules, decisions) is read from here. `registered` adds a kind for a
while (the tests' throwaway kinds).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from reconciler.config_sections.fields import ConfigError
from reconciler.config_sections.frameworks import KNOWN_FRAMEWORKS

from . import appwrapper, batchjob, jobset, kubeflow, lws, pods, ray, trainjob
from .apps import STATEFULSET_REGISTRATION, deployment
from .base import Integration
from .registration import Registration

__all__ = [
    "REGISTRATIONS",
    "REGISTRY",
    "Unimplemented",
    "check_frameworks",
    "describe_unimplemented",
    "enabled",
    "enabled_registrations",
    "implied_only",
    "register",
    "registered",
    "with_implied",
]


class _Configured(Protocol):
    @property
    def frameworks(self) -> Sequence[str]: ...


_REGISTRATIONS: dict[str, Registration] = {}
_INTEGRATIONS: dict[str, Integration] = {}
# Framework name -> registration, in the order registered.
REGISTRATIONS: Mapping[str, Registration] = MappingProxyType(_REGISTRATIONS)
# Framework name -> integration.
REGISTRY: Mapping[str, Integration] = MappingProxyType(_INTEGRATIONS)


def register(registration: Registration) -> None:
    framework = registration.framework
    if framework in _REGISTRATIONS:
        raise ValueError(f"framework {framework!r} is registered already")
    _REGISTRATIONS[framework] = registration
    if registration.integration is not None:
        _INTEGRATIONS[framework] = registration.integration


@contextmanager
def registered(registration: Registration) -> Iterator[Registration]:
    """The registration in the registry while the block runs."""
    register(registration)
    try:
        yield registration
    finally:
        del _REGISTRATIONS[registration.framework]
        _INTEGRATIONS.pop(registration.framework, None)


register(batchjob.REGISTRATION)
register(jobset.REGISTRATION)
register(lws.REGISTRATION)
register(pods.REGISTRATION)
register(kubeflow.pytorchjob.REGISTRATION)
register(kubeflow.tfjob.REGISTRATION)
register(kubeflow.xgboostjob.REGISTRATION)
register(kubeflow.paddlejob.REGISTRATION)
register(kubeflow.jaxjob.REGISTRATION)
register(kubeflow.mpijob.REGISTRATION)
register(ray.RAYCLUSTER_REGISTRATION)
register(ray.RAYJOB_REGISTRATION)
register(trainjob.REGISTRATION)
register(appwrapper.REGISTRATION)
register(deployment.REGISTRATION)
register(STATEFULSET_REGISTRATION)


def with_implied(frameworks: Iterable[str]) -> tuple[str, ...]:
    """The frameworks listed and, after them, those they imply (Kueue's implicitly enabled
    frameworks: `deployment` and `statefulset` turn on `pod`), each once."""
    listed = tuple(dict.fromkeys(frameworks))
    implied = [
        other
        for name in listed
        if name in _REGISTRATIONS
        for other in _REGISTRATIONS[name].implies
        if other not in listed
    ]
    return listed + tuple(dict.fromkeys(implied))


def implied_only(frameworks: Iterable[str], framework: str) -> bool:
    """Whether `framework` is on only because a listed one implies it (Kueue then lets its
    integration act only on the objects an implying framework marked as its own)."""
    listed = tuple(frameworks)
    return framework not in listed and framework in with_implied(listed)


def enabled(frameworks: Iterable[str], registry: Mapping[str, Integration] = REGISTRY) -> list[Integration]:
    """The integrations `integrations.frameworks` selects from `registry`, with those the listed
    ones imply (`check_frameworks` has refused the names none implements)."""
    return [registry[name] for name in with_implied(frameworks) if name in registry]


def enabled_registrations(frameworks: Iterable[str]) -> list[Registration]:
    return [_REGISTRATIONS[name] for name in with_implied(frameworks) if name in _REGISTRATIONS]


@dataclass(frozen=True)
class Unimplemented:
    """A framework of Kueue's that `integrations.frameworks` enables and this build lacks."""

    index: int
    name: str

    @property
    def path(self) -> str:
        return f"integrations.frameworks[{self.index}]"


def check_frameworks(config: _Configured) -> list[Unimplemented]:
    """The frameworks `integrations.frameworks` enables that Kueue v0.18.1 implements and this
    build does not (the caller names them: Kueue's own Configuration file must start the
    controller). A name no registered kind implements and Kueue does not know either is refused,
    naming the field and the supported values (the Configuration refuses those first; this
    guards other callers)."""
    unimplemented = []
    for i, name in enumerate(config.frameworks):
        if name in _REGISTRATIONS:
            continue
        if name not in KNOWN_FRAMEWORKS:
            raise ConfigError(
                f"integrations.frameworks[{i}]: Unsupported value: {name!r}: supported values: "
                + ", ".join(f'"{f}"' for f in sorted(_REGISTRATIONS))
            )
        unimplemented.append(Unimplemented(i, name))
    return unimplemented


def describe_unimplemented(unimplemented: Sequence[Unimplemented]) -> str:
    """One line naming them, what that means, and what is implemented."""
    return (
        "integrations.frameworks enables Kueue frameworks this controller does not implement, whose "
        "objects are not queued: "
        + ", ".join(f"{u.name} ({u.path})" for u in unimplemented)
        + "; implemented: "
        + ", ".join(sorted(_REGISTRATIONS))
    )
