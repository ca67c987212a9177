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
    """A kind of job as the controller knows it (see the module's docstring).

    `integration` is None for a framework whose objects are never jobs themselves (Kueue's
    no-op reconciler: its webhooks mark the pods it makes, another integration's jobs); `name`
    is then its framework name. `implies` are the frameworks enabling it turns on too (Kueue's
    ImplicitlyEnabledFrameworkNames): their integrations then serve only the objects it marks.
    """

    integration: Integration | None
    webhooks: tuple[Route, ...] = ()
    access: tuple[Access, ...] = ()
    name: str = ""
    implies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.integration is None and not self.name:
            raise ValueError("a registration without an integration needs its framework name")

    @property
    def framework(self) -> str:
        return self.integration.framework if self.integration is not None else self.name
