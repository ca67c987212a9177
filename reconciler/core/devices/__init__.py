"""Devices: DRA claim charges, first-available choices, device CEL selectors, per-flavor inventory."""
