#!/usr/bin/env bash
# README's set-up, done only where it is missing, so e2e/walkthrough.sh and e2e/test.sh
# work on a fresh machine (Python >= 3.11 and Go >= 1.26) and cost ~2 s once done:
#   1. python3 -m venv .venv, then the locked dev dependencies (pip install --require-hashes -r
#      requirements-dev.lock; refreshed by e2e/lock.sh) and the project (pip install --no-deps -e .);
#      again whenever pyproject.toml or the lock changed: a stamp in .venv holds their hash;
#   2. e2e/build-binaries.sh (it reuses whatever its cache already holds);
#   3. with --image: e2e/build-image.sh --base-only: Docker (Debian's docker.io, dockerd
#      started when none answers) and the base image for the controller image (debootstrap,
#      cached); the controller image itself is built by e2e/test_image_walkthrough.py's fixture.
#   4. with --node: a real node's parts (e2e/kubelet/): Debian's runc, containernetworking-plugins,
#      busybox-static, iptables and iproute2 (as root, where missing), and build-binaries.sh --node (kubelet,
#      containerd, crictl; cached).
# Options (e2e/test.sh passes --image --node --jobset --lws --trainer --kuberay --appwrapper --kueuectl --kueue --kubeflow): --jobset builds JobSet's manager for
# e2e/test_controller_jobset.py (build-binaries.sh --jobset; cached by version); --lws builds
# LeaderWorkerSet's manager for e2e/test_controller_lws.py (build-binaries.sh --lws; cached by
# version); --trainer builds Kubeflow Trainer's manager for e2e/test_controller_trainjob.py and the
# trainjob conformance scenario (build-binaries.sh --trainer; cached by version); --kuberay builds
# KubeRay's ray-operator for e2e/test_controller_ray.py (build-binaries.sh --kuberay; cached by
# version); --appwrapper builds the AppWrapper controller for e2e/test_controller_appwrapper.py
# (build-binaries.sh --appwrapper; cached by version); --kueuectl builds Kueue's kubectl plugin and kubectl for
# e2e/test_visibility.py (build-binaries.sh --kueuectl; cached by version); --kubeflow builds the
# training-operator v1 and mpi-operator managers for e2e/test_controller_kubeflow.py
# (build-binaries.sh --kubeflow; cached by version); --kueue also builds Kueue's manager (for
# recording Kueue's results, `python -m e2e.conformance --record`, the live side-by-side
# run, and the MultiKueue manager of e2e/test_multikueue.py; CI compares with the recordings); --kueue-perf builds Kueue's
# scheduler-performance runner and checker for bench/kueue_perf.py (not in CI); --image does step 3 (needs root
# where Docker or the base image is missing); --node does step 4 (e2e/test_real_kubelet.py).
# With $PHASE_TIMES naming a file (e2e/test.sh), each part's wall time is appended to it as
# `set-up: PART<TAB>SECONDS` (build-binaries.sh adds one line per build).
# Unattended; progress on stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[setup] %s\n' "$*" >&2; }
part_began=$SECONDS
part_done() {
  if [[ -n "${PHASE_TIMES:-}" ]]; then printf 'set-up: %s\t%s\n' "$1" $((SECONDS - part_began)) >> "$PHASE_TIMES"; fi
  part_began=$SECONDS
}

stamp=.venv/.dra-quota-setup
wanted="$(cat pyproject.toml requirements-dev.lock | sha256sum | cut -d' ' -f1) $(pwd)"
if [[ ! -x .venv/bin/python ]]; then
  command -v python3 >/dev/null || { log "python3 is not installed; install Python >= 3.11"; exit 1; }
  log "creating .venv with $(python3 --version)"
  python3 -m venv .venv
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
  log "installing the locked dev dependencies (requirements-dev.lock) and the project into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements-dev.lock
  # the project itself, built with the locked setuptools (no build environment from the index)
  .venv/bin/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
  printf '%s\n' "$wanted" > "$stamp"
else
  log ".venv is up to date with pyproject.toml and requirements-dev.lock"
fi
part_done "venv (requirements-dev.lock, pip install -e .)"
binaries_args=()
with_image=0
for arg in "$@"; do
  case "$arg" in
    --kueue | --kueue-perf | --jobset | --lws | --trainer | --kuberay | --appwrapper | --kueuectl | --kubeflow | --node) binaries_args+=("$arg") ;;
    --image) with_image=1 ;;
    *) log "usage: $0 [--kueue] [--kueue-perf] [--jobset] [--lws] [--trainer] [--kuberay] [--appwrapper] [--kueuectl] [--kubeflow] [--image] [--node]"; exit 2 ;;
  esac
done
if [[ " ${binaries_args[*]} " == *" --node "* ]]; then
  missing=()
  [[ -x /usr/sbin/runc ]] || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)  # static: the image has no libc
  command -v iptables >/dev/null || missing+=(iptables)  # the kubernetes Service's DNAT rule
  command -v ip >/dev/null || missing+=(iproute2)  # the node's bridge
  if [[ ${#missing[@]} -gt 0 ]]; then
    [[ $(id -u) == 0 ]] || { log "a real node needs ${missing[*]} from Debian: run this as root once"; exit 1; }
    log "installing ${missing[*]} (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
  fi
  part_done "a real node's Debian packages"
fi
e2e/build-binaries.sh "${binaries_args[@]}" >/dev/null
part_began=$SECONDS
if (( with_image )); then
  if [[ $(id -u) == 0 ]]; then
    e2e/build-image.sh --base-only >/dev/null
  else
    e2e/build-image.sh --base-only >/dev/null ||
      log "Docker is not set up (that needs root once); e2e/test_image_walkthrough.py will fail until it is"
  fi
  part_done "Docker and the image's base (build-image.sh --base-only)"
fi
