#!/usr/bin/env bash
# Builds the plain C test addon target/c-addon/c_addon.node from
# __test__/native/c-addon/c_addon.c and include/napi_dlpack.h. Works from any cwd;
# does nothing if the output is up to date.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/build-fixture.sh" c-addon __test__/native/c-addon/c_addon.c c_addon.node
