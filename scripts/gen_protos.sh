#!/usr/bin/env bash
# Regenerate proto/*_pb2.py, *_pb2_grpc.py and *.pyi from proto/*.proto.
# The files are compiled as `vfl/proto/*.proto`, their installed path, so the generated
# code imports `vfl.proto.…` and registers names no other package's protos use.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-.venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/vfl/proto"
cp proto/*.proto "$work/vfl/proto/"
(cd "$work" && "$OLDPWD/$python" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. \
  --grpc_python_out=. vfl/proto/*.proto)
rm -f "$work/vfl/proto/common_pb2_grpc.py"
cp "$work"/vfl/proto/*_pb2*.py* proto/
