#!/usr/bin/env bash
# Refreshes the Python lock files from pyproject.toml's ranges:
#   requirements.lock      the controller's dependencies (the Dockerfile installs exactly these)
#   requirements-dev.lock  the same plus the dev extra (e2e/setup.sh, so .ci/run, installs these)
# Every pin carries the hashes of all its files on the index (pip --require-hashes checks them),
# resolved for Python 3.11 on every platform (uv's --universal), so one lock serves the image and
# any CI machine. Run it after changing a dependency in pyproject.toml, or to take new releases;
# commit both files. The resolver is uv at a pinned version, installed into the test-bed cache
# (TESTBED_CACHE, default ~/.cache/dra-quota-testbed) on first use; needs the package index.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UV_VERSION=0.13.9
cache=${TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dra-quota-testbed}
uv_env="$cache/uv-$UV_VERSION"
if [[ ! -f "$uv_env/.complete" ]]; then
  rm -rf "$uv_env"
  python3 -m venv "$uv_env"
  "$uv_env/bin/pip" install --quiet "uv==$UV_VERSION"
  touch "$uv_env/.complete"
fi

compile() {
  "$uv_env/bin/uv" pip compile pyproject.toml --quiet --universal --python-version 3.11 \
    --generate-hashes --custom-compile-command e2e/lock.sh "$@"
}
compile --output-file requirements.lock
compile --extra dev --output-file requirements-dev.lock
echo "requirements.lock and requirements-dev.lock written from pyproject.toml"
