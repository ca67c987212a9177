"""The commands the image's Dockerfile stages run: tests/test_deploy_files.py checks the
Dockerfile runs them, e2e/test_image_contents.py runs the same ones without Docker."""

BUILD_WHEEL = "python -m pip wheel . --no-deps --wheel-dir /wheels"
INSTALL_WHEEL = "/opt/venv/bin/pip install --no-compile /wheels/*.whl"
COMPILE_VENV = "python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv"
