#!/bin/bash
# Instructions per request, stable on a noisy machine: runs
# context-loader under valgrind --tool=callgrind with collection on only inside
# event_base_loop (so start-up, tool loading and shutdown are excluded), sends a fixed
# mix - an MCP initialize, then N ad hoc REST reads and N MCP tools/call of the
# benchmark query_object_instance request, one at a time - against the canned upstream,
# and prints instructions per request and the top functions (callgrind_annotate).
# Not part of scripts/test.
# Usage: tests/bench/callgrind.sh [BUILD_DIR]   (default build-bench, RelWithDebInfo)
#   N=200 TOP=10 NO_BUILD=1; KEEP_WORK=1 keeps the callgrind.out file; MCP_FORMAT=toon
#   asks the MCP calls for TOON text instead of JSON.
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
N=${N:-200}
TOP=${TOP:-10}

bench_install valgrind nginx curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
bench_work

start_sim disabled
capture_canned
start_upstream
GW_WRAP="valgrind --tool=callgrind --collect-atstart=no --toggle-collect=event_base_loop
  --callgrind-out-file=$WORK/callgrind.out" start_gateway
sent=$(node "$BENCH_DIR/mix.mjs" "$GW" "$N")
bench_stop "$GW_PID" # SIGTERM: the loop exits, callgrind writes its file
total=$(awk '/^(summary|totals):/ {print $2; exit}' "$WORK/callgrind.out")
echo "== callgrind: $sent requests (1 initialize + 1 notification + $N REST + $N MCP tools/call)"
awk -v t="$total" -v n="$sent" 'BEGIN { printf "instructions in the event loop: %d\ninstructions per request: %.0f\n\n", t, t / n }'
# Function lines only, paths shortened; the Debian liblua5.4 is stripped, so its
# functions show as addresses of liblua5.4.so.
fn_lines() { awk '/^ *[0-9,]+ \(/ && !/PROGRAM TOTALS/ && /\]$/' | sed -E 's#/[^ ]*/(src/)#\1#; s#\[/[^]]*/([^/]*)\]#[\1]#'; }
echo "== top $TOP functions by self instructions"
callgrind_annotate --threshold=100 "$WORK/callgrind.out" 2>/dev/null | fn_lines | head -n "$TOP"
echo
echo "== where the project's code spends it (inclusive, src/ only)"
callgrind_annotate --inclusive=yes --threshold=100 "$WORK/callgrind.out" 2>/dev/null | fn_lines |
  grep ' src/' | grep -v -E 'main\.c:main|below main' | head -n 15
echo
echo "== self instructions by library"
callgrind_annotate --threshold=100 "$WORK/callgrind.out" 2>/dev/null | fn_lines |
  awk '{ n = $1; gsub(",", "", n); lib = $NF; s[lib] += n; t += n }
       END { for (k in s) printf "%6.1f%%  %s\n", 100 * s[k] / t, k }' | sort -rn | head -6
if [ -n "${KEEP_WORK:-}" ]; then echo "callgrind file: $WORK/callgrind.out"; fi
