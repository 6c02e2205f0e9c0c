#!/usr/bin/env bash
# Installs what the Python bridge needs and the machine may lack, for ONE interpreter (Debian's
# /usr/bin/python3 unless NAPI_DLPACK_PYTHON says otherwise; build.sh uses the same):
#   - its headers and python3-config: Debian's python3-dev (apt; needs root or sudo), only when
#     "$NAPI_DLPACK_PYTHON-config" is missing;
#   - pip for it (Debian's python3-pip), only when `python -m pip` is missing;
#   - numpy from PyPI, into .python-packages/ in this folder (pip --target: nothing outside the
#     repository, no virtualenv, no conflict with Debian's externally managed Python), only when
#     that folder does not hold the pinned version yet;
#   - Debian's python3-torch (torch 1.13, CPU), for the torch case of the tests, only with
#     Debian's python3 and when it is missing (about 10 MB over the libtorch that the torch peer
#     suite installs anyway, plus sympy and a few small Python packages).
# Idempotent. Cost on this kind of machine: python3-dev is usually there already; numpy is one
# wheel (about 17 MB, about 10 s).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${NAPI_DLPACK_PYTHON:-/usr/bin/python3}"
PYTHON_CONFIG="${NAPI_DLPACK_PYTHON_CONFIG:-$PYTHON-config}"
NUMPY_VERSION="2.4.6" # DLPack 1.x export and import (read-only flag) since numpy 2.1
TARGET="$HERE/.python-packages"

SUDO=()
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: apt-get not found; install $* by hand" >&2
    exit 1
  fi
  local candidate
  candidate="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then "${SUDO[@]}" apt-get update -qq; fi
  if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; then
    # Stale lists point at files the mirror no longer has: refresh once and retry.
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
  fi
}

if [ ! -x "$PYTHON_CONFIG" ]; then
  echo "install-deps: $PYTHON_CONFIG missing: installing python3-dev"
  apt_install python3-dev
fi
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  echo "install-deps: pip missing for $PYTHON: installing python3-pip"
  apt_install python3-pip
fi

# torch, where it installs without gigabytes: Debian's python3-torch (1.13, CPU; legacy DLPack
# only), for Debian's python3. PyPI's Linux torch wheels pull in the CUDA libraries.
TORCH_INIT=/usr/lib/python3/dist-packages/torch/__init__.py
if [ "$PYTHON" = /usr/bin/python3 ] && [ ! -f "$TORCH_INIT" ]; then
  echo "install-deps: installing python3-torch (Debian, torch 1.13 CPU)"
  apt_install python3-torch
fi

if [ -f "$TARGET/numpy-$NUMPY_VERSION.dist-info/METADATA" ]; then
  echo "install-deps: numpy $NUMPY_VERSION already in $TARGET"
else
  echo "install-deps: numpy $NUMPY_VERSION into $TARGET"
  rm -rf "$TARGET"
  "$PYTHON" -m pip install --disable-pip-version-check --no-input --quiet --no-cache-dir \
    --only-binary=:all: --target "$TARGET" "numpy==$NUMPY_VERSION"
fi
echo "install-deps: done"
