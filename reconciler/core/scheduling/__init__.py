"""The decisions: flavor assignment, preemption, kept verdicts, PodsReady timing, the scheduler."""
