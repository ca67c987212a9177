#!/usr/bin/env bash
# README's "Run the walkthrough" command: the set-up where missing (e2e/setup.sh), then
# `python -m e2e.walkthrough` on a fresh test-bed. Arguments go to it (e.g. --keep).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
e2e/setup.sh
exec .venv/bin/python -m e2e.walkthrough "$@"
