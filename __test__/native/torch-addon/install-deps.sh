#!/usr/bin/env bash
# Installs what __test__/native/torch-addon/build.sh needs on Debian bookworm (and
# derivatives): libtorch-dev (torch 1.13.1, CPU; headers + libtorch_cpu/libc10)
# and g++. Idempotent: does nothing when both are installed, and runs
# `apt-get update` only when the package lists do not know libtorch-dev yet
# (or when an install from stale lists fails).
#
# Cost on a fresh bookworm image (measured): 172 packages, 130 MB download,
# 527 MB on disk, about 50 s (libtorch1.13 pulls in OpenCV, FFmpeg, GDAL, Qt5
# libraries as hard dependencies; --no-install-recommends keeps it to those).
# Run as root (or with sudo available).
set -euo pipefail

# libdlpack-dev (DLPack 0.6's dlpack/dlpack.h, 7 kB) for __test__/native/c-addon/dlpack-coexist.sh.
PACKAGES=(libtorch-dev g++ libdlpack-dev)

SUDO=()
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    echo "install-deps: needs root (or sudo) to run apt-get" >&2
    exit 1
  fi
fi

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

missing=()
for package in "${PACKAGES[@]}"; do
  installed "$package" || missing+=("$package")
done
if [ "${#missing[@]}" = 0 ]; then
  echo "install-deps: already installed: ${PACKAGES[*]}"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: apt-get not found; install ${missing[*]} (torch 1.13 CPU) by hand" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_install() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

# Update the lists only if they cannot resolve every missing package.
needs_update=0
for package in "${missing[@]}"; do
  candidate="$(apt-cache policy "$package" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then needs_update=1; fi
done
if [ "$needs_update" = 1 ]; then
  echo "install-deps: apt-get update"
  "${SUDO[@]}" apt-get update -qq
fi

echo "install-deps: installing ${missing[*]}"
if ! apt_install; then
  # Stale lists point at files the mirror no longer has: refresh once and retry.
  echo "install-deps: install failed; apt-get update and retry" >&2
  "${SUDO[@]}" apt-get update -qq
  apt_install
fi
echo "install-deps: done"
