"""`reconciler simulate`: manifests in, admitted offline through the feed, what the API would show out.

inputs.py decodes and sorts the objects, run.py admits them with the core's engine (no I/O),
command.py reads the files and prints; whatif.py is the dry run of `reconciler explain --what-if`
against a snapshot of the cluster.
"""

from __future__ import annotations

from .command import ConfigError, InputError, collect_objects, render, run_simulation, settings_of
from .inputs import InputObject, SimulationError, SimulationResult
from .run import FairSharing, Prepared, prepare, simulate
from .whatif import WhatIf, WhatIfSettings, render_what_if, what_if

__all__ = [
    "ConfigError",
    "FairSharing",
    "InputError",
    "InputObject",
    "Prepared",
    "SimulationError",
    "SimulationResult",
    "WhatIf",
    "WhatIfSettings",
    "collect_objects",
    "prepare",
    "render",
    "render_what_if",
    "run_simulation",
    "settings_of",
    "simulate",
    "what_if",
]
