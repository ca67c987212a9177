"""Generated gRPC/protobuf modules (see e2e/testbed/protos/generate.sh)."""
