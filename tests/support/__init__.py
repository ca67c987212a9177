"""Builders, fakes and harnesses shared by the test modules (test modules never import each other)."""
