"""`reconciler simulate`: manifests in, admitted offline through the feed, what the API would show out.

inputs.py decodes and sorts the objects, run.py admits them with the core's engine (no I/O),
command.py reads the files and prints.
"""

from __future__ import annotations

from .command import ConfigError, InputError, collect_objects, render, run_simulation
from .inputs import InputObject, SimulationError, SimulationResult
from .run import FairSharing, Prepared, prepare, simulate

__all__ = [
    "ConfigError",
    "FairSharing",
    "InputError",
    "InputObject",
    "Prepared",
    "SimulationError",
    "SimulationResult",
    "collect_objects",
    "prepare",
    "render",
    "run_simulation",
    "simulate",
]
