#!/bin/sh
# Server CPU per hostile call, the figures of docs/security.md ("Measured"): runs
# tests/integration/hostile.test.mjs against BIN (default build/context-loader; pass
# build-asan/context-loader for the sanitizer build), then tests/bench/c-ops.lua
# (single C operations of stock Lua 5.4). Both run in a session of their own at top
# priority (its scheduler autogroup and nice at -19, which needs root), so that the
# server holds a whole core whatever else the machine runs: the run-time slice is
# wall-clock time, and a server that holds a fifth of a core gets a fifth of the CPU
# within it, which says nothing of the bound. Prints the load average around the run.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$ROOT/build/context-loader}
at_top() { # runs "$@" in its own session at top priority (without root: as it is)
  setsid -w sh -c 'echo -19 > /proc/$$/autogroup 2>/dev/null; exec nice -n -19 "$@"' sh "$@"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
at_top env -u CL_RELEASE_BIN CL_BIN="$BIN" node --test "$ROOT/tests/integration/hostile.test.mjs" 2>&1 |
  grep -E '^# (server CPU|hostile_|six memory|pass |fail )' | sed 's/^# //'
at_top lua5.4 "$ROOT/tests/bench/c-ops.lua"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
