#!/usr/bin/env bash
# The walkthrough with a real kubelet and real containers, next to the test-bed's control
# plane (e2e/kubelet/README.md). Needs root. Unattended:
#   1. Debian's runc, containernetworking-plugins and busybox-static when missing;
#   2. e2e/build-binaries.sh --node (control plane + kubelet, containerd, crictl; cached);
#   3. e2e/build-image.sh (the controller image dra-quota-reconciler:dev; Docker's cache);
#   4. pytest e2e/test_real_kubelet.py -m real_kubelet (PYTEST_ARGS to change).
#
#   e2e/kubelet/run.sh                 all of it
#   SKIP_IMAGE=1 e2e/kubelet/run.sh    no image build (the deployed-controller test then fails
#                                      unless the image exists already)
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

missing=()
[[ -x /usr/sbin/runc ]] || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)  # static: the image has no libc
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
fi

log "binaries (e2e/build-binaries.sh --node)"
bash e2e/build-binaries.sh --node >/dev/null
log "binaries ready after $(( $(date +%s) - start ))s"
if [[ -z "${SKIP_IMAGE:-}" ]]; then
  log "controller image (e2e/build-image.sh)"
  bash e2e/build-image.sh >/dev/null
  log "image ready after $(( $(date +%s) - start ))s"
fi
# shellcheck disable=SC2086
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m pytest $PYTEST_ARGS -p no:cacheprovider --durations=0
log "done in $(( $(date +%s) - start ))s"
