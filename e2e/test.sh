#!/usr/bin/env bash
# README's "Test" command, and CI's (.ci/run): the set-up where missing (e2e/setup.sh),
# lint and types (ruff, ruff format --check, mypy strict, lint-imports, the generated
# protos), then pytest: tests/ and the end-to-end tests on the test-bed (e2e/), the
# conformance scenarios compared with Kueue's recorded results (Kueue itself is not built
# here: a stale recording fails e2e/test_conformance.py with the command that records it).
# Arguments go to pytest, e.g. `e2e/test.sh tests -x`.
# Ends with a table of the time of each phase (set-up by part, lint and types, the unit
# tests, each end-to-end file, conformance) and the total, also when a phase fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PHASE_TIMES=$(mktemp "${TMPDIR:-/tmp}/phase-times.XXXXXX")
export PHASE_TIMES
began=$SECONDS

print_times() {
  local rc=$?
  printf '\n== time by phase (e2e/test.sh)\n'
  awk -F'\t' -v total=$((SECONDS - began)) '
    function mmss(s) { return sprintf("%d:%02d", int(s / 60), s % 60) }
    { label[NR] = $1; secs[NR] = $2; if (length($1) > width) width = length($1) }
    END {
      if (width < 5) width = 5
      for (i = 1; i <= NR; i++) printf "  %-*s %7s\n", width, label[i], mmss(secs[i])
      printf "  %-*s %7s\n", width, "total", mmss(total)
    }' "$PHASE_TIMES"
  rm -f "$PHASE_TIMES"
  exit "$rc"
}
trap print_times EXIT

# phase LABEL COMMAND...: runs the command, appends its wall time to the table.
phase() {
  local label=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  printf '%s\t%s\n' "$label" $((SECONDS - start)) >> "$PHASE_TIMES"
  return "$rc"
}

echo "== set-up (README: Set up, plus Docker and a real node's parts for the image and real-kubelet tests; skipped where done)"
# setup.sh adds a line per part (venv, each build of build-binaries.sh, image, node packages);
# --jobset: the real JobSet controller of e2e/test_controller_jobset.py.
e2e/setup.sh --image --node --jobset

echo "== lint and types"
phase "lint: ruff check" .venv/bin/ruff check .
phase "lint: ruff format --check" .venv/bin/ruff format --check .
phase "types: mypy (strict)" .venv/bin/mypy
phase "lint: lint-imports" .venv/bin/lint-imports
phase "lint: protos generated" e2e/testbed/protos/generate.sh --check

echo "== tests (README: Test)"
# The real-kubelet tests (left out of a bare `pytest` by addopts: they need root) run here too;
# a -m given in "$@" comes later and wins. The plugin adds a line per test file.
phase "pytest (all, wall)" env PYTHONPATH=. .venv/bin/pytest -p e2e.support.phase_times -m "not kind" "$@"
