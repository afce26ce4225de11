#!/usr/bin/env bash
# Build the vfl image (vfl:local) without pulling anything from an image registry.
#
# Usage (from anywhere; root for debootstrap): deploy/build_image.sh
#  1. Wheels: deploy/wheels/deps gets CPU torch 2.13.0 and every dependency with
#     `pip wheel` (your pip configuration decides the indexes; add PIP_ARGS, e.g.
#     "--extra-index-url https://download.pytorch.org/whl/cpu"). Air-gapped: make that
#     folder on a connected machine with the same Python (3.11) and copy it here; the step
#     is skipped when it already holds a torch wheel. deploy/wheels/project gets this
#     project's wheel, rebuilt every time (offline: setuptools from deploy/wheels/deps).
#  2. Base image $VFL_BASE (default vfl-base:bookworm), only if docker does not have it:
#     `docker import` of a root filesystem with python3.11 and venv, either the tarball
#     $VFL_ROOTFS_TAR you bring, or one made with debootstrap from $DEBIAN_MIRROR (default
#     http://deb.debian.org/debian; a local mirror or file:/// path works offline).
#  3. `docker build` of deploy/Dockerfile with the classic builder, which uses the local
#     base image and never contacts a registry; the image it replaces is removed.
# Needs docker, debootstrap and root for step 2 (deploy/host_setup.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
base=${VFL_BASE:-vfl-base:bookworm}
image=${VFL_IMAGE:-vfl:local}
cache=${VFL_BUILD_CACHE:-/var/tmp/vfl-build}
python=${PYTHON:-python3}

# The project is built from a copy of its source files (git ls-files: tracked and new,
# not ignored), so no build/ or *.egg-info lands in the working tree.
src=$(mktemp -d "${TMPDIR:-/tmp}/vfl-src.XXXXXX")
trap 'rm -rf "$src"' EXIT
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -c) |
  tar -x -C "$src"

if ! ls "$here"/wheels/deps/torch-2.13.0*.whl > /dev/null 2>&1; then
  if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "error: the base image has Python 3.11; build the wheels with a Python 3.11" \
      "(set PYTHON=python3.11) or bring a deploy/wheels/deps folder made elsewhere" >&2
    exit 2
  fi
  echo "dependency wheels -> $here/wheels/deps" >&2
  # shellcheck disable=SC2086 # PIP_ARGS is a list of options
  "$python" -m pip wheel --quiet --wheel-dir "$here/wheels/deps" ${PIP_ARGS:-} \
    torch==2.13.0 "setuptools>=68" "$src"
fi
# This project, always rebuilt, offline: its build backend (setuptools) comes from the
# dependency wheels.
rm -rf "$here/wheels/project" "$here"/wheels/deps/vfl_platform-*.whl
"$python" -m pip wheel --quiet --no-deps --no-index --find-links "$here/wheels/deps" \
  --wheel-dir "$here/wheels/project" "$src"

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
old=$(docker image inspect --format '{{.Id}}' "$image" 2> /dev/null || true)
DOCKER_BUILDKIT=0 docker build --quiet --tag "$image" --build-arg BASE="$base" "$here" > /dev/null
# The tag moved to the new image: remove the previous one rather than leave it untagged
# (docker refuses while a container still uses it; `docker image prune` then does it).
new=$(docker image inspect --format '{{.Id}}' "$image")
if [ -n "$old" ] && [ "$old" != "$new" ]; then
  docker image rm "$old" > /dev/null 2>&1 ||
    echo "note: the previous $image ($old) is still used by a container; kept" >&2
fi
docker image inspect "$image" --format "$image: {{.Size}} bytes, user {{.Config.User}}"
