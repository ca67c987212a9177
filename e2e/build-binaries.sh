#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kustomize and helm from Go modules with the machine's Go, unpacks prometheus and
# promtool from Debian's package (apt-get download, never installed, no service
# started) and copies the prometheus-operator CRDs out of their Go module, into
# a cache outside the repository keyed by version. Anything already in the
# cache is reused. Unattended; prints what it does. Prints the cache directory
# on the last line of stdout.
#
# --kueue also builds Kueue's manager (cmd/kueue of sigs.k8s.io/kueue@$KUEUE_VERSION)
# and copies its CRDs and webhook manifests, for the conformance runner
# (python -m e2e.conformance, --record and the live side-by-side run). Not part of the
# default set-up nor of CI's (CI compares with the recorded results): ~10 min cold.
#
# --jobset builds JobSet's manager (main.go of sigs.k8s.io/jobset@$JOBSET_VERSION) and copies
# its CRD, webhook manifests and their patches, for e2e/test_controller_jobset.py (~3 min cold).
#
# --lws builds LeaderWorkerSet's manager (cmd/main.go of sigs.k8s.io/lws@$LWS_VERSION) and copies
# its CRD and webhook manifests, for e2e/test_controller_lws.py.
#
# --kubeflow builds the training-operator v1 manager (cmd/training-operator.v1 of
# github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION) and mpi-operator's
# (cmd/mpi-operator of github.com/kubeflow/mpi-operator@$MPI_OPERATOR_VERSION), with their CRDs
# (the training-operator's without its v1 MPIJob, whose CRD name mpi-operator's v2beta1 one takes)
# and the training-operator's webhook manifests, for e2e/test_controller_kubeflow.py.
# --trainer builds Kubeflow Trainer's manager (cmd/trainer-controller-manager of
# github.com/kubeflow/trainer/v2@$TRAINER_VERSION) and copies its CRDs and webhook manifests, for
# e2e/test_controller_trainjob.py and the trainjob conformance scenario.
# --kuberay builds KubeRay's ray-operator (main.go of github.com/ray-project/kuberay/ray-operator@
# $KUBERAY_VERSION) and copies its CRDs, for e2e/test_controller_ray.py and the ray conformance
# scenarios.
# --appwrapper builds the AppWrapper controller (cmd/main.go of github.com/project-codeflare/appwrapper@
# $APPWRAPPER_VERSION, the version Kueue v0.18.1's go.mod pins) and copies its CRD and webhook
# manifests, for e2e/test_controller_appwrapper.py.
#
# --kueuectl builds Kueue's kubectl plugin (cmd/kueuectl of sigs.k8s.io/kueue@$KUEUE_VERSION, the
# module hash checked as for --kueue), and kubectl of the control plane's Kubernetes module build,
# for e2e/test_visibility.py (~4 min cold; kubectl ~5 min more on a loaded 2-core machine).
#
# --kueue-perf builds Kueue's scheduler-performance runner (test/performance/scheduler/runner of
# sigs.k8s.io/kueue@$KUEUE_VERSION) and its checker (the Go test of .../scheduler/checker, as a test
# binary) and copies its configs/, for bench/kueue_perf.py.

# --node builds what a real node needs (e2e/kubelet/run.sh): the kubelet of the same
# Kubernetes module build (in the control plane's `go build`), containerd (containerd, containerd-shim-runc-v2, ctr) from
# github.com/containerd/containerd/v2@$CONTAINERD_VERSION and crictl from
# sigs.k8s.io/cri-tools@$CRI_TOOLS_VERSION. runc and the CNI plugins come from Debian
# (e2e/kubelet/run.sh installs them). Not part of the default set-up.
set -euo pipefail

with_kueue=0
with_jobset=0
with_lws=0
with_kubeflow=0
with_trainer=0
with_kuberay=0
with_appwrapper=0
with_kueuectl=0
with_node=0
with_kueue_perf=0
for arg in "$@"; do
  case "$arg" in
    --kueue) with_kueue=1 ;;
    --jobset) with_jobset=1 ;;
    --lws) with_lws=1 ;;
    --kubeflow) with_kubeflow=1 ;;
    --trainer) with_trainer=1 ;;
    --kuberay) with_kuberay=1 ;;
    --appwrapper) with_appwrapper=1 ;;
    --kueuectl) with_kueuectl=1 ;;
    --node) with_node=1 ;;
    --kueue-perf) with_kueue_perf=1 ;;
    *) echo "usage: $0 [--kueue] [--jobset] [--lws] [--kubeflow] [--trainer] [--kuberay] [--appwrapper] [--kueuectl] [--kueue-perf] [--node]" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-quota-testbed}
k8s_dir="$cache/kubernetes-$KUBERNETES_VERSION"
etcd_dir="$cache/etcd-$ETCD_VERSION"
kustomize_dir="$cache/kustomize-$KUSTOMIZE_VERSION"
helm_dir="$cache/helm-$HELM_VERSION"
prometheus_dir="$cache/prometheus-$PROMETHEUS_VERSION"
monitoring_crds_dir="$cache/prometheus-operator-crds-$PROMETHEUS_OPERATOR_VERSION"
kueue_dir="$cache/kueue-$KUEUE_VERSION-trainer-$TRAINER_VERSION"
kueue_perf_dir="$cache/kueue-perf-$KUEUE_VERSION"
jobset_dir="$cache/jobset-$JOBSET_VERSION"
lws_dir="$cache/lws-$LWS_VERSION"
training_operator_dir="$cache/training-operator-$TRAINING_OPERATOR_VERSION"
mpi_operator_dir="$cache/mpi-operator-$MPI_OPERATOR_VERSION"
trainer_dir="$cache/trainer-$TRAINER_VERSION"
kuberay_dir="$cache/kuberay-$KUBERAY_VERSION"
appwrapper_dir="$cache/appwrapper-$APPWRAPPER_VERSION"
kueuectl_dir="$cache/kueuectl-$KUEUE_VERSION"
containerd_dir="$cache/containerd-$CONTAINERD_VERSION"
cri_tools_dir="$cache/cri-tools-$CRI_TOOLS_VERSION"
monitoring_crds=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { printf '[build-binaries] %s\n' "$*" >&2; }

# One build at a time (parallel pytest workers may all find a binary missing): the others wait,
# then find it built.
mkdir -p "$cache"
exec 9>"$cache/build-binaries.lock"
flock 9

# `go build -v` names each package as it compiles it; show one line per 100.
progress() {
  awk -v what="$1" '{ n++; if (n % 100 == 0) { printf "[build-binaries] %s: %d packages compiled\n", what, n > "/dev/stderr"; fflush("/dev/stderr") } }
       END { printf "[build-binaries] %s: %d packages compiled in total\n", what, n > "/dev/stderr" }'
}

command -v go >/dev/null || { log "go is not installed; install Go >= 1.26 (1.25 builds all but helm)"; exit 1; }
log "go: $(go version)"

build_etcd() {
  if [[ -x "$etcd_dir/bin/etcd" ]]; then
    log "etcd $ETCD_VERSION: cached at $etcd_dir/bin/etcd"
    return
  fi
  log "etcd $ETCD_VERSION: building in $etcd_dir/src"
  mkdir -p "$etcd_dir/src" "$etcd_dir/bin"
  cd "$etcd_dir/src"
  cat > go.mod <<MOD
module testbed.invalid/etcd

go 1.25

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat > main.go <<'SRC'
// Wrapper so etcd's server module builds without its in-repo replace directives.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
SRC
  log "etcd: resolving modules (go mod tidy)"
  go mod tidy
  log "etcd: compiling"
  go build -v -trimpath -o "$etcd_dir/bin/etcd.tmp" . 2>&1 | progress etcd
  mv "$etcd_dir/bin/etcd.tmp" "$etcd_dir/bin/etcd"
  log "etcd: done ($("$etcd_dir/bin/etcd" --version | head -n1))"
}

kubernetes_ldflags() {
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

# The control plane (kube-apiserver, kube-controller-manager, kube-scheduler) and, with
# --node, the kubelet: one module set (src/go.mod pins every staging module to the release's
# tag) and one `go build` for all the commands missing from the cache, so the packages they
# share are loaded and compiled once and the links run side by side. Each binary is cached on
# its own ($k8s_dir/bin/<command>), so a cache filled by the earlier one-command-per-build
# script stays valid.
build_kubernetes() {
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler)
  if [[ $with_node == 1 ]]; then cmds+=(kubelet); fi
  # kubectl of the control plane's version, with --kueuectl (e2e/test_visibility.py: `kubectl get --raw`).
  if [[ $with_kueuectl == 1 ]]; then cmds+=(kubectl); fi
  local wanted=() c
  for c in "${cmds[@]}"; do [[ -x "$k8s_dir/bin/$c" ]] || wanted+=("$c"); done
  if [[ ${#wanted[@]} == 0 ]]; then
    log "kubernetes $KUBERNETES_VERSION: ${cmds[*]} cached in $k8s_dir/bin"
    return
  fi
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  log "kubernetes $KUBERNETES_VERSION (staging modules $staging_version): building ${wanted[*]} in $k8s_dir/src"
  mkdir -p "$k8s_dir/src" "$k8s_dir/bin"
  cd "$k8s_dir/src"
  if ! grep -qs "k8s.io/kubernetes $KUBERNETES_VERSION\$" go.mod; then
    log "kubernetes: downloading k8s.io/kubernetes@$KUBERNETES_VERSION go.mod"
    local upstream_mod
    upstream_mod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [[ -f "$upstream_mod" ]] || { log "could not find the go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION"; exit 1; }
    # Every staging module is replaced by ./staging/src/... upstream; pin each to
    # the published tag of the same release instead.
    local replaces
    replaces=$(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*#\1#p' "$upstream_mod" | sort -u)
    [[ -n "$replaces" ]] || { log "no staging replace directives found in $upstream_mod"; exit 1; }
    log "kubernetes: pinning $(wc -l <<<"$replaces") staging modules to $staging_version"
    {
      printf 'module testbed.invalid/kubernetes\n\ngo 1.25\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KUBERNETES_VERSION"
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done <<<"$replaces"
      printf ')\n'
    } > go.mod
  fi
  log "kubernetes: resolving modules (go get -tool; large download on a new machine)"
  local pkgs=()
  for c in "${wanted[@]}"; do
    go get -tool "k8s.io/kubernetes/cmd/$c@$KUBERNETES_VERSION"
    pkgs+=("k8s.io/kubernetes/cmd/$c")
  done
  log "kubernetes: compiling ${wanted[*]} in one go build (several minutes on 2 cores)"
  local out="$k8s_dir/bin/.build"
  rm -rf "$out"
  mkdir -p "$out"
  go build -v -trimpath -ldflags "$(kubernetes_ldflags)" -o "$out/" "${pkgs[@]}" 2>&1 | progress kubernetes
  for c in "${wanted[@]}"; do mv "$out/$c" "$k8s_dir/bin/$c"; done
  rmdir "$out"
  log "kubernetes: done ($("$k8s_dir/bin/kube-apiserver" --version); ${wanted[*]})"
}

# containerd 2 (CDI is on by default since 2.0; Debian bookworm's containerd 1.6 has no CDI).
# Static, without the btrfs snapshotter (cgo); overlayfs and native remain.
build_containerd() {
  local c missing=0
  for c in containerd containerd-shim-runc-v2 ctr; do [[ -x "$containerd_dir/bin/$c" ]] || missing=1; done
  if [[ $missing == 0 ]]; then
    log "containerd $CONTAINERD_VERSION: cached in $containerd_dir/bin"
    return
  fi
  log "containerd $CONTAINERD_VERSION: building (go install)"
  mkdir -p "$containerd_dir/bin"
  local pkg=github.com/containerd/containerd/v2/version
  for c in containerd containerd-shim-runc-v2 ctr; do
    (cd "$containerd_dir" && GOFLAGS= GOBIN="$containerd_dir/bin" \
      go install -trimpath -tags "no_btrfs" \
        -ldflags "-s -w -X $pkg.Version=$CONTAINERD_VERSION -X $pkg.Package=github.com/containerd/containerd/v2" \
        "github.com/containerd/containerd/v2/cmd/$c@$CONTAINERD_VERSION")
  done
  log "containerd: done ($("$containerd_dir/bin/containerd" --version))"
}

build_crictl() {
  if [[ -x "$cri_tools_dir/bin/crictl" ]]; then
    log "crictl $CRI_TOOLS_VERSION: cached at $cri_tools_dir/bin/crictl"
    return
  fi
  log "crictl $CRI_TOOLS_VERSION: building (go install)"
  mkdir -p "$cri_tools_dir/bin"
  (cd "$cri_tools_dir" && GOFLAGS= GOBIN="$cri_tools_dir/bin" \
    go install -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" \
      "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION")
  log "crictl: done"
}

build_kustomize() {
  if [[ -x "$kustomize_dir/bin/kustomize" ]]; then
    log "kustomize $KUSTOMIZE_VERSION: cached at $kustomize_dir/bin/kustomize"
    return
  fi
  log "kustomize $KUSTOMIZE_VERSION: building (go install)"
  mkdir -p "$kustomize_dir/bin"
  # `go install pkg@version` builds outside any module and refuses -mod flags.
  (cd "$kustomize_dir" && GOFLAGS= GOBIN="$kustomize_dir/bin" \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION")
  log "kustomize: done ($("$kustomize_dir/bin/kustomize" version))"
}

build_helm() {
  if [[ -x "$helm_dir/bin/helm" ]]; then
    log "helm $HELM_VERSION: cached at $helm_dir/bin/helm"
    return
  fi
  local go_minor needed_minor
  go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  needed_minor=26
  if [[ -n "$go_minor" && "$go_minor" -lt "$needed_minor" ]]; then
    log "helm $HELM_VERSION needs Go >= 1.$needed_minor (its go.mod); this machine has $(go env GOVERSION)."
    log "Install a newer Go, or set HELM_VERSION=v3.20.2 in e2e/versions.env (the newest v3 for Go 1.25)."
    exit 1
  fi
  log "helm $HELM_VERSION: building (go install; Kubernetes client libraries, a few minutes on 2 cores)"
  mkdir -p "$helm_dir/bin"
  # As helm's Makefile: the version, and the Kubernetes version `helm template` and
  # `helm lint` assume (that of the client-go helm is built with) instead of v1.20.
  local minor
  minor=$(cd "$helm_dir" && GOFLAGS= go mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' | xargs sed -n 's#^[[:space:]]*k8s\.io/client-go v0\.\([0-9]*\)\..*#\1#p')
  [[ -n "$minor" ]] || { log "helm: could not read the client-go version from its go.mod"; exit 1; }
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata="
  local pkg
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  # `go install pkg@version` builds outside any module and refuses -mod flags.
  (cd "$helm_dir" && GOFLAGS= GOBIN="$helm_dir/bin" \
    go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
  log "helm: done ($("$helm_dir/bin/helm" version --short))"
}

fetch_prometheus() {
  if [[ -x "$prometheus_dir/bin/prometheus" && -x "$prometheus_dir/bin/promtool" ]]; then
    log "prometheus $PROMETHEUS_VERSION: cached in $prometheus_dir/bin"
    return
  fi
  command -v apt-get >/dev/null || { log "apt-get not found: prometheus comes from Debian's package"; exit 1; }
  local candidate
  candidate=$(apt-cache policy prometheus 2>/dev/null | sed -n 's/^[[:space:]]*Candidate:[[:space:]]*//p')
  if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
    log "prometheus: no package candidate; running apt-get update"
    apt-get update -qq
    candidate=$(apt-cache policy prometheus | sed -n 's/^[[:space:]]*Candidate:[[:space:]]*//p')
  fi
  case "$candidate" in
    "$PROMETHEUS_VERSION"+*) ;;
    *) log "prometheus: Debian offers '$candidate', not $PROMETHEUS_VERSION (a Debian bookworm machine is needed)"; exit 1 ;;
  esac
  log "prometheus $candidate: downloading Debian's package (not installed; only its binaries are kept)"
  local work
  work=$(mktemp -d)
  # apt-get download writes into the current directory; _apt cannot write to a
  # mktemp directory, so apt warns and downloads as root, which is fine here.
  (cd "$work" && apt-get download -q "prometheus=$candidate" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
  local deb
  deb=$(find "$work" -maxdepth 1 -name 'prometheus_*.deb' | head -n1)
  [[ -f "$deb" ]] || { log "prometheus: apt-get download produced no package"; exit 1; }
  dpkg-deb -x "$deb" "$work/root"
  mkdir -p "$prometheus_dir/bin"
  cp "$work/root/usr/bin/promtool" "$prometheus_dir/bin/promtool"
  cp "$work/root/usr/bin/prometheus" "$prometheus_dir/bin/prometheus.tmp"
  mv "$prometheus_dir/bin/prometheus.tmp" "$prometheus_dir/bin/prometheus"
  rm -rf "$work"
  log "prometheus: done ($("$prometheus_dir/bin/prometheus" --version 2>&1 | head -n1))"
}

fetch_monitoring_crds() {
  local f missing=0
  for f in "${monitoring_crds[@]}"; do [[ -f "$monitoring_crds_dir/$f" ]] || missing=1; done
  if [[ $missing == 0 ]]; then
    log "prometheus-operator CRDs $PROMETHEUS_OPERATOR_VERSION: cached in $monitoring_crds_dir"
    return
  fi
  log "prometheus-operator CRDs $PROMETHEUS_OPERATOR_VERSION: downloading the Go module"
  local dir scratch
  scratch=$(mktemp -d)  # outside any module, so go.mod files around do not matter
  dir=$(cd "$scratch" && GOFLAGS= go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rmdir "$scratch"
  [[ -d "$dir/example/prometheus-operator-crd" ]] || { log "no example/prometheus-operator-crd in the module ($dir)"; exit 1; }
  mkdir -p "$monitoring_crds_dir"
  for f in "${monitoring_crds[@]}"; do cp "$dir/example/prometheus-operator-crd/$f" "$monitoring_crds_dir/$f"; done
  chmod u+w "$monitoring_crds_dir"/*.yaml
  log "prometheus-operator CRDs: done"
}

# Kueue's manager from its Go module, in a patched copy of the module source:
#  - its dependency github.com/kubeflow/trainer/v2 (the TrainJob integration) is pinned at a
#    pseudo-version, v2.2.1-0.20260515134202-448c432a7073, that the module proxy refuses (403
#    "not available"). The patch requires $TRAINER_VERSION (v2.2.1: the same commit plus release
#    tooling, changelog and docs commits; the same Go code, go.mod and go.sum) instead, with
#    `go mod edit`, and lets go.sum take its hashes (checked against the checksum database).
#    Nothing else changes: the TrainJob integration is built as Kueue ships it.
#  - sum.golang.org answers 404 for this version, so the module is fetched with
#    GONOSUMDB=sigs.k8s.io/kueue and its hash is checked against KUEUE_MODULE_SUM.
# The build is cached as kueue-$KUEUE_VERSION-trainer-$TRAINER_VERSION (an earlier build without
# the TrainJob integration was cached as kueue-$KUEUE_VERSION).
build_kueue() {
  if [[ -x "$kueue_dir/bin/kueue" && -d "$kueue_dir/crds" && -f "$kueue_dir/webhook/manifests.yaml" ]]; then
    log "kueue $KUEUE_VERSION: cached in $kueue_dir"
    return
  fi
  log "kueue $KUEUE_VERSION: downloading the Go module"
  local scratch info dir sum pinned
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= GONOSUMDB=sigs.k8s.io/kueue go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$info")
  [[ -d "$dir/cmd/kueue" ]] || { log "kueue: no cmd/kueue in the module ($dir)"; exit 1; }
  [[ "$sum" == "$KUEUE_MODULE_SUM" ]] || { log "kueue: module hash $sum, expected $KUEUE_MODULE_SUM"; exit 1; }
  log "kueue: module hash $sum matches; patching a copy in $kueue_dir/src (trainer $TRAINER_VERSION)"
  rm -rf "$kueue_dir/src"
  mkdir -p "$kueue_dir/src" "$kueue_dir/bin"
  cp -r "$dir/." "$kueue_dir/src/"
  chmod -R u+w "$kueue_dir/src"
  cd "$kueue_dir/src"
  pinned=$(sed -n 's#^[[:space:]]*github.com/kubeflow/trainer/v2 \(v[^ ]*\)$#\1#p' go.mod)
  [[ "$pinned" == "v2.2.1-0.20260515134202-448c432a7073" ]] ||
    { log "kueue: go.mod pins trainer $pinned, not the pseudo-version this patch replaces"; exit 1; }
  go mod edit -require="github.com/kubeflow/trainer/v2@$TRAINER_VERSION"
  sed -i '\#github.com/kubeflow/trainer/v2 v2.2.1-0.20260515134202-448c432a7073#d' go.sum
  log "kueue: compiling cmd/kueue (about 10 minutes cold on 2 cores)"
  local pkg=sigs.k8s.io/kueue/pkg/version
  go build -v -trimpath -ldflags "-s -w -X $pkg.GitVersion=$KUEUE_VERSION" \
    -o "$kueue_dir/bin/kueue.tmp" ./cmd/kueue 2>&1 | progress kueue
  mv "$kueue_dir/bin/kueue.tmp" "$kueue_dir/bin/kueue"
  rm -rf "$kueue_dir/crds" "$kueue_dir/webhook"
  mkdir -p "$kueue_dir/crds" "$kueue_dir/webhook"
  cp config/components/crd/bases/*.yaml "$kueue_dir/crds/"
  cp config/components/webhook/manifests.yaml "$kueue_dir/webhook/manifests.yaml"
  cd "$kueue_dir"
  rm -rf "$kueue_dir/src"
  log "kueue: done ($kueue_dir/bin/kueue, $(ls "$kueue_dir/crds" | wc -l) CRDs)"
}

# JobSet's manager from its Go module (checked against the checksum database as usual): its
# main package is the module's root. The CRD and the webhook manifests (with the patches that
# give the pod webhooks their object selectors) are copied next to it.
build_jobset() {
  if [[ -x "$jobset_dir/bin/jobset" && -d "$jobset_dir/crds" && -d "$jobset_dir/webhook" ]]; then
    log "jobset $JOBSET_VERSION: cached in $jobset_dir"
    return
  fi
  log "jobset $JOBSET_VERSION: downloading the Go module"
  local scratch info dir
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= go mod download -json "sigs.k8s.io/jobset@$JOBSET_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [[ -f "$dir/main.go" ]] || { log "jobset: no main.go in the module ($dir)"; exit 1; }
  rm -rf "$jobset_dir/src"
  mkdir -p "$jobset_dir/src" "$jobset_dir/bin"
  cp -r "$dir/." "$jobset_dir/src/"
  chmod -R u+w "$jobset_dir/src"
  cd "$jobset_dir/src"
  log "jobset: compiling its manager"
  go build -v -trimpath -ldflags "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION" \
    -o "$jobset_dir/bin/jobset.tmp" . 2>&1 | progress jobset
  mv "$jobset_dir/bin/jobset.tmp" "$jobset_dir/bin/jobset"
  rm -rf "$jobset_dir/crds" "$jobset_dir/webhook"
  mkdir -p "$jobset_dir/crds" "$jobset_dir/webhook"
  cp config/components/crd/bases/*.yaml "$jobset_dir/crds/"
  cp config/components/webhook/manifests.yaml "$jobset_dir/webhook/manifests.yaml"
  cp config/components/webhook/patches/*.yaml "$jobset_dir/webhook/"
  cd "$jobset_dir"
  rm -rf "$jobset_dir/src"
  log "jobset: done ($jobset_dir/bin/jobset)"
}

# LeaderWorkerSet's manager from its Go module (checked against the checksum database as usual):
# its main package is cmd/. The CRD and the webhook manifests (with the patches that give its
# pod webhooks their object selectors) are copied next to it.
build_lws() {
  if [[ -x "$lws_dir/bin/lws" && -d "$lws_dir/crds" && -d "$lws_dir/webhook" ]]; then
    log "lws $LWS_VERSION: cached in $lws_dir"
    return
  fi
  log "lws $LWS_VERSION: downloading the Go module"
  local scratch info dir
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= go mod download -json "sigs.k8s.io/lws@$LWS_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [[ -f "$dir/cmd/main.go" ]] || { log "lws: no cmd/main.go in the module ($dir)"; exit 1; }
  rm -rf "$lws_dir/src"
  mkdir -p "$lws_dir/src" "$lws_dir/bin"
  cp -r "$dir/." "$lws_dir/src/"
  chmod -R u+w "$lws_dir/src"
  cd "$lws_dir/src"
  log "lws: compiling its manager"
  go build -v -trimpath -ldflags "-s -w -X sigs.k8s.io/lws/pkg/version.GitVersion=$LWS_VERSION" \
    -o "$lws_dir/bin/lws.tmp" ./cmd 2>&1 | progress lws
  mv "$lws_dir/bin/lws.tmp" "$lws_dir/bin/lws"
  rm -rf "$lws_dir/crds" "$lws_dir/webhook"
  mkdir -p "$lws_dir/crds" "$lws_dir/webhook"
  cp config/crd/bases/*.yaml "$lws_dir/crds/"
  cp config/webhook/manifests.yaml "$lws_dir/webhook/manifests.yaml"
  cp config/webhook/mutating-patch.yaml config/webhook/validating-patch.yaml "$lws_dir/webhook/"
  cd "$lws_dir"
  rm -rf "$lws_dir/src"
  log "lws: done ($lws_dir/bin/lws)"
}

# go_module_dir MODULE@VERSION: downloads a Go module (checked against the checksum database as
# usual) and prints the directory it was unpacked to.
go_module_dir() {
  local scratch info
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= go mod download -json "$1")
  rmdir "$scratch"
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info"
}

# The training-operator v1 manager from its Go module (main package cmd/training-operator.v1), its
# CRDs (all but the v1 MPIJob's: mpi-operator's v2beta1 MPIJob CRD has the same name) and its
# validating webhook manifest (named as its kustomize build names it).
build_training_operator() {
  local d=$training_operator_dir
  if [[ -x "$d/bin/training-operator" && -d "$d/crds" && -f "$d/webhook/manifests.yaml" ]]; then
    log "training-operator $TRAINING_OPERATOR_VERSION: cached in $d"
    return
  fi
  log "training-operator $TRAINING_OPERATOR_VERSION: downloading the Go module"
  local dir
  dir=$(go_module_dir "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION")
  [[ -f "$dir/cmd/training-operator.v1/main.go" ]] || { log "training-operator: no cmd/training-operator.v1 ($dir)"; exit 1; }
  rm -rf "$d/src"
  mkdir -p "$d/src" "$d/bin"
  cp -r "$dir/." "$d/src/"
  chmod -R u+w "$d/src"
  cd "$d/src"
  log "training-operator: compiling its manager"
  go build -v -trimpath -ldflags "-s -w" -o "$d/bin/training-operator.tmp" ./cmd/training-operator.v1 2>&1 |
    progress training-operator
  mv "$d/bin/training-operator.tmp" "$d/bin/training-operator"
  rm -rf "$d/crds" "$d/webhook"
  mkdir -p "$d/crds" "$d/webhook"
  for kind in jaxjobs paddlejobs pytorchjobs tfjobs xgboostjobs; do
    cp "manifests/base/crds/kubeflow.org_$kind.yaml" "$d/crds/"
  done
  cp manifests/base/webhook/manifests.yaml "$d/webhook/manifests.yaml"
  cd "$d"
  rm -rf "$d/src"
  log "training-operator: done ($d/bin/training-operator)"
}

# mpi-operator's manager from its Go module (main package cmd/mpi-operator) and its MPIJob
# (kubeflow.org/v2beta1) CRD; it has no webhooks.
build_mpi_operator() {
  local d=$mpi_operator_dir
  if [[ -x "$d/bin/mpi-operator" && -d "$d/crds" ]]; then
    log "mpi-operator $MPI_OPERATOR_VERSION: cached in $d"
    return
  fi
  log "mpi-operator $MPI_OPERATOR_VERSION: downloading the Go module"
  local dir
  dir=$(go_module_dir "github.com/kubeflow/mpi-operator@$MPI_OPERATOR_VERSION")
  [[ -f "$dir/cmd/mpi-operator/main.go" ]] || { log "mpi-operator: no cmd/mpi-operator ($dir)"; exit 1; }
  rm -rf "$d/src"
  mkdir -p "$d/src" "$d/bin"
  cp -r "$dir/." "$d/src/"
  chmod -R u+w "$d/src"
  cd "$d/src"
  log "mpi-operator: compiling its manager"
  go build -v -trimpath -ldflags "-s -w" -o "$d/bin/mpi-operator.tmp" ./cmd/mpi-operator 2>&1 | progress mpi-operator
  mv "$d/bin/mpi-operator.tmp" "$d/bin/mpi-operator"
  rm -rf "$d/crds"
  mkdir -p "$d/crds"
  cp manifests/base/kubeflow.org_mpijobs.yaml "$d/crds/"
  cd "$d"
  rm -rf "$d/src"
  log "mpi-operator: done ($d/bin/mpi-operator)"
}

# Kubeflow Trainer's manager from its Go module (checked against the checksum database as usual):
# its main package is cmd/trainer-controller-manager. Its CRDs (TrainJob, TrainingRuntime,
# ClusterTrainingRuntime) and its webhook manifests are copied next to it; its kustomize patches
# only rename the webhook configurations and their Service, which the loopback registration
# replaces anyway (e2e/support/trainer.py), so they are not needed.
build_trainer() {
  if [[ -x "$trainer_dir/bin/trainer" && -d "$trainer_dir/crds" && -d "$trainer_dir/webhook" ]]; then
    log "trainer $TRAINER_VERSION: cached in $trainer_dir"
    return
  fi
  log "trainer $TRAINER_VERSION: downloading the Go module"
  local scratch info dir
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= go mod download -json "github.com/kubeflow/trainer/v2@$TRAINER_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [[ -f "$dir/cmd/trainer-controller-manager/main.go" ]] ||
    { log "trainer: no cmd/trainer-controller-manager/main.go in the module ($dir)"; exit 1; }
  rm -rf "$trainer_dir/src"
  mkdir -p "$trainer_dir/src" "$trainer_dir/bin"
  cp -r "$dir/." "$trainer_dir/src/"
  chmod -R u+w "$trainer_dir/src"
  cd "$trainer_dir/src"
  log "trainer: compiling its manager"
  go build -v -trimpath -ldflags "-s -w" \
    -o "$trainer_dir/bin/trainer.tmp" ./cmd/trainer-controller-manager 2>&1 | progress trainer
  mv "$trainer_dir/bin/trainer.tmp" "$trainer_dir/bin/trainer"
  rm -rf "$trainer_dir/crds" "$trainer_dir/webhook"
  mkdir -p "$trainer_dir/crds" "$trainer_dir/webhook"
  cp manifests/base/crds/trainer.kubeflow.org_*.yaml "$trainer_dir/crds/"
  cp manifests/base/webhook/manifests.yaml "$trainer_dir/webhook/manifests.yaml"
  cd "$trainer_dir"
  rm -rf "$trainer_dir/src"
  log "trainer: done ($trainer_dir/bin/trainer)"
}

# KubeRay's ray-operator from its Go module (checked against the checksum database as usual):
# its main package is the module's root. Its webhooks are off unless ENABLE_WEBHOOKS=true (as
# KubeRay's Helm chart ships it), so only the CRDs (large: ~1 MB each) are copied next to it.
build_kuberay() {
  if [[ -x "$kuberay_dir/bin/ray-operator" && -d "$kuberay_dir/crds" ]]; then
    log "kuberay $KUBERAY_VERSION: cached in $kuberay_dir"
    return
  fi
  log "kuberay $KUBERAY_VERSION: downloading the Go module"
  local scratch info dir
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= go mod download -json "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [[ -f "$dir/main.go" ]] || { log "kuberay: no main.go in the module ($dir)"; exit 1; }
  rm -rf "$kuberay_dir/src"
  mkdir -p "$kuberay_dir/src" "$kuberay_dir/bin"
  cp -r "$dir/." "$kuberay_dir/src/"
  chmod -R u+w "$kuberay_dir/src"
  cd "$kuberay_dir/src"
  log "kuberay: compiling the ray-operator"
  go build -v -trimpath -ldflags "-s -w" -o "$kuberay_dir/bin/ray-operator.tmp" . 2>&1 | progress kuberay
  mv "$kuberay_dir/bin/ray-operator.tmp" "$kuberay_dir/bin/ray-operator"
  rm -rf "$kuberay_dir/crds"
  mkdir -p "$kuberay_dir/crds"
  cp config/crd/bases/ray.io_rayclusters.yaml config/crd/bases/ray.io_rayjobs.yaml "$kuberay_dir/crds/"
  cd "$kuberay_dir"
  rm -rf "$kuberay_dir/src"
  log "kuberay: done ($kuberay_dir/bin/ray-operator)"
}

# The AppWrapper controller of github.com/project-codeflare/appwrapper (its main package is
# cmd/), with its AppWrapper CRD and webhook manifests (the tests run it with its webhooks off:
# e2e/support/appwrapper.py says why).
build_appwrapper() {
  if [[ -x "$appwrapper_dir/bin/appwrapper" && -d "$appwrapper_dir/crds" && -d "$appwrapper_dir/webhook" ]]; then
    log "appwrapper $APPWRAPPER_VERSION: cached in $appwrapper_dir"
    return
  fi
  log "appwrapper $APPWRAPPER_VERSION: downloading the Go module"
  local scratch info dir
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= go mod download -json "github.com/project-codeflare/appwrapper@$APPWRAPPER_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [[ -f "$dir/cmd/main.go" ]] || { log "appwrapper: no cmd/main.go in the module ($dir)"; exit 1; }
  rm -rf "$appwrapper_dir/src"
  mkdir -p "$appwrapper_dir/src" "$appwrapper_dir/bin"
  cp -r "$dir/." "$appwrapper_dir/src/"
  chmod -R u+w "$appwrapper_dir/src"
  cd "$appwrapper_dir/src"
  log "appwrapper: compiling its controller"
  go build -v -trimpath -ldflags "-s -w" -o "$appwrapper_dir/bin/appwrapper.tmp" ./cmd 2>&1 | progress appwrapper
  mv "$appwrapper_dir/bin/appwrapper.tmp" "$appwrapper_dir/bin/appwrapper"
  rm -rf "$appwrapper_dir/crds" "$appwrapper_dir/webhook"
  mkdir -p "$appwrapper_dir/crds" "$appwrapper_dir/webhook"
  cp config/crd/bases/workload.codeflare.dev_appwrappers.yaml "$appwrapper_dir/crds/"
  cp config/webhook/manifests.yaml "$appwrapper_dir/webhook/manifests.yaml"
  cd "$appwrapper_dir"
  rm -rf "$appwrapper_dir/src"
  log "appwrapper: done ($appwrapper_dir/bin/appwrapper)"
}

# kueuectl (cmd/kueuectl of Kueue's module, the same version and module hash as --kueue), built
# from a copy of the module with the TrainJob integration dropped (kueuectl links the integrations'
# registry and needs none of them; build_kueue, whose manager the conformance scenarios record,
# keeps the integration instead, built against Kubeflow Trainer $TRAINER_VERSION).
build_kueuectl() {
  if [[ -x "$kueuectl_dir/bin/kueuectl" ]]; then
    log "kueuectl $KUEUE_VERSION: cached in $kueuectl_dir"
    return
  fi
  log "kueuectl $KUEUE_VERSION: downloading the Go module"
  local scratch info dir sum
  scratch=$(mktemp -d)
  info=$(cd "$scratch" && GOFLAGS= GONOSUMDB=sigs.k8s.io/kueue go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION")
  rmdir "$scratch"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  sum=$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$info")
  [[ -d "$dir/cmd/kueuectl" ]] || { log "kueuectl: no cmd/kueuectl in the module ($dir)"; exit 1; }
  [[ "$sum" == "$KUEUE_MODULE_SUM" ]] || { log "kueuectl: module hash $sum, expected $KUEUE_MODULE_SUM"; exit 1; }
  rm -rf "$kueuectl_dir/src"
  mkdir -p "$kueuectl_dir/src" "$kueuectl_dir/bin"
  cp -r "$dir/." "$kueuectl_dir/src/"
  chmod -R u+w "$kueuectl_dir/src"
  cd "$kueuectl_dir/src"
  sed -i '\#"sigs.k8s.io/kueue/pkg/controller/jobs/trainjob"#d' pkg/controller/jobs/jobs.go
  sed -i -e '\#kftrainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"#d' \
    -e 's#kftrainer.SchemeGroupVersion.WithKind(kftrainer.TrainJobKind).String()#"trainer.kubeflow.org/v1alpha1, Kind=TrainJob"#' \
    pkg/controller/jobframework/validation.go
  sed -i '\#github.com/kubeflow/trainer/v2 #d' go.mod go.sum
  log "kueuectl: compiling cmd/kueuectl"
  go build -v -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    -o "$kueuectl_dir/bin/kueuectl.tmp" ./cmd/kueuectl 2>&1 | progress kueuectl
  mv "$kueuectl_dir/bin/kueuectl.tmp" "$kueuectl_dir/bin/kueuectl"
  cd "$kueuectl_dir"
  rm -rf "$kueuectl_dir/src"
  log "kueuectl: done ($kueuectl_dir/bin/kueuectl)"
}

# timed LABEL FUNCTION: runs it; with $PHASE_TIMES naming a file (e2e/test.sh), appends
# `set-up: LABEL<TAB>SECONDS` to it for the test command's table of phase times.
# Kueue's scheduler-performance runner and checker, built from its module unmodified: a scratch
# module in $kueue_perf_dir/src requires sigs.k8s.io/kueue@$KUEUE_VERSION and builds its packages
# from the module cache. Kueue's test/util (imported by the runner) needs
# github.com/kubeflow/trainer/v2 at a pseudo-version the module proxy refuses, so the scratch module
# requires trainer v2.2.1 (the release that pseudo-version precedes; Go's version selection takes
# it). Kueue's own files are not touched; its module hash is checked against KUEUE_MODULE_SUM.
build_kueue_perf() {
  if [[ -x "$kueue_perf_dir/bin/runner" && -x "$kueue_perf_dir/bin/checker.test" && -d "$kueue_perf_dir/configs" ]]; then
    log "kueue-perf $KUEUE_VERSION: cached in $kueue_perf_dir"
    return
  fi
  log "kueue-perf $KUEUE_VERSION: building Kueue's scheduler-performance runner and checker"
  rm -rf "$kueue_perf_dir/src"
  mkdir -p "$kueue_perf_dir/src" "$kueue_perf_dir/bin"
  cd "$kueue_perf_dir/src"
  printf 'module dra-quota-testbed/kueue-perf\n\ngo 1.26.0\n' > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/kueue/test/performance/scheduler/runner"\n' > tools.go
  export GONOSUMDB=sigs.k8s.io/kueue
  go mod edit -require="sigs.k8s.io/kueue@$KUEUE_VERSION" -require=github.com/kubeflow/trainer/v2@v2.2.1
  local pkg=sigs.k8s.io/kueue/test/performance/scheduler
  go build -v -trimpath -o "$kueue_perf_dir/bin/runner.tmp" "$pkg/runner" 2>&1 | progress kueue-perf
  local sum
  sum=$(sed -n "s#^sigs.k8s.io/kueue $KUEUE_VERSION \(h1:.*\)\$#\1#p" go.sum)
  [[ "$sum" == "$KUEUE_MODULE_SUM" ]] || { log "kueue-perf: module hash $sum, expected $KUEUE_MODULE_SUM"; exit 1; }
  go test -c -trimpath -o "$kueue_perf_dir/bin/checker.test" "$pkg/checker"
  mv "$kueue_perf_dir/bin/runner.tmp" "$kueue_perf_dir/bin/runner"
  local dir
  dir=$(go list -m -f '{{.Dir}}' "sigs.k8s.io/kueue")
  rm -rf "$kueue_perf_dir/configs"
  cp -r "$dir/test/performance/scheduler/configs" "$kueue_perf_dir/configs"
  chmod -R u+w "$kueue_perf_dir/configs"
  cd "$kueue_perf_dir"
  rm -rf "$kueue_perf_dir/src"
  log "kueue-perf: done ($kueue_perf_dir/bin/runner, bin/checker.test, configs/)"
}

timed() {
  local began=$SECONDS
  ( cd "$here"; "$2" )
  if [[ -n "${PHASE_TIMES:-}" ]]; then printf 'set-up: %s\t%s\n' "$1" $((SECONDS - began)) >> "$PHASE_TIMES"; fi
}

start=$(date +%s)
timed "etcd" build_etcd
if [[ $with_node == 1 ]]; then
  timed "kube-apiserver, -controller-manager, -scheduler, kubelet" build_kubernetes
else
  timed "kube-apiserver, -controller-manager, -scheduler" build_kubernetes
fi
timed "kustomize" build_kustomize
timed "helm" build_helm
timed "prometheus (Debian package)" fetch_prometheus
timed "prometheus-operator CRDs" fetch_monitoring_crds
if [[ $with_kueue == 1 ]]; then timed "kueue" build_kueue; fi
if [[ $with_jobset == 1 ]]; then timed "jobset" build_jobset; fi
if [[ $with_lws == 1 ]]; then timed "lws" build_lws; fi
if [[ $with_kubeflow == 1 ]]; then
  timed "training-operator" build_training_operator
  timed "mpi-operator" build_mpi_operator
fi
if [[ $with_trainer == 1 ]]; then timed "trainer" build_trainer; fi
if [[ $with_kuberay == 1 ]]; then timed "kuberay" build_kuberay; fi
if [[ $with_appwrapper == 1 ]]; then timed "appwrapper" build_appwrapper; fi
if [[ $with_kueuectl == 1 ]]; then timed "kueuectl" build_kueuectl; fi
if [[ $with_kueue_perf == 1 ]]; then timed "kueue-perf" build_kueue_perf; fi
if [[ $with_node == 1 ]]; then
  timed "containerd" build_containerd
  timed "crictl" build_crictl
fi
log "finished in $(( $(date +%s) - start ))s; cache $(du -sh "$cache" | cut -f1), Go module cache $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1), Go build cache $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)"
echo "$cache"
