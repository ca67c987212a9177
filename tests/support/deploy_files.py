"""The commands the image's Dockerfile stages run: tests/project/test_deploy_files.py checks the
Dockerfile runs them, e2e/test_image_contents.py runs the same ones without Docker. And the
container's arguments, which the manifests and the Helm chart must both give."""

BUILD_WHEEL = "python -m pip wheel . --no-deps --wheel-dir /wheels"
INSTALL_LOCKED = "/opt/venv/bin/pip install --no-compile --require-hashes -r /tmp/requirements.lock"
INSTALL_WHEEL = "/opt/venv/bin/pip install --no-compile --no-deps /wheels/*.whl"
COMPILE_VENV = "python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv"

# The container command of the contract with the runtime (metrics, health, leader election).
CONTRACT_ARGS = [
    "run",
    "--config",
    "/etc/dra-quota/config.yaml",
    "--metrics-bind-address",
    ":8080",
    "--health-probe-bind-address",
    ":8081",
    "--leader-elect",
    "--leader-election-namespace",
    "$(POD_NAMESPACE)",
    "--log-format",
    "json",
]
