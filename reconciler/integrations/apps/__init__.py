"""Deployments and StatefulSets (Kueue's frameworks ``deployment`` and ``statefulset``): their
webhooks and registrations. Their pods are the `pod` integration's jobs, which either turns on.
"""

from . import deployment

__all__ = ["deployment"]
