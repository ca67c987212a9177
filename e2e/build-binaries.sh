#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
# Go modules with the machine's Go, into a cache outside the repository keyed
# by version. A binary already in the cache is reused. Unattended; prints what
# it does. Prints the bin directory on the last line of stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-quota-testbed}
k8s_dir="$cache/kubernetes-$KUBERNETES_VERSION"
etcd_dir="$cache/etcd-$ETCD_VERSION"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

log() { printf '[build-binaries] %s\n' "$*" >&2; }

# `go build -v` names each package as it compiles it; show one line per 100.
progress() {
  awk -v what="$1" '{ n++; if (n % 100 == 0) { printf "[build-binaries] %s: %d packages compiled\n", what, n > "/dev/stderr"; fflush("/dev/stderr") } }
       END { printf "[build-binaries] %s: %d packages compiled in total\n", what, n > "/dev/stderr" }'
}

command -v go >/dev/null || { log "go is not installed; install Go >= 1.25"; exit 1; }
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

build_kubernetes() {
  local cmds=(kube-apiserver kube-controller-manager kube-scheduler)
  local missing=0 c
  for c in "${cmds[@]}"; do [[ -x "$k8s_dir/bin/$c" ]] || missing=1; done
  if [[ $missing == 0 ]]; then
    log "kubernetes $KUBERNETES_VERSION: cached in $k8s_dir/bin"
    return
  fi
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  log "kubernetes $KUBERNETES_VERSION (staging modules $staging_version): building in $k8s_dir/src"
  mkdir -p "$k8s_dir/src" "$k8s_dir/bin"
  cd "$k8s_dir/src"
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
  log "kubernetes: resolving modules (go get -tool; large download on a new machine)"
  for c in "${cmds[@]}"; do go get -tool "k8s.io/kubernetes/cmd/$c@$KUBERNETES_VERSION"; done
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for c in "${cmds[@]}"; do
    if [[ -x "$k8s_dir/bin/$c" ]]; then log "$c: cached"; continue; fi
    log "$c: compiling (several minutes on 2 cores)"
    go build -v -trimpath -ldflags "$ldflags" -o "$k8s_dir/bin/$c.tmp" "k8s.io/kubernetes/cmd/$c" 2>&1 | progress "$c"
    mv "$k8s_dir/bin/$c.tmp" "$k8s_dir/bin/$c"
  done
  log "kubernetes: done ($("$k8s_dir/bin/kube-apiserver" --version))"
}

start=$(date +%s)
build_etcd
build_kubernetes
log "finished in $(( $(date +%s) - start ))s; cache $(du -sh "$cache" | cut -f1), Go module cache $(du -sh "$(go env GOMODCACHE)" 2>/dev/null | cut -f1), Go build cache $(du -sh "$(go env GOCACHE)" 2>/dev/null | cut -f1)"
echo "$cache"
