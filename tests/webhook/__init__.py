"""Tests of the admission webhooks: rules, server, certificates."""
