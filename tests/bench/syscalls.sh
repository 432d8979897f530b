#!/bin/bash
# System calls per request: strace -c attached to context-loader while wrk sends the
# benchmark request (CONNS connections, default 8, DURATION seconds, default 5), printed
# per request. Counts, not times, are the point (strace slows every call down). Not part
# of scripts/test.
# TARGET=rest (default): the ad hoc REST read. TARGET=managed: the ad hoc MCP call, then
# the managed MCP call (capture enabled, bkn_context of the captured interaction) with
# Trace Core the canned stand-in of gateway-bench.sh, each counted apart, then what the
# managed call adds per call and the connections the gateway opened (connect calls).
# Usage: tests/bench/syscalls.sh [BUILD_DIR]   (default build-bench; NO_BUILD=1)
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
DURATION=${DURATION:-5}
CONNS=${CONNS:-8}
TARGET=${TARGET:-rest}
case "$TARGET" in rest | managed) ;; *) echo "TARGET=rest or TARGET=managed" >&2; exit 2 ;; esac

bench_install wrk nginx strace curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
bench_work
start_sim disabled
capture_canned
start_upstream
if [ "$TARGET" = managed ]; then
  start_trace_core
  start_gateway CL_TRACE_CORE_CAPTURE_POLICY_TTL_S=1 BKN_TRACE_CORE_URL="$TRACE_CORE"
else
  start_gateway
fi
AUTH="authorization: Bearer $TOKEN"

count() { # label url body headers: wrk under strace, one table per request
  curl -sf -o /dev/null -X POST "$2" -H 'content-type: application/json' -H "$AUTH" \
    ${SID:+-H "accept: $MCP_ACCEPT" -H "mcp-session-id: $SID"} --data-binary @"$3"
  strace -f -c -o "$WORK/strace-$1.txt" -p "$GW_PID" &
  spid=$!
  sleep 1
  line=$(WRK_BODY_FILE=$3 WRK_HEADERS=$4 \
    wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$BENCH_DIR/wrk-post.lua" "$2" | grep '^WRK ')
  kill -INT "$spid"; wait "$spid" 2>/dev/null || true
  reqs=$(echo "$line" | awk '{print $5}')
  bad=$(echo "$line" | awk '{print $6 + $7}')
  [ "$bad" = 0 ] || { echo "$1: $bad failed calls" >&2; exit 1; }
  awk -v n="$reqs" '$1 ~ /^[0-9.]+$/ && NF >= 5 { c = $4; name = $NF; if (c + 0 > 0 && name != "total") printf "%s %.3f\n", name, c / n }' \
    "$WORK/strace-$1.txt" | sort -k2 -rn >"$WORK/per-$1.txt"
  echo "$reqs" >"$WORK/reqs-$1.txt"
}

if [ "$TARGET" = rest ]; then
  printf '%s' "$REST_ARGS" >"$WORK/rest.json"
  count rest "$GW$PREFIX/kn/query_object_instance" "$WORK/rest.json" "$AUTH"
  echo "== system calls per request ($(cat "$WORK/reqs-rest.txt") REST reads under strace, $CONNS connections)"
  awk '{ printf "%-14s %8.2f\n", $1, $2 }' "$WORK/per-rest.txt" | head -12
  exit 0
fi

mcp_session
mcp_call_body "$REST_ARGS" >"$WORK/mcp.json"
MCPH="$AUTH|accept: $MCP_ACCEPT|mcp-session-id: $SID"
count adhoc "$GW$PREFIX/mcp" "$WORK/mcp.json" "$MCPH"
trace_core_capture enabled
sleep 2
cp "$WORK/tc/managed.json" "$WORK/managed.json"
curl -sf -X POST "$GW$PREFIX/mcp" -H 'content-type: application/json' -H "$AUTH" -H "accept: $MCP_ACCEPT" \
  -H "mcp-session-id: $SID" --data-binary @"$WORK/managed.json" | grep -q bkn_receipt ||
  { echo "the managed call has no receipt" >&2; exit 1; }
count managed "$GW$PREFIX/mcp" "$WORK/managed.json" "$MCPH"
echo "== system calls per MCP call, $CONNS connections, Trace Core the canned stand-in"
echo "   ad hoc: $(cat "$WORK/reqs-adhoc.txt") calls, managed: $(cat "$WORK/reqs-managed.txt") calls under strace"
printf '%-14s %8s %8s %8s\n' syscall "ad hoc" managed added
join -a1 -a2 -e 0 -o 0,1.2,2.2 <(sort "$WORK/per-adhoc.txt") <(sort "$WORK/per-managed.txt") |
  awk '{ printf "%-14s %8.2f %8.2f %8.2f\n", $1, $2, $3, $3 - $2; a += $2; m += $3 }
       END { printf "%-14s %8.2f %8.2f %8.2f\n", "total", a, m, m - a }' | sort -k3 -rn
