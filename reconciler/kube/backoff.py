"""Jittered exponential backoff."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays ``initial, initial*factor, ...`` capped at ``maximum``, each jittered.

    ``jitter`` is the fraction taken off at random: a delay lies in
    ``[base * (1 - jitter), base]``, so ``initial * (1 - jitter)`` is the floor
    and ``maximum`` the ceiling.
    """

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.maximum) or self.factor < 1 or not (0 <= self.jitter < 1):
            raise ValueError(f"invalid backoff: {self}")

    @property
    def floor(self) -> float:
        return self.initial * (1 - self.jitter)

    def delays(self) -> Iterator[float]:
        """An endless series of jittered delays; start a new one to reset."""
        base = self.initial
        while True:
            yield base * (1 - self.jitter * random.random())
            base = min(base * self.factor, self.maximum)
