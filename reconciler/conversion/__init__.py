"""Kueue's CRDs served in v1beta1 beside v1beta2 (the stored version): the conversion webhook's
ConversionReview (``review``), one object between the versions (``kinds``), each kind's field
steps (``queues``, ``workloads``, ``topology``) and the shared field helpers (``fields``). Pure:
decoded objects in and out, no I/O."""

from .fields import ConversionError
from .kinds import GROUP, HUB, KINDS, SPOKE, VERSIONS, convert
from .review import REVIEW_API_VERSION, Outcome, convert_review

__all__ = [
    "GROUP",
    "HUB",
    "KINDS",
    "REVIEW_API_VERSION",
    "SPOKE",
    "VERSIONS",
    "ConversionError",
    "Outcome",
    "convert",
    "convert_review",
]
