#!/bin/bash
# JSON module vs lua-cjson: decode and encode MB/s of the project's
# cljson.so and Debian's lua-cjson on the same payloads, both from lua5.4, in one run
# (json-bench.lua; MB/s of the payload's JSON text, best of 3 rounds of MIN_TIME CPU
# seconds each). Not part of scripts/test.
# Usage: tests/bench/json-bench.sh [BUILD_DIR]   (default build-bench, RelWithDebInfo)
#   NO_BUILD=1 MIN_TIME=0.3
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
bench_install lua5.4 lua-cjson curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
bench_work
# the 10-row payload is the gateway benchmark's upstream body, taken from the simulator
start_sim disabled
capture_canned
bench_stop "$SIM_PID"
REPO=$ROOT LUA_CPATH="$BUILD/?.so;;" lua5.4 "$ROOT/tests/bench/json-bench.lua" "$WORK"
