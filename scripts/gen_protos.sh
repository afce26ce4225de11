#!/usr/bin/env bash
# Regenerate proto/*_pb2.py, *_pb2_grpc.py and *.pyi from proto/*.proto.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. proto/*.proto
rm -f proto/common_pb2_grpc.py
