#!/usr/bin/env bash
# The walkthrough with a real kubelet and real containers, next to the test-bed's control
# plane (e2e/kubelet/README.md). Needs root. Unattended:
#   1. e2e/setup.sh --image --node: .venv, Debian's runc, containernetworking-plugins and
#      busybox-static when missing, Docker and the image's base, the control plane with the
#      kubelet, containerd and crictl (all cached);
#   2. pytest e2e/test_real_kubelet.py -m real_kubelet (PYTEST_ARGS to change); its fixture
#      builds the controller image dra-quota-reconciler:dev (e2e/build-image.sh, Docker's cache).
#
#   e2e/kubelet/run.sh                     all of it (e2e/test.sh runs the same tests in CI)
#   .venv/bin/python -m e2e.kubelet up     control plane + real node kept running (Ctrl-C stops)
#   .venv/bin/python -m e2e.kubelet smoke  ... and one busybox pod, its log printed
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
PYTHON=${PYTHON:-$root/.venv/bin/python}
PYTEST_ARGS=${PYTEST_ARGS:-e2e/test_real_kubelet.py -m real_kubelet}
log() { printf '[kubelet/run.sh] %s\n' "$*" >&2; }

[[ $(id -u) == 0 ]] || { log "needs root (containerd, runc, mounts, a bridge)"; exit 2; }
start=$(date +%s)

log "set-up (e2e/setup.sh --image --node: Debian's runc, CNI plugins, busybox-static; binaries)"
e2e/setup.sh --image --node
log "set-up done after $(( $(date +%s) - start ))s"
# shellcheck disable=SC2086
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest $PYTEST_ARGS -p no:cacheprovider --durations=0
log "done in $(( $(date +%s) - start ))s"
