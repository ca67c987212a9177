"""The registry: Kueue framework names -> the registrations of the kinds that implement them.

Each kind registers once, with one line below; everything the controller does for a kind (its
watches, webhooks, RBAC rules, decisions) is read from here. `registered` adds a kind for a
while (the tests' throwaway kinds).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Protocol

from reconciler.config_sections.fields import ConfigError
from reconciler.config_sections.frameworks import KNOWN_FRAMEWORKS

from . import batchjob, jobset, lws, pods
from .apps import STATEFULSET_REGISTRATION, deployment
from .base import Integration
from .registration import Registration

__all__ = [
    "REGISTRATIONS",
    "REGISTRY",
    "check_frameworks",
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


def check_frameworks(config: _Configured) -> None:
    """Refuse a Configuration that enables a framework no registered kind implements, naming the
    field and the implemented values (the Configuration itself checks them against Kueue's)."""
    for i, name in enumerate(config.frameworks):
        if name not in _REGISTRATIONS:
            later = (
                f" (Kueue's {name!r} integration is not implemented yet)" if name in KNOWN_FRAMEWORKS else ""
            )
            raise ConfigError(
                f"integrations.frameworks[{i}]: Unsupported value: {name!r}: supported values: "
                + ", ".join(f'"{f}"' for f in sorted(_REGISTRATIONS))
                + later
            )
