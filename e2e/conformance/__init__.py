"""Conformance against real Kueue: `python -m e2e.conformance [SCENARIO...]`.

Each scenario (a YAML step list in scenarios/) runs twice on fresh test-beds: once with
Kueue's manager out of cluster (`kueue.py`) and once with `reconciler run`. At each
checkpoint the normalized state (`snapshot.py`) is taken; the two runs are compared field
by field (`compare.py`) and differences not listed in intentional-differences.yaml fail.
"""
