#!/usr/bin/env bash
# README's "Test" command, and CI's (.ci/run): the set-up where missing (e2e/setup.sh),
# lint and types (ruff, ruff format --check, mypy strict, lint-imports, the generated
# protos), then pytest: tests/ and the end-to-end tests on the test-bed (e2e/).
# Arguments go to pytest, e.g. `e2e/test.sh tests -x`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "== set-up (README: Set up, plus Kueue, Docker and a real node's parts for the conformance, image and real-kubelet tests; skipped where done)"
e2e/setup.sh --kueue --image --node

echo "== lint and types"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
e2e/testbed/protos/generate.sh --check

echo "== tests (README: Test)"
# The real-kubelet tests (left out of a bare `pytest` by addopts: they need root) run here too;
# a -m given in "$@" comes later and wins.
exec .venv/bin/pytest -m "not kind" "$@"
