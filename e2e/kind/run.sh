#!/usr/bin/env bash
# Runs the e2e scenarios on a kind cluster with a real kubelet and the fake
# NVIDIA DRA driver's kubelet plugin.
#
# NEEDS DOCKER AND KIND. It cannot run on the project's CI machines (no Docker
# engine there); see e2e/kind/README.md for what is tested there instead.
#
#   e2e/kind/run.sh              create cluster, build + load images, deploy, test
#   KEEP_CLUSTER=1 e2e/kind/run.sh   leave the cluster running afterwards
#
# Environment:
#   CLUSTER_NAME         kind cluster name (default dra-quota-e2e)
#   KIND_NODE_IMAGE      node image (default kindest/node:v1.36.1, as in kind-config.yaml)
#   DRIVER_IMAGE         fake driver image tag (default fake-dra-driver:dev)
#   CONTROLLER_IMAGE     controller image tag (default dra-quota-reconciler:dev)
#   CONTROLLER_DOCKERFILE   (default ./Dockerfile at the repository root)
#   CONTROLLER_MANIFESTS    kustomize directory of the controller (default manifests/,
#                           the production base), applied with `kubectl apply
#                           --server-side -k`; its Deployment then runs $CONTROLLER_IMAGE
#   PYTEST_ARGS          what to run (default: e2e -m kind)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

CLUSTER_NAME="${CLUSTER_NAME:-dra-quota-e2e}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:v1.36.1}"
DRIVER_IMAGE="${DRIVER_IMAGE:-fake-dra-driver:dev}"
CONTROLLER_IMAGE="${CONTROLLER_IMAGE:-dra-quota-reconciler:dev}"
CONTROLLER_DOCKERFILE="${CONTROLLER_DOCKERFILE:-$root/Dockerfile}"
CONTROLLER_MANIFESTS="${CONTROLLER_MANIFESTS:-$root/manifests}"
PYTEST_ARGS="${PYTEST_ARGS:-e2e -m kind}"
PYTHON="${PYTHON:-$root/.venv/bin/python}"

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "run.sh: '$tool' is required (see e2e/kind/README.md)" >&2; exit 2; }
done
docker info >/dev/null 2>&1 || { echo "run.sh: no Docker engine reachable" >&2; exit 2; }

kubeconfig="$(mktemp -t kind-kubeconfig.XXXXXX)"
cleanup() {
  if [[ -z "${KEEP_CLUSTER:-}" ]]; then
    kind delete cluster --name "$CLUSTER_NAME" || true
  else
    echo "cluster $CLUSTER_NAME kept; KUBECONFIG=$kubeconfig"
  fi
}
trap cleanup EXIT

echo "== creating kind cluster $CLUSTER_NAME ($KIND_NODE_IMAGE)"
if ! kind get clusters | grep -qx "$CLUSTER_NAME"; then
  kind create cluster --name "$CLUSTER_NAME" --image "$KIND_NODE_IMAGE" \
    --config "$here/kind-config.yaml" --wait 120s
fi
kind get kubeconfig --name "$CLUSTER_NAME" > "$kubeconfig"
export KUBECONFIG="$kubeconfig"

echo "== building and loading the fake driver image $DRIVER_IMAGE"
docker build -f "$here/Dockerfile.driver" -t "$DRIVER_IMAGE" "$root"
kind load docker-image --name "$CLUSTER_NAME" "$DRIVER_IMAGE"

if [[ -f "$CONTROLLER_DOCKERFILE" ]]; then
  echo "== building and loading the controller image $CONTROLLER_IMAGE"
  docker build -f "$CONTROLLER_DOCKERFILE" -t "$CONTROLLER_IMAGE" "$root"
  kind load docker-image --name "$CLUSTER_NAME" "$CONTROLLER_IMAGE"
else
  echo "!! $CONTROLLER_DOCKERFILE not found: controller image not built" >&2
fi

echo "== deploying the fake DRA driver"
sed "s|image: fake-dra-driver:dev|image: $DRIVER_IMAGE|" "$here/manifests/fake-dra-driver.yaml" |
  kubectl apply -f -
kubectl -n fake-dra-driver rollout status daemonset/fake-dra-driver-kubelet-plugin --timeout=180s

echo "== waiting for the worker's ResourceSlice"
for _ in $(seq 1 60); do
  if kubectl get resourceslices -o jsonpath='{range .items[*]}{.spec.driver}{"\n"}{end}' |
      grep -qx gpu.nvidia.com; then
    break
  fi
  sleep 2
done
kubectl get resourceslices -o wide

echo "== deploying the controller from $CONTROLLER_MANIFESTS (kustomize)"
kubectl apply --server-side -k "$CONTROLLER_MANIFESTS"
# The base names the release tag; kind has the image built above.
kubectl -n dra-quota-system set image deployment/dra-quota-reconciler "reconciler=$CONTROLLER_IMAGE"
kubectl -n dra-quota-system rollout status deployment/dra-quota-reconciler --timeout=180s

echo "== running: pytest $PYTEST_ARGS (E2E_KUBECONFIG=$kubeconfig)"
# shellcheck disable=SC2086
E2E_KUBECONFIG="$kubeconfig" E2E_TARGET=kind "$PYTHON" -m pytest $PYTEST_ARGS
