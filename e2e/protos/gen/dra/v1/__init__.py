"""Generated gRPC/protobuf modules (see e2e/protos/generate.sh)."""
