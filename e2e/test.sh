#!/usr/bin/env bash
# README's "Test" command, and CI's (.ci/run): the set-up where missing (e2e/setup.sh),
# lint and types (ruff, ruff format --check, mypy strict, lint-imports, the generated
# protos), then pytest: tests/ and the end-to-end tests on the test-bed (e2e/), the
# conformance scenarios compared with Kueue's recorded results (Kueue's manager is built, for
# the MultiKueue test, but not run by them: a stale recording fails e2e/test_conformance.py with
# the command that records it).
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
    # Parallel pytest workers each write their lines: one row per label, in first-seen order;
    # collection is the time of the slowest worker, the unit tests the sum over the workers.
    {
      if (!($1 in secs)) { order[++n] = $1; secs[$1] = 0 }
      if ($1 == "pytest: collection") { if ($2 > secs[$1]) secs[$1] = $2 } else secs[$1] += $2
      if (length($1) > width) width = length($1)
    }
    END {
      if (width < 5) width = 5
      for (i = 1; i <= n; i++) printf "  %-*s %7s\n", width, order[i], mmss(secs[order[i]])
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

echo "== set-up (docs/setup.md, plus Docker and a real node's parts for the image and real-kubelet tests; skipped where done)"
# setup.sh adds a line per part (venv, each build of build-binaries.sh, image, node packages);
# --jobset, --lws, --trainer, --kuberay: the real JobSet, LeaderWorkerSet, Kubeflow Trainer and
# KubeRay controllers of e2e/test_controller_jobset.py, e2e/test_controller_lws.py,
# e2e/test_controller_trainjob.py and e2e/test_controller_ray.py, --kubeflow: the
# training-operator and mpi-operator of e2e/test_controller_kubeflow.py, --appwrapper: the AppWrapper
# controller of e2e/test_controller_appwrapper.py (built once, cached by
# version outside the repository); --kueuectl: Kueue's kubectl plugin and kubectl; --kueue: Kueue's
# manager, the MultiKueue manager of e2e/test_multikueue.py (the conformance scenarios still
# compare with the recordings).
e2e/setup.sh --image --node --jobset --lws --trainer --kuberay --appwrapper --kueuectl --kueue --kubeflow

echo "== lint and types"
phase "lint: ruff check" .venv/bin/ruff check .
phase "lint: ruff format --check" .venv/bin/ruff format --check .
phase "types: mypy (strict)" .venv/bin/mypy
phase "lint: lint-imports" .venv/bin/lint-imports
phase "lint: protos generated" e2e/testbed/protos/generate.sh --check

echo "== tests (docs/testing.md)"
# The real-kubelet tests (left out of a bare `pytest` by addopts: they need root) run here too;
# a -m given in "$@" comes later and wins. The plugin adds a line per test file.
# Test files run on PYTEST_WORKERS parallel workers (pytest-xdist; default 3: the end-to-end
# tests mostly wait on the API, so three fit a 2-core machine), a whole file on one worker (its
# module fixtures shared as in a serial run), each worker with its own session test-bed; the
# longest files start first (e2e/conftest.py). PYTEST_WORKERS=0 runs everything in one process.
workers=${PYTEST_WORKERS:-3}
parallel=()
[[ $workers == 0 ]] || parallel=(-n "$workers" --dist loadfile)
phase "pytest (all, wall; $workers workers)" env PYTHONPATH=. .venv/bin/pytest -p e2e.support.phase_times \
  "${parallel[@]}" -m "not kind" "$@"
