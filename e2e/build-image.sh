#!/usr/bin/env bash
# Builds the controller image from the repository's Dockerfile on a machine that reaches
# Debian's packages and PyPI but no container registry (the CI machines):
#   1. installs Debian's docker.io and debootstrap when missing;
#   2. starts dockerd when no engine answers: in the background, log in
#      $cache/docker/dockerd.log, no bridge and no iptables rules (every container here
#      runs with --network host, so nothing leaves loopback but the package indexes);
#   3. the base image $BASE_IMAGE (default dra-quota/python-base:bookworm): Debian
#      bookworm's python3 (3.11) with venv and pip, debootstrapped and `docker import`ed.
#      The root filesystem's tarball is cached in $cache/python-base/ keyed by suite,
#      mirror, package list, the host's added CA certificates and this recipe's revision;
#      the image is imported again only when its key label differs;
#   4. docker build -t $IMAGE --build-arg PYTHON_IMAGE=$BASE_IMAGE (legacy builder, host
#      network for pip; Docker's layer cache makes a rebuild of unchanged sources quick).
# Unattended; progress on stderr; prints the image name on the last line of stdout.
#
#   e2e/build-image.sh              everything above
#   e2e/build-image.sh --base-only  steps 1-3 (what e2e/setup.sh runs)
#
# Environment: IMAGE (default dra-quota-reconciler:dev), BASE_IMAGE, DEBIAN_SUITE
# (default bookworm), DEBIAN_MIRROR (default: the first of the host's apt sources),
# TESTBED_CACHE (default ~/.cache/dra-quota-testbed), DOCKERD_TIMEOUT (default 60 s).
set -euo pipefail

base_only=0
for arg in "$@"; do
  case "$arg" in
    --base-only) base_only=1 ;;
    *) echo "usage: $0 [--base-only]" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-quota-testbed}
IMAGE=${IMAGE:-dra-quota-reconciler:dev}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
BASE_IMAGE=${BASE_IMAGE:-dra-quota/python-base:$DEBIAN_SUITE}
DOCKERD_TIMEOUT=${DOCKERD_TIMEOUT:-60}
# python-is-python3: the Dockerfile runs `python`, as on the official images.
BASE_PACKAGES=(python3 python3-venv python3-pip python-is-python3 ca-certificates)
# Bump when the recipe below changes what goes into the base image.
BASE_RECIPE=1
# The legacy builder: BuildKit would fetch the `# syntax=` frontend from Docker Hub.
export DOCKER_BUILDKIT=0

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# Only what is missing needs root: installing packages, starting dockerd, debootstrap.
need_root() { [[ $(id -u) == 0 ]] || die "$1 needs root: run e2e/build-image.sh as root once"; }

install_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  [[ ${#missing[@]} == 0 ]] && return
  command -v apt-get >/dev/null || die "apt-get not found: ${missing[*]} come from Debian's packages"
  need_root "installing ${missing[*]}"
  log "installing ${missing[*]} (apt-get)"
  local candidate
  candidate=$(apt-cache policy "${missing[0]}" 2>/dev/null | sed -n 's/^[[:space:]]*Candidate:[[:space:]]*//p')
  if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
    apt-get update -qq
  fi
  mkdir -p "$cache"
  local install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
  # Package lists older than the archive name versions it no longer has: update once, retry.
  if ! DEBIAN_FRONTEND=noninteractive "${install[@]}" >"$cache/apt-install.log" 2>&1; then
    log "apt-get install failed; running apt-get update and trying again"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${install[@]}" >"$cache/apt-install.log" 2>&1 ||
      { tail -n 30 "$cache/apt-install.log" >&2; die "apt-get install ${missing[*]} failed"; }
  fi
}

engine_answers() { timeout 10 docker info >/dev/null 2>&1; }

start_dockerd() {
  if engine_answers; then
    log "docker: an engine answers ($(docker info --format '{{.ServerVersion}}, {{.Driver}}, cgroup v{{.CgroupVersion}}' 2>/dev/null))"
    return
  fi
  need_root "starting dockerd"
  local dir="$cache/docker"
  mkdir -p "$dir"
  # A dockerd that was killed leaves its pid file, and dockerd refuses to start over it.
  local pidfile=/var/run/docker.pid old
  if [[ -f "$pidfile" ]]; then
    old=$(cat "$pidfile")
    if [[ "$(cat "/proc/$old/comm" 2>/dev/null)" == dockerd && "$(awk '{ print $3 }' "/proc/$old/stat")" != Z ]]; then
      die "dockerd (pid $old) runs but does not answer; stop it or look at its log"
    fi
    log "docker: removing the stale $pidfile (pid $old is gone)"
    rm -f "$pidfile"
  fi
  log "docker: starting dockerd (log $dir/dockerd.log)"
  # setsid: its own session, so it outlives this script and the test run that started it.
  # 9>&-: the daemon outlives this script and must not hold its build lock.
  setsid dockerd --bridge=none --iptables=false --ip-masq=false >>"$dir/dockerd.log" 2>&1 </dev/null 9>&- &
  local pid=$! waited=0
  until engine_answers; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$dir/dockerd.log" >&2
      die "dockerd exited during start-up (log above, $dir/dockerd.log)"
    fi
    if (( waited >= DOCKERD_TIMEOUT )); then
      tail -n 20 "$dir/dockerd.log" >&2
      die "dockerd (pid $pid) did not answer within ${DOCKERD_TIMEOUT}s (log above, $dir/dockerd.log)"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  log "docker: dockerd $pid answers after ${waited}s ($(docker info --format '{{.ServerVersion}}, {{.Driver}}, cgroup v{{.CgroupVersion}}'))"
}

debian_mirror() {
  if [[ -n "${DEBIAN_MIRROR:-}" ]]; then echo "$DEBIAN_MIRROR"; return; fi
  local uri
  uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*debian\)[[:space:]]*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
  [[ -n "$uri" ]] || uri=$(sed -n 's/^deb[[:space:]]\+\(http[^[:space:]]*debian\)[[:space:]].*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
  echo "${uri:-http://deb.debian.org/debian}"
}

# Certificates the host added to its trust store (a TLS-inspecting proxy's, say): the base
# image trusts them too, so pip in `docker build` reaches the index as pip on the host does.
local_cas() { find /usr/local/share/ca-certificates -type f -name '*.crt' 2>/dev/null | sort; }

unmount_under() {
  local dir=$1 m
  while read -r m; do umount -l "$m" 2>/dev/null || true; done \
    < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
}

build_rootfs() {
  local tarball=$1 mirror=$2 work
  need_root "debootstrap (the root filesystem of $BASE_IMAGE)"
  work=$(mktemp -d "$cache/python-base/work.XXXXXX")
  trap 'unmount_under "'"$work"'"; rm -rf --one-file-system "'"$work"'"' EXIT
  log "base: debootstrap $DEBIAN_SUITE from $mirror (minbase + ${BASE_PACKAGES[*]}; a few minutes)"
  local packages
  packages=$(IFS=,; echo "${BASE_PACKAGES[*]}")
  debootstrap --variant=minbase --include="$packages" "$DEBIAN_SUITE" "$work/rootfs" "$mirror" \
    > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  local ca
  while read -r ca; do
    [[ -n "$ca" ]] && cp "$ca" "$work/rootfs/usr/local/share/ca-certificates/"
  done < <(local_cas)
  if [[ -n "$(local_cas)" ]]; then
    chroot "$work/rootfs" update-ca-certificates >/dev/null 2>&1
  fi
  # What an image does not need: package indexes and caches, documentation, logs.
  rm -rf "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/cache/apt/* \
    "$work/rootfs"/usr/share/doc/* "$work/rootfs"/usr/share/man/* "$work/rootfs"/usr/share/info/* \
    "$work/rootfs"/usr/share/locale/* \
    "$work/rootfs"/var/log/* "$work/rootfs"/var/cache/debconf/*-old "$work/rootfs"/tmp/*
  unmount_under "$work/rootfs"
  tar -C "$work/rootfs" --numeric-owner --xattrs \
    --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* --exclude=./run/* \
    -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$tarball"
  rm -rf --one-file-system "$work"
  trap - EXIT
}

build_base() {
  local mirror key tarball
  mirror=$(debian_mirror)
  key=$( { echo "recipe $BASE_RECIPE suite $DEBIAN_SUITE mirror $mirror packages ${BASE_PACKAGES[*]}"
           local_cas | xargs -r cat; } | sha256sum | cut -c1-16)
  tarball="$cache/python-base/$DEBIAN_SUITE-$key.tar"
  local have
  have=$(docker image inspect --format '{{ index .Config.Labels "dra-quota.base-key" }}' "$BASE_IMAGE" 2>/dev/null || true)
  if [[ "$have" == "$key" ]]; then
    log "base: $BASE_IMAGE is up to date (key $key)"
    return
  fi
  mkdir -p "$cache/python-base"
  command -v debootstrap >/dev/null || die "debootstrap is not installed"
  if [[ -f "$tarball" ]]; then
    log "base: root filesystem cached at $tarball"
  else
    local start=$SECONDS
    build_rootfs "$tarball" "$mirror"
    log "base: root filesystem built in $((SECONDS - start))s ($(du -h "$tarball" | cut -f1), $tarball)"
  fi
  # Other keys' tarballs are stale.
  find "$cache/python-base" -maxdepth 1 -name "$DEBIAN_SUITE-*.tar" ! -name "$(basename "$tarball")" -delete
  log "base: docker import as $BASE_IMAGE"
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change "LABEL dra-quota.base-key=$key" \
    --change 'CMD ["python3"]' \
    "$tarball" "$BASE_IMAGE" >/dev/null
  log "base: $BASE_IMAGE $(docker run --rm --network host "$BASE_IMAGE" python --version 2>&1)"
}

build_controller() {
  log "image: docker build -t $IMAGE --build-arg PYTHON_IMAGE=$BASE_IMAGE (host network for pip)"
  local start=$SECONDS out
  out=$(mktemp)
  if ! docker build --network host --build-arg "PYTHON_IMAGE=$BASE_IMAGE" -t "$IMAGE" "$root" >"$out" 2>&1; then
    tail -n 40 "$out" >&2
    rm -f "$out"
    die "docker build failed (output above)"
  fi
  rm -f "$out"
  # The previous build's image, untagged by this one; and stage images of builds older than a
  # day (younger ones are the layer cache that keeps a rebuild of unchanged sources quick).
  docker image prune --force --filter "label=org.opencontainers.image.title=dra-quota-reconciler" >/dev/null
  docker image prune --force --filter "label=dra-quota.base-key" --filter "until=24h" >/dev/null
  log "image: $IMAGE built in $((SECONDS - start))s, $(docker image inspect --format '{{.Size}}' "$IMAGE" | awk '{ printf "%.0f MB", $1 / 1e6 }')"
}

# One build at a time (tests on parallel pytest workers ask for the image at once): the others
# wait, then find it up to date.
mkdir -p "$cache"
exec 9>"$cache/build-image.lock"
flock 9

install_packages
command -v docker >/dev/null || die "the docker client is missing after installing docker.io"
start_dockerd
build_base
if [[ $base_only == 0 ]]; then
  build_controller
  echo "$IMAGE"
else
  echo "$BASE_IMAGE"
fi
