# syntax=docker/dockerfile:1
# The controller image: `docker build -t REGISTRY/dra-quota-reconciler:0.1.0 .`
#
# Stage 1 builds the project's wheel; stage 2 installs its locked
# dependencies and the wheel into a virtual environment; the final stage copies only that
# environment onto a slim Python. It runs as a numeric non-root user and never
# writes to its root filesystem (bytecode is compiled at build time), so it
# works with readOnlyRootFilesystem: true.

# The base is pinned by tag, not by digest: a digest is the registry's manifest hash and no
# registry is reachable where this repository is built and tested (e2e/build-image.sh passes
# PYTHON_IMAGE=dra-quota/python-base:bookworm, debootstrapped and `docker import`ed locally:
# such an image has no registry digest, only a local ID, which FROM cannot name portably). Where
# Docker Hub is reachable, pin it at build time:
#   docker pull python:3.11.11-slim-bookworm
#   digest=$(docker inspect --format '{{index .RepoDigests 0}}' python:3.11.11-slim-bookworm)
#   docker build --build-arg PYTHON_IMAGE="$digest" -t REGISTRY/dra-quota-reconciler:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reconciler ./reconciler
RUN python -m pip wheel . --no-deps --wheel-dir /wheels

FROM ${PYTHON_IMAGE} AS venv
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The dependencies exactly as locked (requirements.lock, with hashes; refreshed by e2e/lock.sh),
# then the project's wheel without resolving anything again.
COPY requirements.lock /tmp/requirements.lock
COPY --from=builder /wheels /wheels
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile --require-hashes -r /tmp/requirements.lock \
 && /opt/venv/bin/pip install --no-compile --no-deps /wheels/*.whl \
 && /opt/venv/bin/pip uninstall --yes pip setuptools \
 && python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="dra-quota-reconciler" \
      org.opencontainers.image.description="Kueue-compatible quota reconciler for GPUs requested through DRA" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The base image ships the standard library without bytecode; compile it once
# here so nothing is compiled (or written) at start.
RUN python -m compileall -q -j 0 "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
COPY --from=venv /opt/venv /opt/venv
# kueue_build_info's labels (reconciler/observability/build_info.py), e.g.
#   --build-arg BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" --build-arg GIT_COMMIT="$(git rev-parse HEAD)"
#   --build-arg GIT_VERSION="$(git describe --tags --dirty --always)"
# Left empty, the build date is when the wheel was installed in the venv stage, the version the
# package's own. Last, so a new date rebuilds no earlier layer.
ARG BUILD_DATE=""
ARG GIT_VERSION=""
ARG GIT_COMMIT=""
ENV DRA_QUOTA_BUILD_DATE=$BUILD_DATE \
    DRA_QUOTA_GIT_VERSION=$GIT_VERSION \
    DRA_QUOTA_GIT_COMMIT=$GIT_COMMIT
USER 65532:65532
# Metrics, health probes, the visibility API (HTTPS, 8082) and the admission webhooks (HTTPS; the
# Configuration's webhook.port).
EXPOSE 8080 8081 8082 9443
ENTRYPOINT ["reconciler"]
CMD ["run", "--config", "/etc/dra-quota/config.yaml", "--metrics-bind-address", ":8080", "--health-probe-bind-address", ":8081", "--log-format", "json"]
