#!/bin/bash
# System calls per request: strace -c attached to context-loader while wrk sends the
# benchmark REST read (8 connections, DURATION seconds, default 5), printed per request.
# Counts, not times, are the point (strace slows every call down). Not part of
# scripts/test.
# Usage: tests/bench/syscalls.sh [BUILD_DIR]   (default build-bench; NO_BUILD=1)
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
DURATION=${DURATION:-5}

bench_install wrk nginx strace curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
bench_work
start_sim disabled
capture_canned
start_upstream
start_gateway
printf '%s' "$REST_ARGS" >"$WORK/rest.json"
curl -sf -o /dev/null -X POST "$GW$PREFIX/kn/query_object_instance" -H "authorization: Bearer $TOKEN" \
  -H 'content-type: application/json' --data-binary @"$WORK/rest.json"
strace -f -c -o "$WORK/strace.txt" -p "$GW_PID" &
spid=$!
sleep 1
line=$(WRK_BODY_FILE=$WORK/rest.json WRK_HEADERS="authorization: Bearer $TOKEN" \
  wrk -t1 -c8 -d"${DURATION}s" -s "$BENCH_DIR/wrk-post.lua" "$GW$PREFIX/kn/query_object_instance" | grep '^WRK ')
kill -INT "$spid"; wait "$spid" 2>/dev/null || true
reqs=$(echo "$line" | awk '{print $5}')
echo "== system calls per request ($reqs REST reads under strace, 8 connections)"
awk -v n="$reqs" '$1 ~ /^[0-9.]+$/ && NF >= 5 { c = $4; name = $NF; if (c + 0 > 0) printf "%-14s %8.2f\n", name, c / n }' \
  "$WORK/strace.txt" | sort -k2 -rn | head -12
