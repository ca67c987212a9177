"""Benchmarks: admission.py (the pure core), e2e_admission.py (the controller on the test-bed)."""
