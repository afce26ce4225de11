#!/usr/bin/env bash
# Build the vfl image (vfl:local) without pulling anything from an image registry.
#
# Usage (from anywhere; root for debootstrap): deploy/build_image.sh
#  1. Wheels: deploy/wheels/deps gets CPU torch 2.13.0 and every dependency with
#     `pip wheel` (your pip configuration decides the indexes; add PIP_ARGS, e.g.
#     "--extra-index-url https://download.pytorch.org/whl/cpu"). Air-gapped: make that
#     folder on a connected machine with the same Python (3.11) and copy it here; the step
#     is skipped when it already holds a torch wheel. deploy/wheels/project gets this
#     project's wheel, rebuilt every time (offline, with the host's setuptools).
#  2. Base image $VFL_BASE (default vfl-base:bookworm), only if docker does not have it:
#     `docker import` of a root filesystem with python3.11 and venv, either the tarball
#     $VFL_ROOTFS_TAR you bring, or one made with debootstrap from $DEBIAN_MIRROR (default
#     http://deb.debian.org/debian; a local mirror or file:/// path works offline).
#  3. `docker build` of deploy/Dockerfile with the classic builder, which uses the local
#     base image and never contacts a registry.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
base=${VFL_BASE:-vfl-base:bookworm}
image=${VFL_IMAGE:-vfl:local}
cache=${VFL_BUILD_CACHE:-/var/tmp/vfl-build}
python=${PYTHON:-python3}

if ! ls "$here"/wheels/deps/torch-2.13.0*.whl > /dev/null 2>&1; then
  if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "error: the base image has Python 3.11; build the wheels with a Python 3.11" \
      "(set PYTHON=python3.11) or bring a deploy/wheels/deps folder made elsewhere" >&2
    exit 2
  fi
  echo "dependency wheels -> $here/wheels/deps" >&2
  # shellcheck disable=SC2086 # PIP_ARGS is a list of options
  "$python" -m pip wheel --quiet --wheel-dir "$here/wheels/deps" ${PIP_ARGS:-} \
    torch==2.13.0 "$repo"
fi
# This project, always rebuilt (no network: the host's setuptools builds it).
rm -rf "$here/wheels/project" "$here"/wheels/deps/vfl_platform-*.whl
"$python" -m pip wheel --quiet --no-deps --no-build-isolation \
  --wheel-dir "$here/wheels/project" "$repo"

if ! docker image inspect "$base" > /dev/null 2>&1; then
  if [ -n "${VFL_ROOTFS_TAR:-}" ]; then
    echo "base image $base <- $VFL_ROOTFS_TAR" >&2
    docker import "$VFL_ROOTFS_TAR" "$base" > /dev/null
  else
    rootfs="$cache/rootfs-bookworm"
    if [ ! -x "$rootfs/usr/bin/python3" ]; then
      echo "debootstrap bookworm -> $rootfs" >&2
      rm -rf "$rootfs" && mkdir -p "$cache"
      debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$cache/debootstrap.log"
      rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    fi
    echo "base image $base <- docker import $rootfs" >&2
    tar -C "$rootfs" -c . | docker import - "$base" > /dev/null
  fi
fi

echo "docker build $image (FROM $base)" >&2
DOCKER_BUILDKIT=0 docker build --quiet --tag "$image" --build-arg BASE="$base" "$here" > /dev/null
docker image inspect "$image" --format "$image: {{.Size}} bytes, user {{.Config.User}}"
