"""What a kind of job registers, once, in its own module: the integration (its jobs' pod sets,
patches and facts), the webhooks that guard its objects at the door, and the API access the
controller needs for it. The runtime, the webhook server, `simulate` and `explain` read the
registry; `reconciler manifests` writes the RBAC rules and webhook configurations from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.admission.routes import Route

from .base import Integration

__all__ = ["Access", "Registration"]


@dataclass(frozen=True)
class Access:
    """One RBAC rule the controller needs for a kind: verbs on resources of one API group.
    `why` is the comment the generated ClusterRole carries above it."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str = ""


@dataclass(frozen=True)
class Registration:
    """A kind of job as the controller knows it (see the module's docstring)."""

    integration: Integration
    webhooks: tuple[Route, ...] = ()
    access: tuple[Access, ...] = ()

    @property
    def framework(self) -> str:
        return self.integration.framework
