#!/usr/bin/env bash
# Builds the plain C exchange-table fixture target/exchange-c/exchange_c.node from
# __test__/native/exchange-c/exchange_c.c and include/napi_dlpack.h (the header only). Works from any
# cwd; does nothing if the output is up to date.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../c-addon/build-fixture.sh" exchange-c __test__/native/exchange-c/exchange_c.c exchange_c.node
