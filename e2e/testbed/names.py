"""Names shared by the simulator, the fake driver and the tests."""

ANNOTATION_PREFIX = "testbed.dra-quota.dev/"
# Pod annotations read by the node simulator.
STALL_ANNOTATION = ANNOTATION_PREFIX + "stall"  # "true": never becomes Ready
FAIL_ANNOTATION = ANNOTATION_PREFIX + "fail"  # "true": ends Failed, exit code 1
RUN_SECONDS_ANNOTATION = ANNOTATION_PREFIX + "run-seconds"  # float, or "forever"

# Labels on objects the agents own.
SIMULATED_NODE_LABEL = ANNOTATION_PREFIX + "simulated"
MANAGED_BY_LABEL = ANNOTATION_PREFIX + "managed-by"

DRIVER_NAME = "gpu.nvidia.com"
DEVICE_CLASS_NAME = "gpu.nvidia.com"
DEVICE_CLASS_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
NODE_FIELD_MANAGER = "testbed-node-simulator"
DRIVER_FIELD_MANAGER = "testbed-fake-dra-driver"
